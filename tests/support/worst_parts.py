"""The parts every payload of an agent run is made of, each at its worst, from the limits.

An agent, a run's input, an answer, a run's records and state, a model's reply: each built
through the project's own code with every part at the limit that bounds it, in the heaviest
characters JSON has (a control character is six bytes, `\\u0001`, so text of them weighs six
times its length). `tests/support/worst_payloads.py` puts them together into each payload a
run sends.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from temporalio.api.common.v1 import Payload

from reactive_temporal import limits
from reactive_temporal.contracts import names
from reactive_temporal.contracts.approvals import (
    DECIDER_MAX_CHARS,
    REASON_MAX_CHARS,
    ApprovalRecord,
)
from reactive_temporal.contracts.debrief import (
    AgentDebrief,
    DebriefInput,
    RationaleEntry,
    SynthesisFields,
    SynthesisResult,
    SynthesisTokens,
    ToolStat,
)
from reactive_temporal.contracts.llm_payloads import LlmStepResult, RationaleDetail
from reactive_temporal.contracts.result import AgentResult
from reactive_temporal.contracts.run import (
    FINAL_ANSWER_TOOL,
    MAX_ITERATIONS,
    TASK_MAX_CHARS,
    AgentConfig,
    AgentRunInput,
    FinalAnswerCapture,
    ToolCall,
    ToolResult,
)
from reactive_temporal.payloads import ProjectPayloadConverter
from reactive_temporal.rationale import REF_MAX_CHARS, REFS_MAX, WHY_MAX_CHARS
from workflows import approval_rules, debrief_rules
from workflows.chat_rules import KEEP_OBSERVATIONS, OBSERVATIONS_MAX_CHARS
from workflows.run_state import RunState

HEAVY = "\x01"
"""The heaviest character in JSON: six bytes (`\\u0001`)."""
AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
RUN_ID = "run-" + "a" * 200 + "-0123456789ab"
"""The longest id a run of the longest agent name gets (`names.run_workflow_id`)."""
BIG = 2**62
"""A count as large as a run could report (its digits are its bytes)."""


def heavy(chars: int, tag: int | None = None) -> str:
    """`chars` characters of six bytes each; `tag` makes it one of many distinct ones."""
    if tag is None:
        return HEAVY * chars
    suffix = f"{tag:04d}"
    return HEAVY * (chars - len(suffix)) + suffix


def payload_bytes(value: object) -> int:
    """What `value` weighs as the payload Temporal checks: the project's converter's JSON
    and the payload's metadata (the codec's own overhead is apart: `CODEC_OVERHEAD_BYTES`)."""
    payload: Payload | None = ProjectPayloadConverter().to_payload(value)
    assert payload is not None
    return payload.ByteSize()


# -- the parts a run is made of ------------------------------------------------------------------


def tool_names(count: int = limits.MAX_TOOL_NAMES, first: int = 0) -> list[str]:
    """Tool names at their limits: as many as a list may hold, each as long as one may be,
    within the bytes a list of names may take."""
    made = [heavy(limits.TOOL_CALL_NAME_MAX_CHARS, first + n) for n in range(count)]
    return limits.within_bytes(made, limits.TOOL_NAMES_MAX_BYTES, latest=False)


def worst_agent() -> AgentConfig:
    """The heaviest agent a run takes: every list of names full, the longest system prompt
    its bytes allow (`limits.agent_config_problem`, where the starters configure agents; a
    client's by hand meets the same bytes in the run's own check, `run_input_problem`)."""
    lists = tool_names()
    agent = AgentConfig(
        agent_id="a" * 200,
        model=heavy(limits.MODEL_NAME_MAX_CHARS),
        system_prompt=heavy(limits.SYSTEM_PROMPT_MAX_CHARS),
        max_iterations=MAX_ITERATIONS,
        required_tools=tool_names(first=len(lists)),
        tools=lists,
        temperature=1.9999999999999998,
        tool_timeout_seconds=3599.9999999999995,
        llm_timeout_seconds=3599.9999999999995,
        audit_rationale=True,
        debrief_model=heavy(limits.MODEL_NAME_MAX_CHARS),
        token_budget=BIG,
        cost_budget=1.2345678901234567e300,
        timeout_seconds=31622399.999999996,
        reasoning_effort="minimal",
        approve_tools=tool_names(first=2 * len(lists)),
        approval_timeout_seconds=31622399.999999996,
    )
    while limits.agent_config_problem(agent) is not None:  # the prompt is what gives
        over = limits.json_bytes(agent) - limits.AGENT_CONFIG_MAX_BYTES
        agent = agent.model_copy(update={"system_prompt": shorter(agent.system_prompt, over)})
    return agent


def shorter(text: str | None, over: int) -> str:
    """Heavy text `over` bytes lighter (at least a character shorter)."""
    return heavy(max(len(text or "") - max(over // 6, 1), 0))


def worst_run_input(heaviest: Literal["whole", "task"] = "whole") -> AgentRunInput:
    """The heaviest input a run starts with (`api.run_inputs.build_run_input`; a client's by
    hand meets the same bytes in the run's own check): "whole", the heaviest agent with the
    task as long as the input's bytes allow; "task", the longest task (an agent of no system
    prompt: the task alone travels in the debrief)."""
    agent = worst_agent()
    if heaviest == "task":
        agent = agent.model_copy(update={"system_prompt": None})
    run = AgentRunInput(
        task=heavy(TASK_MAX_CHARS),
        agent=agent,
        patch_bundle=names.RUN_PATCH_BUNDLE,
    )
    while limits.run_input_problem(run) is not None:
        over = limits.json_bytes(run) - limits.RUN_INPUT_MAX_BYTES
        run = run.model_copy(update={"task": shorter(run.task, over)})
    return run


def worst_answer() -> FinalAnswerCapture:
    """The heaviest answer a run takes: the operator's `final_answer` signal (a tool call's
    answer is within its arguments' characters, so lighter), clipped as the handler clips it."""
    answer = FinalAnswerCapture(
        output=heavy(limits.ANSWER_MAX_CHARS),
        format="markdown",
        summary=heavy(2 * limits.ANSWER_SUMMARY_MAX_CHARS),
        confidence=heavy(2 * limits.ANSWER_SUMMARY_MAX_CHARS),
    )
    answer = limits.bound_answer(answer, confidence_max_chars=limits.CONFIDENCE_MAX_CHARS)
    while limits.answer_bytes_problem(answer.output) is not None:
        over = limits.json_bytes(answer.output) - limits.ANSWER_MAX_BYTES
        answer = answer.model_copy(update={"output": heavy(len(answer.output) - over // 6 - 1)})
    return answer


def worst_rationale() -> list[RationaleEntry]:
    detail = RationaleDetail(
        why=heavy(WHY_MAX_CHARS), refs=[heavy(REF_MAX_CHARS)] * REFS_MAX, confidence=0.123456789
    )
    return [
        RationaleEntry(
            iteration=BIG, tool_name=heavy(limits.TOOL_CALL_NAME_MAX_CHARS, n), rationale=detail
        )
        for n in range(200)
    ]


def worst_approvals() -> list[ApprovalRecord]:
    return [
        ApprovalRecord(
            call_id=f"call-{n}",
            tool=heavy(limits.TOOL_CALL_NAME_MAX_CHARS, n),
            arguments=heavy(approval_rules.ARGUMENTS_PREVIEW_CHARS) + "…",
            decision="denied",
            by=heavy(DECIDER_MAX_CHARS),
            at=AT,
            reason=heavy(REASON_MAX_CHARS),
            requested_at=AT,
        )
        for n in range(200)
    ]


def worst_state() -> RunState:
    """A long run's state with every record at its limit: its tools (every name the agent's
    lists allow, all used), 150 failed calls of made-up names (clipped to their limit where
    the reply entered), rationale, denials, the observations chat may quote and the model's
    longest reply, each in six-byte characters."""
    tools = tool_names()  # what `resolve_tools` lets a run have (one list's bytes)
    state = RunState(
        iteration=BIG,
        seq=BIG,
        tool_names=tools,
        tool_timeouts={name: 3599.9999999999995 for name in tools},
        tools_used=[*tools, FINAL_ANSWER_TOOL],
        steps=BIG,
        prompt_tokens=BIG,
        completion_tokens=BIG,
        reasoning_tokens=BIG,
        cost=1.2345678901234567e300,
        has_errors=True,
        gap_check_done=True,
    )
    for n in range(150):  # failed calls of made-up names: records, stats, distinct errors
        error = heavy(2 * limits.ERROR_RECORD_MAX_CHARS, n)
        state.record_tool_results(
            [
                ToolResult(
                    call_id="c",
                    name=heavy(limits.TOOL_CALL_NAME_MAX_CHARS, n),
                    success=False,
                    content=f"[Tool error: {error}]",
                )
            ]
        )
    state.earlier_tool_stats = debrief_rules.merge_tool_stats(
        [
            ToolStat(
                name=heavy(limits.TOOL_CALL_NAME_MAX_CHARS, n),
                calls=BIG,
                errors=BIG,
                avg_duration_ms=BIG,
            )
            for n in range(200)
        ]
    )
    state.earlier_errors = [heavy(limits.ERROR_RECORD_MAX_CHARS, n) for n in range(200)]
    state.rationale = worst_rationale()
    state.approvals = worst_approvals()
    read = heavy(OBSERVATIONS_MAX_CHARS)
    seen = ToolResult(call_id="c", name=tools[0], success=True, content=read)
    state.record_tool_results([seen] * KEEP_OBSERVATIONS)  # what chat may quote
    state.last_turn_ran_tools = True
    content, _ = limits.bound_reply(heavy(limits.REPLY_CONTENT_MAX_CHARS), [])
    state.account_for(LlmStepResult(content=content))
    return state


def worst_ended_state() -> RunState:
    """The worst state, ended by the operator's heaviest answer (the heaviest ending: its
    answer travels in the result twice, and its summary and confidence in the debrief)."""
    state = worst_state()
    state.operator_answer = worst_answer()
    state.end_if_operator_answered()
    return state


def _debrief_input(state: RunState, result: AgentResult, task: str) -> DebriefInput:
    return debrief_rules.collect_debrief_input(
        result,
        task,
        state.tool_calls,
        state.rationale,
        state.approvals,
        cause=heavy(limits.ERROR_RECORD_MAX_CHARS),
        earlier_stats=state.earlier_tool_stats,
        earlier_errors=state.earlier_errors,
    )


def worst_result_and_debrief_input() -> tuple[AgentResult, DebriefInput]:
    """The run's result and its debrief's input, as `RunWrapUp._finish` makes them."""
    run = worst_run_input("task")
    state = worst_ended_state()
    result = state.result(RUN_ID, run.agent, duration_ms=BIG)
    debrief_input = _debrief_input(state, result, run.task)
    result.debrief = debrief_rules.build_fallback(debrief_input)
    return result, debrief_input


def worst_synthesis() -> SynthesisFields:
    """The heaviest synthesis `bound_synthesis` lets through: control characters are dropped,
    so its heaviest are four-byte ones (an emoji), every text at its limit."""
    text = "😀" * limits.SYNTHESIS_TEXT_MAX_CHARS
    items = [text] * limits.SYNTHESIS_ITEMS_MAX
    fields = SynthesisFields(
        summary=text,
        caveats=text,
        key_findings=items,
        errors_encountered=items,
        lessons_learned=items,
    )
    bounded = limits.bound_synthesis(fields)
    assert bounded is not None
    return bounded


def worst_rich_debrief() -> tuple[DebriefInput, AgentDebrief]:
    _, debrief_input = worst_result_and_debrief_input()
    fallback = debrief_rules.build_fallback(debrief_input)
    result = SynthesisResult(
        parsed=worst_synthesis(),
        raw_excerpt=heavy(500),
        tokens=SynthesisTokens(input=BIG, output=BIG, total=BIG, cost=1.2345678901234567e300),
    )
    return debrief_input, debrief_rules.merge_synthesis(debrief_input, fallback, result)


def worst_reply_calls() -> tuple[str | None, list[ToolCall]]:
    """A model's heaviest reply as `bound_reply` lets it through: its longest text, every
    call it keeps (names and ids at their limit), the calls that run with arguments filling
    what the reply's bytes leave (REPLY_MAX_BYTES), none refused."""
    content, calls = limits.bound_reply(
        heavy(2 * limits.REPLY_CONTENT_MAX_CHARS),
        [
            ToolCall(
                id=heavy(limits.TOOL_CALL_NAME_MAX_CHARS, n),
                name=heavy(limits.TOOL_CALL_NAME_MAX_CHARS, n),
                arguments="",
            )
            for n in range(limits.MAX_TOOL_CALLS_KEPT)
        ],
    )
    left = limits.REPLY_MAX_BYTES - limits.json_bytes([content, [c.model_dump() for c in calls]])
    chars = min(left // 6, limits.TOOL_ARGUMENTS_TOTAL_MAX_CHARS)
    for n in range(limits.MAX_TOOL_CALLS_PER_TURN):
        given = min(chars, limits.TOOL_ARGUMENTS_MAX_CHARS)
        calls[n] = calls[n].model_copy(update={"arguments": heavy(given)})
        chars -= given
    bounded = limits.bound_reply(content, calls)
    assert all(c.oversized is None for c in bounded[1]), "the worst reply runs every call"
    return bounded
