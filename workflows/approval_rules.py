"""Approval of tool calls, as pure rules: which calls need a person, how a waiting call is
named, whether a decision is acceptable, what it records, what the model reads after a denial.

The run loop parks the calls that need approval and waits (no activity running) until each
is decided through the validated `decide_tool_calls` update or the approval timeout passes;
everything it decides is here, unit-tested without Temporal.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from datetime import datetime

from reactive_temporal.contracts.approvals import (
    APPROVE_ALL,
    DECIDER_MAX_CHARS,
    REASON_MAX_CHARS,
    ApprovalDecision,
    ApprovalRecord,
    PendingApproval,
)
from reactive_temporal.contracts.run import ToolCall
from workflows.final_answer import META_TOOLS
from workflows.stop_rules import duration_text

ARGUMENTS_PREVIEW_CHARS = 500
TIMEOUT_DECIDER = "timeout"
_USABLE_CALL_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


def needs_approval(
    tool: str,
    approve_tools: Collection[str],
    marked_tools: Collection[str],
    run_tools: Collection[str],
) -> bool:
    """A call needs approval when its tool is one of the run's tools and the agent names it
    (or `all`), or the worker marks it `@tool(approve=True)`. Meta-tools and unknown tools
    never do (an unknown tool is refused without running)."""
    if tool in META_TOOLS or tool not in run_tools:
        return False
    return tool in marked_tools or tool in approve_tools or APPROVE_ALL in approve_tools


def free_id(key: str, taken: Collection[str]) -> str:
    """`key`, or `key-2`, `key-3`… the first not taken: a model's id may be another call's
    `call-<position>`, and two waiting calls with one id were approved together."""
    free, n = key, 1
    while free in taken:
        n += 1
        free = f"{key}-{n}"
    return free


def approval_id(call: ToolCall, seq: int, taken: Collection[str]) -> str:
    """How people name a waiting call: the model's call id when it is short, plain and
    unique among the calls pending; else `call-<transcript position>` (a model's ids are
    untrusted text, and may repeat)."""
    if _USABLE_CALL_ID.fullmatch(call.id) and call.id not in taken:
        return call.id
    return f"call-{seq}"


def pending_approval(
    call: ToolCall, call_id: str, *, since: datetime, iteration: int
) -> PendingApproval:
    arguments = call.arguments
    if len(arguments) > ARGUMENTS_PREVIEW_CHARS:
        arguments = arguments[:ARGUMENTS_PREVIEW_CHARS] + "…"
    return PendingApproval(
        call_id=call_id, tool=call.name, arguments=arguments, since=since, iteration=iteration
    )


def reason_problem(reason: str | None, *, approve: bool) -> str | None:
    """Why the run refuses a decision's reason, or None: the part of `decision_problem` a
    person typing the reason can mend (the inline question asks again)."""
    reason = reason or ""
    if not approve and not reason.strip():
        return "a denial needs a reason (--reason TEXT): the model reads it"
    if len(reason) > REASON_MAX_CHARS:
        return f"the reason is {len(reason)} characters; the limit is {REASON_MAX_CHARS}"
    if "\x00" in reason:
        return "the decision contains a NUL byte (\\x00), which cannot be stored"
    return None


def decision_problem(
    decision: ApprovalDecision,
    pending: Sequence[PendingApproval],
    decided: Sequence[ApprovalRecord],
) -> str | None:
    """Why the run refuses this decision (the update's validator raises it), or None."""
    by = decision.by.strip()
    if not by:
        return "say who decides (--by NAME)"
    if len(decision.by) > DECIDER_MAX_CHARS:
        return f"--by is {len(decision.by)} characters; the limit is {DECIDER_MAX_CHARS}"
    if "\x00" in by:
        return "the decision contains a NUL byte (\\x00), which cannot be stored"
    if (problem := reason_problem(decision.reason, approve=decision.approve)) is not None:
        return problem
    if not pending and not decision.call_ids:
        return "the run is not waiting for approval of any tool call"
    waiting = {p.call_id for p in pending}
    earlier = {r.call_id: r for r in decided}
    for call_id in dict.fromkeys(decision.call_ids):
        if call_id in waiting:
            continue
        if call_id in earlier:
            record = earlier[call_id]
            return (
                f"call {call_id!r} was already {record.decision} by {record.by} at "
                f"{record.at.isoformat(timespec='seconds')}"
            )
        listed = ", ".join(sorted(waiting)) or "none"
        return f"unknown call id {call_id!r}; calls waiting for approval: {listed}"
    return None


def apply_decision(
    decision: ApprovalDecision, pending: Sequence[PendingApproval], *, now: datetime
) -> tuple[list[PendingApproval], list[ApprovalRecord]]:
    """The calls still pending after a (validated) decision, and the records it makes."""
    chosen = set(decision.call_ids) or {p.call_id for p in pending}
    records = [
        _record(
            p,
            "approved" if decision.approve else "denied",
            by=decision.by.strip(),
            at=now,
            reason=(decision.reason or "").strip() or None,
        )
        for p in pending
        if p.call_id in chosen
    ]
    return [p for p in pending if p.call_id not in chosen], records


def timed_out(
    pending: Sequence[PendingApproval], *, now: datetime, timeout_seconds: float
) -> list[ApprovalRecord]:
    """Denials for every call still undecided when the approval timeout passed."""
    reason = f"no decision within {duration_text(timeout_seconds)} (approval timeout)"
    return [_record(p, "denied", by=TIMEOUT_DECIDER, at=now, reason=reason) for p in pending]


def denial_observation(record: ApprovalRecord) -> str:
    """What the model reads as a denied call's result."""
    return (
        f"[Tool call denied by {record.by}: {record.reason or 'no reason given'}. "
        f"The tool {record.tool} did not run.]"
    )


def approval_event_data(item: PendingApproval | ApprovalRecord) -> dict[str, object]:
    """An approval asked (pending) or decided, as the live output shows it."""
    if isinstance(item, PendingApproval):
        return {
            "call_id": item.call_id,
            "tool": item.tool,
            "arguments": item.arguments,
            "status": "pending",
        }
    return {
        "call_id": item.call_id,
        "tool": item.tool,
        "arguments": item.arguments,
        "status": item.decision,
        "by": item.by,
        "reason": item.reason,
    }


def approval_lines(records: Sequence[ApprovalRecord]) -> list[str]:
    """The debrief's Approvals section, one line per decision."""
    lines = []
    for r in records:
        mark = "✓ approved" if r.decision == "approved" else "✗ denied"
        why = f" — {r.reason}" if r.reason else ""
        lines.append(
            f"- {mark} `{r.tool}` (call {r.call_id}) by {r.by} at "
            f"{r.at.isoformat(timespec='seconds')}{why}"
        )
    return lines


def _record(
    p: PendingApproval, decision: str, *, by: str, at: datetime, reason: str | None
) -> ApprovalRecord:
    return ApprovalRecord(
        call_id=p.call_id,
        tool=p.tool,
        arguments=p.arguments,
        decision="approved" if decision == "approved" else "denied",
        by=by,
        at=at,
        reason=reason,
        requested_at=p.since,
    )
