"""Generated hostile replies and tool results through a run's state (workflows/run_state.py):
every record it keeps stays within its limit, and a long run's continue-as-new input within
a payload, whatever the model and its tools sent.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from pydantic_core import to_json

from reactive_temporal.contracts.approvals import APPROVE_ALL
from reactive_temporal.contracts.llm_payloads import LlmStepResult, RationaleDetail
from reactive_temporal.contracts.run import (
    FINAL_ANSWER_TOOL,
    TASK_MAX_CHARS,
    AgentConfig,
    AgentRunInput,
    RunContinuation,
    ToolCall,
    ToolResult,
)
from reactive_temporal.limits import (
    ERROR_RECORD_MAX_CHARS,
    MAX_TOOL_NAMES,
    OBSERVATION_MAX_CHARS,
    REPLY_CONTENT_MAX_CHARS,
    bound_reply,
)
from reactive_temporal.sanitize import clip
from tests.support.hostile import (
    PAYLOAD_BUDGET_BYTES,
    heaviest_run,
    hostile_ints,
    hostile_text,
    plain_text,
    storable_text,
)
from workflows.chat_rules import KEEP_OBSERVATIONS, OBSERVATIONS_MAX_CHARS
from workflows.run_state import OBSERVATION_PREVIEW_CHARS, RunState

AGENT = AgentConfig(agent_id="a", model="m", required_tools=["calculator"])

replies_text = storable_text(max_repeat=REPLY_CONTENT_MAX_CHARS).map(
    lambda text: bound_reply(text, [])[0] or ""  # as `llm_step` bounds a reply's text
)
tool_results = st.builds(
    ToolResult,
    call_id=plain_text,
    name=st.sampled_from(["calculator", "web_search"]) | storable_text(max_repeat=40),
    success=st.booleans(),
    content=storable_text(max_repeat=OBSERVATION_MAX_CHARS).map(  # as `run_tool` bounds it
        lambda content: clip(content, OBSERVATION_MAX_CHARS)
    ),
)


@given(st.lists(st.lists(tool_results, max_size=4), max_size=30))
def test_tool_results_are_kept_within_their_limits(turns: list[list[ToolResult]]):
    state = RunState(tool_names=["calculator"])
    for results in turns:
        state.record_tool_results(results)
        state.complete_turn(ran_tools=True)
    assert all(r.error is None or len(r.error) <= ERROR_RECORD_MAX_CHARS for r in state.tool_calls)
    assert state.last_observation is None or (
        len(state.last_observation) <= OBSERVATION_PREVIEW_CHARS + 1
    )
    assert len(state.observations) <= KEEP_OBSERVATIONS
    assert all(len(o) <= OBSERVATIONS_MAX_CHARS for o in state.observations)
    assert set(state.tools_used) <= {"calculator"}


@given(
    replies_text,
    st.lists(st.builds(ToolCall, id=plain_text, name=plain_text), max_size=20),
    st.dictionaries(hostile_ints, st.builds(RationaleDetail, why=plain_text), max_size=5),
    st.booleans(),
)
def test_a_reply_is_accounted_for_and_its_rationale_kept_only_for_its_calls(
    content: str, calls: list[ToolCall], rationale: dict[int, RationaleDetail], ran_tools: bool
):
    state = RunState(last_turn_ran_tools=ran_tools)
    state.account_for(LlmStepResult(content=content, tool_calls=calls, rationale=rationale))
    assert state.last_text == (content.strip() or "")
    assert len(state.rationale) <= len(calls)
    assert all(1 <= entry.iteration for entry in state.rationale)


@st.composite
def final_answer_calls(draw: st.DrawFn) -> ToolCall:
    fields = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "output": storable_text(max_repeat=30_000),
                "format": st.sampled_from(["text", "json", "csv"])
                | storable_text(max_repeat=100_000),
                "summary": storable_text(max_repeat=1_000),
            },
        )
    )
    return ToolCall(id="f1", name=FINAL_ANSWER_TOOL, arguments=json.dumps(fields))


@given(final_answer_calls(), st.booleans(), hostile_text(max_repeat=200))
@example(
    ToolCall(
        id="f1",
        name=FINAL_ANSWER_TOOL,
        arguments=json.dumps({"output": "x", "format": "f" * 100_000}),
    ),
    True,
    "t",
)
def test_a_final_answers_verdict_is_an_observation_within_the_limit(
    call: ToolCall, ran_calculator: bool, task: str
):
    """What the model reads of a refused answer is a tool's observation, within the limit of
    every observation (and the run's state keeps it as its last observation)."""
    state = RunState(tool_names=["calculator"], iteration=2)
    if ran_calculator:
        state.record_tool_results(
            [ToolResult(call_id="c", name="calculator", success=True, content="42")]
        )
    observation = state.judge_final_answer(call, task=task, agent=AGENT, limit_answer=True)
    assert observation is not None and len(observation) <= OBSERVATION_MAX_CHARS
    assert state.ended == observation.startswith("✓")


def heaviest_state() -> RunState:
    """A long run's state with every record as heavy as its limit allows (control characters,
    six bytes each in JSON): failed calls of made-up names, rationale, approvals, observations
    and the model's last reply."""
    state = heaviest_run()
    state.record_tool_results(
        [
            ToolResult(
                call_id="c", name="calculator", success=True, content="\x01" * OBSERVATION_MAX_CHARS
            )
        ]
        * 20
    )
    state.account_for(LlmStepResult(content=bound_reply("\x01" * REPLY_CONTENT_MAX_CHARS, [])[0]))
    return state


HEAVIEST = heaviest_state()


@settings(suppress_health_check=[HealthCheck.too_slow])  # its states are megabytes
@given(
    st.booleans(),
    st.lists(st.lists(tool_results, max_size=3), max_size=10),
    replies_text,
    storable_text(max_repeat=TASK_MAX_CHARS).map(lambda task: task[:TASK_MAX_CHARS]),
    st.lists(st.sampled_from(["calculator", APPROVE_ALL]), max_size=MAX_TOOL_NAMES),
)
@example(True, [], "", "\x01" * TASK_MAX_CHARS, ["calculator"] * MAX_TOOL_NAMES)
def test_a_long_runs_continue_as_new_input_fits_a_payload(
    heavy: bool,
    turns: list[list[ToolResult]],
    last_reply: str,
    task: str,
    approve_tools: list[str],
):
    """For any task the starters take and any state a hostile model drives the run to. (The
    agent's lists name the worker's tools, or its first step refuses the run; its system
    prompt is its developer's.)"""
    state = HEAVIEST.model_copy(deep=True) if heavy else RunState(tool_names=["calculator"])
    for results in turns:
        state.record_tool_results(results)
    state.account_for(LlmStepResult(content=last_reply))
    agent = AgentConfig(agent_id="a", model="m", approve_tools=approve_tools)
    try:
        run = AgentRunInput(task=task, agent=agent)
    except ValidationError:
        return  # refused where the run is started
    continuation = RunContinuation(
        state=state.compacted().model_dump(mode="json"),
        started_at=datetime(2026, 12, 1, tzinfo=UTC),
    )
    carried = run.model_copy(update={"continuation": continuation})
    assert len(to_json(carried)) <= PAYLOAD_BUDGET_BYTES
    RunState.model_validate(continuation.state)  # the next run takes it up
