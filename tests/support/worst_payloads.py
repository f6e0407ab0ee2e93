"""Every payload of an agent run at its worst, composed deliberately from the limits.

Each function builds one payload the run (or its debrief child, or an activity they call)
sends, through the project's own code, with every part at the limit that bounds it, in the
heaviest characters JSON has: a control character is six bytes (`\\u0001`), so text of them
weighs six times its length. What a run carries is bounded by the limits in
`reactive_temporal/limits.py` and the contracts; nothing here is found by chance.
`tests/unit/test_payload_budget.py` holds each against `limits.PAYLOAD_BUDGET_BYTES`, and
`python -m tests.support.worst_payloads` prints the table docs/payload-budget.md shows.
"""

from __future__ import annotations

from collections.abc import Callable

from activities.held_reply import HELD_THINKING_MAX_CHARS, HeldReply
from activities.workflow_calls import live_runs_result
from reactive_temporal import limits
from reactive_temporal.contracts import names
from reactive_temporal.contracts.approvals import (
    ApprovalOutcome,
)
from reactive_temporal.contracts.debrief import (
    DebriefWorkflowInput,
    SynthesisRequest,
    SynthesisResult,
    SynthesisTokens,
)
from reactive_temporal.contracts.entity import DebriefReady, RunFinished
from reactive_temporal.contracts.events import NewEvent, RecordRunEventsInput
from reactive_temporal.contracts.llm_payloads import (
    ContextReport,
    LlmStepInput,
    LlmStepResult,
    RationaleDetail,
)
from reactive_temporal.contracts.run import (
    FINAL_ANSWER_TOOL,
    PrepareRunInput,
    PrepareRunResult,
    RecordMessagesInput,
    RunContinuation,
    RunProgress,
    RunSeed,
    RunToolInput,
    SeqMessage,
    ToolCall,
    ToolResult,
    Usage,
)
from reactive_temporal.rationale import REF_MAX_CHARS, REFS_MAX, WHY_MAX_CHARS
from tests.support.worst_parts import (
    AT,
    BIG,
    RUN_ID,
    heavy,
    payload_bytes,
    worst_approvals,
    worst_reply_calls,
    worst_result_and_debrief_input,
    worst_rich_debrief,
    worst_run_input,
    worst_state,
    worst_synthesis,
)
from workflows import approval_rules, debrief_rules
from workflows.run_controls import tool_message
from workflows.run_state import RunState

# -- the payloads --------------------------------------------------------------------------------


def run_input() -> object:
    return worst_run_input()


def continue_as_new_input() -> object:
    run = worst_run_input()
    state = worst_state()
    return run.model_copy(
        update={
            "continuation": RunContinuation(
                state=state.compacted().model_dump(mode="json"),
                started_at=AT,
                continued=BIG,
                approval_tools=list(state.tool_names),
            )
        }
    )


def run_result() -> object:
    return worst_result_and_debrief_input()[0]


def prepare_run_input() -> object:
    run = worst_run_input()
    return PrepareRunInput(run_id=RUN_ID, task=run.task, agent=run.agent, started_at=AT)


def prepare_run_result() -> object:
    state = worst_state()
    return PrepareRunResult(
        tool_names=state.tool_names,
        next_seq=BIG,
        tool_timeouts=state.tool_timeouts,
        approval_tools=state.tool_names,
    )


def llm_step_input() -> object:
    run = worst_run_input()
    state = worst_state()
    return LlmStepInput(
        run_id=RUN_ID,
        seq=BIG,
        iteration=BIG,
        model=run.agent.model,
        tool_names=state.visible_tools(run.agent),
        temperature=run.agent.temperature,
        audit_rationale=True,
        max_attempts=50,
        reasoning_effort="minimal",
        stream=True,
        cost_budget=True,
        seed=RunSeed.of(run.task, run.agent),
    )


def llm_step_result() -> object:
    content, calls = worst_reply_calls()
    rationale = {
        n: RationaleDetail(
            why=heavy(WHY_MAX_CHARS), refs=[heavy(REF_MAX_CHARS)] * REFS_MAX, confidence=0.1
        )
        for n in range(1, limits.MAX_TOOL_CALLS_KEPT + 1)
    }
    rationale = limits.bound_rationale(rationale)
    return LlmStepResult(
        content=content,
        tool_calls=calls,
        finish_reason=heavy(200),
        usage=Usage(
            prompt_tokens=BIG,
            completion_tokens=BIG,
            reasoning_tokens=BIG,
            cached_tokens=BIG,
            estimated=True,
        ),
        cost=1.2345678901234567e300,
        rationale=rationale,
        context=ContextReport(
            context_tokens=BIG,
            budget_tokens=BIG,
            estimated_tokens=BIG,
            compacted=BIG,
            retried_after_overflow=BIG,
        ),
        prepared=prepare_run_result(),  # type: ignore[arg-type]
    )


def run_tool_input() -> object:
    call = ToolCall(
        id=heavy(limits.TOOL_CALL_NAME_MAX_CHARS),
        name=heavy(limits.TOOL_CALL_NAME_MAX_CHARS),
        arguments=heavy(limits.TOOL_ARGUMENTS_MAX_CHARS),
    )
    return RunToolInput(run_id=RUN_ID, seq=BIG, call=call, live_output=True, cut_off=True)


def tool_result() -> object:
    return ToolResult(
        call_id=heavy(limits.TOOL_CALL_NAME_MAX_CHARS),
        name=heavy(limits.TOOL_CALL_NAME_MAX_CHARS),
        success=False,
        content=heavy(limits.OBSERVATION_MAX_CHARS),
        duration_ms=BIG,
    )


def record_messages_input() -> object:
    """The heaviest batch a turn records at once: every final-answer call of a turn refused
    for the same missing required tools (each verdict names them all)."""
    run = worst_run_input()
    state = RunState(tool_names=run.agent.required_tools, iteration=1)
    call = ToolCall(id="f", name=FINAL_ANSWER_TOOL, arguments="{}")
    notes = []
    for seq in range(limits.MAX_TOOL_CALLS_PER_TURN):
        observation = state.judge_final_answer(call, task=run.task, agent=run.agent)
        assert observation is not None
        notes.append(SeqMessage(seq=BIG - seq, message=tool_message(call, observation)))
    denials = [
        SeqMessage(
            seq=BIG,
            message=tool_message(
                call,
                approval_rules.denial_observation(record),
            ),
        )
        for record in worst_approvals()[: limits.MAX_TOOL_CALLS_PER_TURN]
    ]
    heaviest = max([notes, denials], key=payload_bytes)
    return RecordMessagesInput(run_id=RUN_ID, messages=heaviest)


def record_run_events_input() -> object:
    records = worst_approvals()[: limits.MAX_TOOL_CALLS_PER_TURN]
    return RecordRunEventsInput(
        run_id=RUN_ID,
        events=[
            NewEvent(
                type="approval",
                step=BIG,
                data=approval_rules.approval_event_data(r),
                key=f"approval-denied-{BIG}-{'0' * 36}",
            )
            for r in records
        ],
    )


def decide_tool_calls_result() -> object:
    return ApprovalOutcome(decided=worst_approvals()[: limits.MAX_TOOL_CALLS_PER_TURN])


def run_finished() -> object:
    """What a finished run tells its agent (`RunWrapUp._notify_agent`): its configuration, its
    debrief and the observations chat may quote. The `notify_agent` local activity's input
    holds it (a local activity's input never leaves the worker); it is kept in Postgres and
    comes back as the agent's `read_last_run` result, or (runs from before last-run-in-store)
    goes as the `run_finished` signal."""
    run = worst_run_input()
    result, _ = worst_result_and_debrief_input()
    return RunFinished(
        run_id=RUN_ID,
        started_at=AT,
        agent=run.agent,
        debrief=result.debrief,
        observations=worst_state().observations,
    )


def progress_query_result() -> object:
    """The `progress` query's answer while the run waits for a turn's approvals."""
    state = worst_state()
    state.pending_approvals = [
        approval_rules.pending_approval(
            ToolCall(
                id=f"call-{n}",
                name=heavy(limits.TOOL_CALL_NAME_MAX_CHARS, n),
                arguments=heavy(limits.TOOL_ARGUMENTS_MAX_CHARS),
            ),
            f"call-{BIG - n}",
            since=AT,
            iteration=BIG,
        )
        for n in range(limits.MAX_TOOL_CALLS_PER_TURN)
    ]
    progress = state.progress(RUN_ID, worst_run_input().agent)
    progress.current_tool = heavy(limits.TOOL_CALL_NAME_MAX_CHARS)
    return progress


def read_live_runs_result() -> object:
    """What mid-run chat reads (`read_live_runs`): the agent's last run, and the progress of
    its five newest runs in progress (each while it waits for a turn's approvals), the newest
    kept within LIVE_RUNS_MAX_BYTES."""
    last_run, progress = run_finished(), progress_query_result()
    assert isinstance(last_run, RunFinished) and isinstance(progress, RunProgress)
    return live_runs_result([progress] * 5, last_run)


def held_reply() -> object:
    """The `llm_step` heartbeat's details when the step could not record its reply: the reply,
    the model's thinking for the record (activities/held_reply.py; the endpoint's own state
    beside them is dropped past HELD_MAX_BYTES, and a reply whose calls carry more of it is
    not held)."""
    step = llm_step_result()
    assert isinstance(step, LlmStepResult)
    return HeldReply(
        held_seq=BIG,
        held=step,
        extra_content=[None] * len(step.tool_calls),
        thinking=heavy(HELD_THINKING_MAX_CHARS),
    )


def debrief_workflow_input() -> object:
    run = worst_run_input()
    _, debrief_input = worst_result_and_debrief_input()
    return DebriefWorkflowInput(
        input=debrief_input,
        synthesize=True,
        model=run.agent.model,
        llm_timeout_seconds=3600,
        agent_workflow_id=names.agent_workflow_id(run.agent.agent_id),
        reasoning_effort="minimal",
    )


def synthesis_request() -> object:
    run = worst_run_input()
    _, debrief_input = worst_result_and_debrief_input()
    return SynthesisRequest(
        input=debrief_input, model=run.agent.model, max_attempts=3, reasoning_effort="minimal"
    )


def synthesis_result() -> object:
    return SynthesisResult(
        parsed=worst_synthesis(),
        raw_excerpt=heavy(500),
        tokens=SynthesisTokens(input=BIG, output=BIG, total=BIG, cost=1.2345678901234567e300),
    )


def persist_debrief_input() -> object:
    debrief_input, debrief = worst_rich_debrief()
    return debrief_rules.persist_input(debrief_input, debrief)


def debrief_result() -> object:
    return worst_rich_debrief()[1]


def debrief_ready_signal() -> object:
    return DebriefReady(run_id=RUN_ID, debrief=worst_rich_debrief()[1])


PAYLOADS: dict[str, Callable[[], object]] = {
    "AgentRunWorkflow input (AgentRunInput)": run_input,
    "continue-as-new input (AgentRunInput + RunContinuation)": continue_as_new_input,
    "AgentRunWorkflow result (AgentResult)": run_result,
    "prepare_run input (runs from before first-step-seeds)": prepare_run_input,
    "prepare_run result": prepare_run_result,
    "llm_step input (the first, with its seed)": llm_step_input,
    "llm_step result (LlmStepResult)": llm_step_result,
    "llm_step heartbeat details (a reply held for the next attempt)": held_reply,
    "run_tool input": run_tool_input,
    "run_tool result (ToolResult)": tool_result,
    "record_messages input (a turn's batch)": record_messages_input,
    "record_run_events input (a turn's approvals)": record_run_events_input,
    "decide_tool_calls update result": decide_tool_calls_result,
    "progress query result (RunProgress)": progress_query_result,
    "the run's news to its agent (RunFinished)": run_finished,
    "read_live_runs result (mid-run chat)": read_live_runs_result,
    "DebriefWorkflow input (the child)": debrief_workflow_input,
    "synthesize_debrief input": synthesis_request,
    "synthesize_debrief result": synthesis_result,
    "persist_debrief input (the child's)": persist_debrief_input,
    "DebriefWorkflow result (AgentDebrief)": debrief_result,
    "debrief_ready signal (runs from before last-run-in-store)": debrief_ready_signal,
}
"""Every payload of an agent run, by what it is, and its worst case."""


def table() -> list[tuple[str, int]]:
    return [(name, payload_bytes(build())) for name, build in PAYLOADS.items()]


if __name__ == "__main__":
    for name, size in table():
        flag = "" if size <= limits.PAYLOAD_BUDGET_BYTES else "  OVER"
        print(f"| {name} | {size:,} |{flag}")
