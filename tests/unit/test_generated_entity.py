"""Generated hostile input through what the agent entity (AgentWorkflow) decides: the news of
runs its `run_finished` and `debrief_ready` signals carry (from runs, or sent by hand: any
number pydantic reads from JSON, `NaN` and 400-digit integers included), and the `chat`
update with its validator, whose accepted turns must make inputs within a payload.

A chat handler that raises anything but the entity's failure types (workflows/bugs.py) fails
its workflow task, on every retry: the entity answers no chat again.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from decimal import Decimal

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from reactive_temporal.contracts.debrief import (
    AgentDebrief,
    DebriefMetrics,
    RationaleEntry,
    ToolUsage,
)
from reactive_temporal.contracts.entity import CHAT_MESSAGE_MAX_CHARS, ChatMessage, ChatRequest
from reactive_temporal.contracts.llm_payloads import RationaleDetail
from reactive_temporal.contracts.run import AgentConfig, AgentRunInput
from reactive_temporal.js_numbers import js_number, js_round, js_round_text, to_fixed
from reactive_temporal.limits import CHAT_CONTEXT_MAX_CHARS, run_input_problem
from tests.support.hostile import (
    PAYLOAD_BUDGET_BYTES,
    PAYLOAD_MAX_BYTES,
    hostile_floats,
    hostile_ints,
    json_bytes,
    plain_text,
    sized,
    storable_text,
)
from tests.support.worst_parts import worst_agent
from workflows import chat_rules, debrief_markdown
from workflows.entity_chat import ChatPaths

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


# -- AgentWorkflow: what runs tell it, and chat -------------------------------------------------

tool_usages = st.builds(
    ToolUsage, name=storable_text(max_repeat=200), calls=hostile_ints, success_rate=hostile_floats
)
debriefs = st.builds(
    AgentDebrief,
    outcome=st.sampled_from(["success", "partial", "failed"]),
    summary=storable_text(max_repeat=30_000),
    key_findings=st.lists(storable_text(max_repeat=1_000), max_size=5),
    errors_encountered=st.lists(storable_text(max_repeat=1_000), max_size=5),
    confidence=storable_text(max_repeat=1_000),
    tools_used=st.lists(tool_usages, max_size=4),
    metrics=st.builds(
        DebriefMetrics,
        tokens=hostile_ints,
        duration_ms=hostile_ints,
        iterations=hostile_ints,
        cost=hostile_floats,
    ),
)
"""A debrief as a `run_finished` or `debrief_ready` signal may carry it: sent by a run, or by
hand (`temporal workflow signal`), with any number pydantic reads from JSON."""
observations = st.lists(storable_text(max_repeat=5_000), max_size=25)


@given(st.none() | debriefs, observations)
@example(
    AgentDebrief(
        outcome="success",
        summary="s",
        tools_used=[ToolUsage(name="t", calls=1, success_rate=math.nan)],
    ),
    [],
)
@example(
    AgentDebrief(
        outcome="success", summary="s", metrics=DebriefMetrics(duration_ms=10**400, cost=math.inf)
    ),
    [],
)
def test_chat_context_is_built_from_any_debrief_the_agent_may_hold(
    debrief: AgentDebrief | None, observations: list[str]
):
    """A NaN success rate made `round()` raise ValueError in the chat update's handler: not one
    of the entity's failure types, so its workflow task failed, again on every retry, and the
    entity answered no chat again; a 400-digit duration raised OverflowError (every chat failed
    until the agent's next run)."""
    context = chat_rules.build_context_summary(debrief, observations)
    assert len(context) <= CHAT_CONTEXT_MAX_CHARS


@st.composite
def chat_requests(draw: st.DrawFn) -> ChatRequest:
    """A chat turn as a hand-made client may send it, within the 2 MB the server takes."""
    agent = None
    if draw(st.booleans()):
        names = [draw(sized(128))] * draw(st.integers(0, 3_000))
        agent = AgentConfig.model_construct(
            **{
                **AgentConfig(agent_id="a", model="m").model_dump(),
                "system_prompt": draw(st.none() | sized(110_000)),
                "tools": draw(st.none() | st.just(names)),
                "required_tools": draw(st.just([]) | st.just(names[:300])),
                "debrief_model": draw(st.none() | sized(300)),
            }
        )
    return ChatRequest(
        message=draw(storable_text(max_repeat=25_000) | sized(CHAT_MESSAGE_MAX_CHARS)),
        use_tools=draw(st.none() | st.booleans()),
        max_iterations=draw(st.none() | st.integers(-1, 60)),
        agent=agent,
    )


@settings(suppress_health_check=[HealthCheck.too_slow])  # its agents are megabytes
@given(
    chat_requests(),
    st.none() | debriefs,
    observations,
    st.lists(
        st.builds(
            ChatMessage,
            role=st.sampled_from(["user", "assistant"]),
            content=sized(30_000),
            timestamp=st.just(T0),
        ),
        max_size=50,
    ),
    st.booleans(),
)
@example(  # a 1.97 MB update: 1,820 tool names and a prompt, each of control characters
    ChatRequest(
        message="fetch it",
        agent=AgentConfig.model_construct(
            **{
                **AgentConfig(agent_id="a", model="m").model_dump(),
                "system_prompt": "\x01" * 95_000,
                "tools": ["\x01" * 128] * 1_820,
            }
        ),
    ),
    AgentDebrief(outcome="success", summary="\x01" * CHAT_CONTEXT_MAX_CHARS),
    [],
    [ChatMessage(role="assistant", content="\x01" * 8_000, timestamp=T0)],
    True,
)
@example(  # the heaviest agent a chat takes, the longest message, context and history
    ChatRequest(message="\x01" * CHAT_MESSAGE_MAX_CHARS, use_tools=True, agent=worst_agent()),
    AgentDebrief(outcome="success", summary="\x01" * CHAT_CONTEXT_MAX_CHARS),
    [],
    [ChatMessage(role="assistant", content="\x01" * 8_000, timestamp=T0)],
    True,
)
@example(  # a model's earlier reply in the session held a NUL
    ChatRequest(message="fetch it"),
    None,
    [],
    [ChatMessage(role="assistant", content="a\x00b", timestamp=T0)],
    False,
)
def test_a_chat_turn_the_validator_takes_makes_inputs_that_fit_a_payload(
    request: ChatRequest,
    debrief: AgentDebrief | None,
    observations: list[str],
    history: list[ChatMessage],
    notes_as_data: bool,
):
    if json_bytes(request) > PAYLOAD_MAX_BYTES:
        return  # the server refuses the update itself
    if chat_rules.chat_request_problem(request, "a") is not None:
        return  # the validator refuses it: no trace in history
    agent = request.agent or AgentConfig(agent_id="a", model="m")
    context = chat_rules.build_context_summary(debrief, observations)
    paths = ChatPaths()
    paths._notes_as_data = notes_as_data
    # the direct path's activity input
    direct = paths._direct_input(agent, request.message, context, history)
    assert json_bytes(direct) <= PAYLOAD_BUDGET_BYTES
    # the tool path's child run, as workflows/entity_chat.py starts it (its input validated)
    run = AgentRunInput(
        task=chat_rules.tool_path_task(request.message, context, history, quoted=notes_as_data),
        agent=agent.model_copy(update={"max_iterations": request.max_iterations or 5}),
    )
    assert json_bytes(run) <= PAYLOAD_BUDGET_BYTES
    assert run_input_problem(run) is None  # the run takes it as it starts


# -- DebriefWorkflow and the run's debrief: any numbers, any text --------------------------------


@given(
    debriefs,
    st.lists(
        st.builds(
            RationaleEntry,
            iteration=hostile_ints,
            tool_name=st.none() | plain_text,
            rationale=st.builds(
                RationaleDetail, why=plain_text, confidence=st.none() | hostile_floats
            ),
        ),
        max_size=3,
    ),
)
def test_a_debriefs_markdown_is_written_for_any_numbers(
    debrief: AgentDebrief, rationale: list[RationaleEntry]
):
    markdown = debrief_markdown.format_markdown(debrief.model_copy(update={"rationale": rationale}))
    assert debrief.summary in markdown


@given(hostile_floats | hostile_ints)
@example(math.nan)
@example(10**400)
def test_js_numbers_write_any_number(value: float):
    number = js_number(value)
    assert isinstance(number, float)
    text = js_round_text(number)
    if math.isfinite(number):
        assert text == str(js_round(number))
    else:
        assert text == str(number)
    fixed = to_fixed(number, 1)
    if math.isfinite(number) and abs(number) < 1e21:  # the exact value, to a tenth
        assert abs(Decimal(fixed) - Decimal(number)) <= Decimal("0.05")
    else:
        assert fixed == str(number) or float(fixed) == number
