"""The approval rules (workflows/approval_rules.py): which calls wait, how they are named,
which decisions are refused and what the accepted ones record."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from temporalio.service import RPCError, RPCStatusCode

from reactive_temporal.api.control import run_closed
from reactive_temporal.contracts.approvals import ApprovalDecision, ApprovalRecord
from reactive_temporal.contracts.run import ToolCall
from workflows.approval_rules import (
    apply_decision,
    approval_id,
    approval_lines,
    decision_problem,
    denial_observation,
    free_id,
    needs_approval,
    pending_approval,
    timed_out,
)

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
RUN_TOOLS = ["calculator", "http_get", "wire_money"]


@pytest.mark.parametrize(
    ("tool", "approve", "marked", "expected"),
    [
        ("calculator", [], [], False),
        ("calculator", ["calculator"], [], True),
        ("http_get", ["calculator"], [], False),
        ("wire_money", [], ["wire_money"], True),  # @tool(approve=True)
        ("http_get", ["all"], [], True),
        ("final-answer", ["all"], [], False),  # meta-tools never wait
        ("not_a_tool", ["all", "not_a_tool"], [], False),  # unknown tools are refused anyway
    ],
)
def test_needs_approval(tool, approve, marked, expected):
    assert needs_approval(tool, approve, marked, RUN_TOOLS) is expected


@pytest.mark.parametrize(
    ("call_id", "taken", "expected"),
    [
        ("call_abc123", [], "call_abc123"),
        ("call_abc123", ["call_abc123"], "call-7"),  # a repeated id (some local models)
        ("", [], "call-7"),
        ("x" * 65, [], "call-7"),
        ("call 1; rm -rf /", [], "call-7"),
        ("\x1b[31mred", [], "call-7"),
    ],
)
def test_approval_id(call_id, taken, expected):
    assert approval_id(ToolCall(id=call_id, name="calculator"), 7, taken) == expected


def pending(*call_ids: str):
    return [
        pending_approval(
            ToolCall(id=c, name="calculator", arguments='{"expression": "1+1"}'),
            c,
            since=T0,
            iteration=2,
        )
        for c in call_ids
    ]


def decision(*call_ids: str, approve: bool = True, reason: str | None = None, by: str = "alice"):
    return ApprovalDecision(call_ids=list(call_ids), approve=approve, reason=reason, by=by)


def test_arguments_are_clipped_for_display():
    [p] = [
        pending_approval(
            ToolCall(id="c", name="t", arguments="x" * 900), "c", since=T0, iteration=1
        )
    ]
    assert len(p.arguments) == 501 and p.arguments.endswith("…")


@pytest.mark.parametrize(
    ("d", "problem"),
    [
        (decision("c1"), None),
        (decision(), None),  # every pending call
        (decision("c1", "c1"), None),  # a repeated id is one decision
        (decision("c9"), "unknown call id 'c9'; calls waiting for approval: c1, c2"),
        (decision("c1", approve=False), "a denial needs a reason"),
        (decision("c1", approve=False, reason="  "), "a denial needs a reason"),
        (decision("c1", by="  "), "say who decides"),
        (decision("c1", by="x" * 201), "--by is 201 characters; the limit is 200"),
        (decision("c1", reason="x" * 2001), "the reason is 2001 characters; the limit is 2000"),
        (decision("c1", by="a\x00b"), "NUL byte"),
        (decision("c0"), "call 'c0' was already denied by bob at 2026-11-30T12:01:00+00:00"),
    ],
)
def test_decision_problem(d, problem):
    earlier = [
        ApprovalRecord(
            call_id="c0", tool="calculator", arguments="{}", decision="denied", by="bob",
            at=T0 + timedelta(minutes=1), reason="no",
        )
    ]  # fmt: skip
    found = decision_problem(d, pending("c1", "c2"), earlier)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


def test_a_run_not_waiting_refuses_a_decision_for_all():
    assert decision_problem(decision(), [], []) == (
        "the run is not waiting for approval of any tool call"
    )


def test_apply_decision_records_who_when_why_and_leaves_the_rest_pending():
    left, records = apply_decision(
        decision("c2", approve=False, reason=" frozen ", by=" bob "), pending("c1", "c2"),
        now=T0 + timedelta(hours=1),
    )  # fmt: skip
    assert [p.call_id for p in left] == ["c1"]
    [r] = records
    assert (r.call_id, r.decision, r.by, r.reason, r.at, r.requested_at) == (
        "c2", "denied", "bob", "frozen", T0 + timedelta(hours=1), T0,
    )  # fmt: skip
    left, records = apply_decision(decision(), left, now=T0)
    assert left == [] and [(r.call_id, r.decision) for r in records] == [("c1", "approved")]


def test_a_second_decision_on_decided_calls_records_nothing():
    left, records = apply_decision(decision("c1"), [], now=T0)
    assert left == [] and records == []


def test_timed_out_denies_every_undecided_call():
    records = timed_out(pending("c1", "c2"), now=T0, timeout_seconds=86_400)
    assert [(r.call_id, r.decision, r.by) for r in records] == [
        ("c1", "denied", "timeout"),
        ("c2", "denied", "timeout"),
    ]
    assert records[0].reason == "no decision within 24 h (approval timeout)"
    assert denial_observation(records[0]) == (
        "[Tool call denied by timeout: no decision within 24 h (approval timeout). "
        "The tool calculator did not run.]"
    )


def test_approval_lines():
    _, records = apply_decision(decision("c1", reason="checked"), pending("c1"), now=T0)
    assert approval_lines(records) == [
        "- ✓ approved `calculator` (call c1) by alice at 2026-11-30T12:00:00+00:00 — checked"
    ]


@pytest.mark.parametrize(
    ("message", "closed"),
    [
        ("workflow update was aborted by closing workflow", True),
        ("workflow execution already completed", True),
        ("Namespace prod is not found.", False),
        ("context deadline exceeded", False),
    ],
)
def test_a_decision_that_meets_the_run_s_end_is_told_so(message: str, closed: bool):
    """A decision racing the run's end got Temporal's raw error, which ended `run`'s inline
    approval prompt (it waits for ValueError, as `approve` and `deny` are documented)."""
    assert run_closed(RPCError(message, RPCStatusCode.FAILED_PRECONDITION, b"")) is closed


def test_a_taken_id_gets_the_first_free_suffix():
    assert free_id("call-4", []) == "call-4"
    assert free_id("call-4", ["call-4", "call-4-2"]) == "call-4-3"
