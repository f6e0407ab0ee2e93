"""The rules for stopping a run early (workflows/stop_rules.py) and how the debrief and the
result report them."""

from __future__ import annotations

import pytest

from reactive_temporal.contracts.result import AgentResult
from reactive_temporal.contracts.run import AgentConfig
from workflows.debrief_rules import build_fallback, collect_debrief_input, derive_outcome
from workflows.run_state import RunState
from workflows.stop_rules import STOP_ENDINGS, budget_ending, cancel_ending, timeout_ending
from workflows.turns import goal_achieved, is_success


def agent(**limits: object) -> AgentConfig:
    return AgentConfig.model_validate({"agent_id": "a", "model": "m", **limits})


@pytest.mark.parametrize(
    ("limits", "tokens", "cost", "note"),
    [
        ({}, 10**9, 10**6, None),
        ({"token_budget": 1000}, 1000, 0.0, None),  # at the budget is within it
        ({"token_budget": 1000}, 1001, 0.0, "token budget of 1,000 exceeded: 1,001 tokens used"),
        ({"cost_budget": 0.5}, 0, 0.5, None),
        ({"cost_budget": 0.5}, 0, 0.5001, "cost budget of $0.5000 exceeded: $0.5001 spent"),
        (
            {"token_budget": 10, "cost_budget": 0.01},
            11,
            1.0,
            "token budget of 10 exceeded: 11 tokens used",  # tokens are checked first
        ),
    ],
)
def test_budget_ending(limits, tokens, cost, note):
    ending = budget_ending(agent(**limits), tokens=tokens, cost=cost, last_text="so far")
    if note is None:
        assert ending is None
    else:
        assert ending is not None
        assert (ending.terminated_by, ending.output, ending.note) == (
            "budget_exceeded",
            "so far",
            note,
        )
        assert not ending.succeeded


def test_budgets_and_deadline_are_validated():
    for bad in (
        {"token_budget": 0},
        {"cost_budget": 0},
        {"cost_budget": -1},
        {"timeout_seconds": 0},
    ):
        with pytest.raises(ValueError):
            agent(**bad)


@pytest.mark.parametrize(
    ("seconds", "doing", "note"),
    [
        (30, "an LLM call", "deadline of 30 s reached during an LLM call"),
        (0.5, None, "deadline of 0.5 s reached"),
        (600, "tool http_get", "deadline of 10 min reached during tool http_get"),
        (86400, None, "deadline of 24 h reached"),
    ],
)
def test_timeout_ending(seconds, doing, note):
    ending = timeout_ending(seconds, last_text="partial", doing=doing)
    assert (ending.terminated_by, ending.output, ending.note) == ("timeout", "partial", note)


@pytest.mark.parametrize(
    ("reason", "note"),
    [
        (None, "cancelled"),
        ("", "cancelled"),
        ("  wrong\n  customer ", "cancelled: wrong customer"),
        ("x" * 600, "cancelled: " + "x" * 500 + "…"),
    ],
)
def test_cancel_ending(reason, note):
    ending = cancel_ending(reason, last_text="")
    assert (ending.terminated_by, ending.note) == ("cancelled", note)


def test_stop_endings_never_succeed_and_achieve_nothing():
    for ending in STOP_ENDINGS:
        assert is_success(ending, "a perfectly good answer") is False
        assert goal_achieved(ending) is False
        assert derive_outcome(ending, []) == "partial"


def test_the_note_is_the_results_error_and_the_debriefs_first_error():
    state = RunState(last_text="Halfway there.")
    state.end(timeout_ending(60, last_text=state.last_text, doing="an LLM call"))
    result = state.result("run-1", agent(), duration_ms=60_000)
    assert (result.terminated_by, result.output, result.success) == (
        "timeout",
        "Halfway there.",
        False,
    )
    assert result.error == "deadline of 60 s reached during an LLM call"

    debrief = build_fallback(collect_debrief_input(result, "the task", [], []))
    assert debrief.errors_encountered == ["Stopped: deadline of 60 s reached during an LLM call"]
    assert debrief.summary == (
        "The run was stopped (deadline of 60 s reached during an LLM call). "
        "Its last reply: Halfway there."
    )
    assert "Stopped: deadline of 60 s" in debrief.markdown
    assert debrief.outcome == "partial"


def test_an_llm_error_is_not_a_stop_note():
    result = AgentResult(
        output="", success=False, run_id="r", agent_id="a", terminated_by="llm_error", error="boom"
    )
    debrief_input = collect_debrief_input(result, "t", [], [])
    assert debrief_input.stop_note is None
    assert build_fallback(debrief_input).errors_encountered == []


def test_a_stop_with_no_answer_yet_says_so():
    result = AgentResult(
        output="", success=False, run_id="r", agent_id="a", terminated_by="cancelled",
        error="cancelled",
    )  # fmt: skip
    debrief = build_fallback(collect_debrief_input(result, "t", [], []))
    assert debrief.summary == "The run was stopped (cancelled). It had produced no answer yet."
