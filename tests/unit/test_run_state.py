"""A run's state and how it ends: the bookkeeping AgentRunWorkflow delegates, without Temporal."""

from __future__ import annotations

import json

import pytest

from reactive_temporal.cli.progress_lines import progress_line
from reactive_temporal.contracts.debrief import RationaleDetail
from reactive_temporal.contracts.llm_payloads import LlmStepResult
from reactive_temporal.contracts.run import (
    AgentConfig,
    FinalAnswerCapture,
    RunProgress,
    ToolCall,
    ToolResult,
    Usage,
)
from workflows.run_state import RunState
from workflows.turns import Ending

AGENT = AgentConfig(agent_id="a", model="m", max_iterations=3)


def final_answer_call(output: str = "42", fmt: str = "text", call_id: str = "f1") -> ToolCall:
    arguments = json.dumps({"output": output, "format": fmt, "summary": "done"})
    return ToolCall(id=call_id, name="final-answer", arguments=arguments)


def ran_calculator(state: RunState, *, success: bool = True, content: str = "42") -> None:
    state.record_tool_results(
        [ToolResult(call_id="c1", name="calculator", success=success, content=content)]
    )


def test_an_ending_is_never_overridden():
    state = RunState(last_text="partial")
    state.fail("HTTP 400")
    state.end(Ending("end_turn", "later text"))
    state.end_at_iteration_cap()
    assert state.ending == Ending("llm_error", "partial")
    assert state.error == "HTTP 400"


def test_the_iteration_cap_ends_the_run_and_progress_says_so():
    state = RunState(iteration=3, last_text="still going")
    assert state.progress("run-1", AGENT).status == "running"
    state.end_at_iteration_cap()
    progress = state.progress("run-1", AGENT)
    assert (progress.status, progress.terminated_by) == ("completed", "max_iterations")
    result = state.result("run-1", AGENT, duration_ms=5)
    assert (result.terminated_by, result.output, result.success) == (
        "max_iterations",
        "still going",
        False,
    )
    assert result.metadata.iterations == 3


def test_the_operator_answer_ends_the_run_with_its_payload():
    state = RunState()
    state.end_if_operator_answered()
    assert not state.ended
    state.operator_answer = FinalAnswerCapture(output="stop here", format="markdown")
    state.end_if_operator_answered()
    result = state.result("run-1", AGENT, duration_ms=1)
    assert (result.terminated_by, result.output, result.format) == (
        "final_answer_tool",
        "stop here",
        "markdown",
    )
    assert result.final_answer == state.operator_answer and result.success


def test_accounting_for_a_reply_counts_tokens_cost_and_rationale():
    state = RunState(seq=2, iteration=1)
    step = LlmStepResult(
        content="  thinking  ",
        tool_calls=[ToolCall(id="c1", name="calculator")],
        usage=Usage(prompt_tokens=10, completion_tokens=5),
        cost=0.25,
        rationale={1: RationaleDetail(why="to add")},
    )
    state.account_for(step)
    assert (state.seq, state.steps, state.tokens, state.cost) == (3, 1, 15, 0.25)
    assert state.last_text == "thinking"
    assert [(r.iteration, r.tool_name) for r in state.rationale] == [(2, "calculator")]


def test_tool_results_are_recorded_and_only_known_tools_count_as_used():
    state = RunState(tool_names=["calculator"], iteration=0)
    state.record_tool_results(
        [
            ToolResult(call_id="c1", name="calculator", success=True, content="x" * 40),
            ToolResult(call_id="c2", name="teleport", success=False, content="[Tool error: no]"),
        ]
    )
    assert state.tools_used == ["calculator"]
    assert state.has_errors
    assert [(c.name, c.success, c.iteration) for c in state.tool_calls] == [
        ("calculator", True, 1),
        ("teleport", False, 1),
    ]
    assert state.observations == ["[Tool result]: " + "x" * 40]
    assert state.last_observation == "[Tool error: no]"


def test_final_answer_is_refused_until_required_tools_ran_then_accepted_once():
    agent = AGENT.model_copy(update={"required_tools": ["calculator"]})
    state = RunState(tool_names=["calculator"])
    refused = state.judge_final_answer(final_answer_call(), task="add", agent=agent)
    assert refused == "⚠️ Cannot finalize yet. Still need to call: calculator"
    assert not state.ended and state.has_errors

    ran_calculator(state)
    accepted = state.judge_final_answer(final_answer_call("42"), task="add", agent=agent)
    assert accepted == "✓ final-answer accepted: 42"
    assert state.ending == Ending("final_answer_tool", "42", state.ending.capture)  # type: ignore[union-attr]

    second = state.judge_final_answer(final_answer_call("43", call_id="f2"), task="t", agent=agent)
    assert second is None  # the run already ended in this turn
    assert state.ending.output == "42"  # type: ignore[union-attr]


def test_meta_tools_are_not_reported_as_tools_used():
    state = RunState(tool_names=["calculator"])
    ran_calculator(state)
    state.judge_final_answer(final_answer_call(), task="t", agent=AGENT)
    assert state.tools_used == ["calculator", "final-answer"]
    assert state.result("r", AGENT, duration_ms=0).tools_used == ["calculator"]


def test_final_answer_is_offered_once_its_gate_opens():
    state = RunState(tool_names=["calculator"])
    assert state.visible_tools(AGENT) == ["calculator"]
    ran_calculator(state)
    state.complete_turn(ran_tools=True)
    assert state.visible_tools(AGENT) == ["calculator", "final-answer"]


def test_the_state_travels_whole():
    state = RunState(tool_names=["calculator"], last_text="t")
    ran_calculator(state)
    state.fail("boom")
    assert RunState.model_validate(state.model_dump()) == state


# -- live progress never shows an iteration beyond the run's real count --------------------------


@pytest.mark.parametrize(
    ("status", "iteration", "max_iterations", "shown"),
    [
        ("running", 0, 10, 1),  # the first iteration is in progress
        ("running", 4, 10, 5),
        ("running", 10, 10, 10),  # the cap reached, the run not yet marked ended
        ("completed", 2, 10, 2),  # ended after two iterations: shows two, not three
        ("completed", 10, 10, 10),
    ],
)
def test_the_iteration_shown_is_never_beyond_the_real_count(
    status: str, iteration: int, max_iterations: int, shown: int
):
    progress = RunProgress(
        run_id="r", agent_id="a", status=status, iteration=iteration, max_iterations=max_iterations
    )
    assert progress.current_iteration == shown
    line = progress_line(progress)
    assert f"{shown}/{max_iterations}" in line
    assert f"{shown + 1}/" not in line
