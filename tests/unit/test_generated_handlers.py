"""Generated hostile input through what AgentRunWorkflow's handlers and the DebriefWorkflow
decide: the operator's `final_answer` signal, the `decide_tool_calls` update, a cancel
request's reason, and the payloads a run ended by them sends on.

What arrives in a handler is a payload pydantic read from JSON: any text but a lone surrogate,
`NaN`, `Infinity` and integers of up to 4,300 digits. A signal handler that raises fails the
workflow task, which Temporal retries forever; so does an update handler that raises anything
but the workflow's failure types (workflows/bugs.py); a validator that raises only refuses
the update. What a handler takes in travels on in payloads (a run's result, an activity's
input), each refused by the server past 2 MiB and held here under PAYLOAD_BUDGET_BYTES, which
leaves room for what rides on the JSON. The agent entity's handlers are in
test_generated_entity.py.
"""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from reactive_temporal.contracts.approvals import (
    DECIDER_MAX_CHARS,
    REASON_MAX_CHARS,
    ApprovalDecision,
    ApprovalRecord,
    PendingApproval,
)
from reactive_temporal.contracts.debrief import (
    DebriefWorkflowInput,
    RationaleEntry,
    SynthesisRequest,
)
from reactive_temporal.contracts.llm_payloads import RationaleDetail
from reactive_temporal.contracts.run import (
    OUTPUT_FORMATS,
    AgentConfig,
    FinalAnswerCapture,
    ToolCall,
    ToolResult,
)
from reactive_temporal.limits import (
    ANSWER_MAX_BYTES,
    ANSWER_MAX_CHARS,
    ANSWER_SUMMARY_MAX_CHARS,
    CONFIDENCE_MAX_CHARS,
    ERROR_RECORD_MAX_CHARS,
    TOOL_CALL_NAME_MAX_CHARS,
    bound_answer,
)
from tests.support.hostile import (
    HEAVIEST_ANSWER,
    PAYLOAD_BUDGET_BYTES,
    heaviest_run,
    hostile_floats,
    hostile_ints,
    hostile_text,
    json_bytes,
    plain_text,
    sized,
    storable_text,
)
from workflows import approval_rules, debrief_rules, stop_rules
from workflows.final_answer import operator_answer_problem, validate_output
from workflows.run_state import RunState

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


# -- AgentRunWorkflow: the operator's final_answer signal ---------------------------------------

operator_answers = st.builds(
    FinalAnswerCapture,
    output=storable_text(max_repeat=110_000) | sized(ANSWER_MAX_CHARS),
    format=st.sampled_from(OUTPUT_FORMATS) | storable_text(max_repeat=100),
    summary=storable_text(max_repeat=30_000) | sized(2 * ANSWER_SUMMARY_MAX_CHARS),
    confidence=st.none() | storable_text(max_repeat=30_000) | sized(2 * ANSWER_SUMMARY_MAX_CHARS),
)


@given(operator_answers)
def test_the_operator_answer_signal_takes_only_answers_that_pass_the_tools_checks(
    answer: FinalAnswerCapture,
):
    validate_output(answer.output, answer.format)  # runs from before the check: a verdict
    if operator_answer_problem(answer) is not None:
        return
    assert answer.output.strip() and answer.format in OUTPUT_FORMATS
    assert len(answer.output) <= ANSWER_MAX_CHARS
    assert validate_output(answer.output, answer.format) is None
    # runs since the payload-budget patch weigh it too
    budgeted = operator_answer_problem(answer, bytes_checked=lambda: True) is None
    assert budgeted == (json_bytes(answer.output) <= ANSWER_MAX_BYTES)
    bounded = bound_answer(answer)
    assert len(bounded.summary) <= ANSWER_SUMMARY_MAX_CHARS
    assert bounded.confidence is None or len(bounded.confidence) <= ANSWER_SUMMARY_MAX_CHARS


@st.composite
def long_runs(draw: st.DrawFn) -> RunState:
    """A run's state after many turns of a hostile model: failed calls of made-up names (as
    `llm_step` clipped them), errors, rationale, approvals, each of them as heavy as allowed."""
    state = RunState(tool_names=["calculator"])
    name = draw(sized(TOOL_CALL_NAME_MAX_CHARS - 4))
    error = draw(sized(2 * ERROR_RECORD_MAX_CHARS))
    for n in range(draw(st.sampled_from([0, 150]) | st.integers(0, 150))):
        state.record_tool_results(
            [ToolResult(call_id="c", name=f"{name}{n:04d}", success=False, content=f"{error}{n}")]
        )
    detail = RationaleDetail(
        why=draw(sized(280)), refs=[draw(sized(200))] * draw(st.integers(0, 8)), confidence=0.5
    )
    state.rationale = [
        RationaleEntry(iteration=n, tool_name=f"{name}{n:04d}", rationale=detail)
        for n in range(draw(st.integers(0, 120)))
    ]
    record = ApprovalRecord(
        call_id="call-1",
        tool="calculator",
        arguments=draw(sized(501)),
        decision="denied",
        by=draw(sized(DECIDER_MAX_CHARS)),
        at=T0,
        reason=draw(sized(REASON_MAX_CHARS)),
    )
    state.approvals = [record] * draw(st.integers(0, 120))
    return state


@settings(suppress_health_check=[HealthCheck.too_slow])  # its runs' records are megabytes
@given(long_runs(), operator_answers)
@example(heaviest_run(), HEAVIEST_ANSWER)
def test_a_run_ended_by_the_operator_keeps_every_payload_of_its_end_within_limits(
    state: RunState, answer: FinalAnswerCapture
):
    # as the signal's handler takes it (runs since the payload-budget patch)
    if operator_answer_problem(answer, bytes_checked=lambda: True) is not None:
        return
    agent = AgentConfig(agent_id="a", model="m")
    state.operator_answer = bound_answer(answer, confidence_max_chars=CONFIDENCE_MAX_CHARS)
    state.end_if_operator_answered()
    result = state.result("run-a", agent, duration_ms=1)
    debrief_input = debrief_rules.collect_debrief_input(
        result, "task", state.tool_calls, state.rationale, state.approvals
    )
    result.debrief = debrief_rules.build_fallback(debrief_input)
    # the run's result; the debrief child's input; its synthesis's and its persist's inputs
    assert json_bytes(result) <= PAYLOAD_BUDGET_BYTES
    child = DebriefWorkflowInput(input=debrief_input, synthesize=True, model="m")
    assert json_bytes(child) <= PAYLOAD_BUDGET_BYTES
    assert json_bytes(SynthesisRequest(input=debrief_input, model="m")) <= PAYLOAD_BUDGET_BYTES
    persist = debrief_rules.persist_input(debrief_input, result.debrief)
    assert json_bytes(persist) <= PAYLOAD_BUDGET_BYTES
    # what the debrief's row keeps of its run
    for field in ("run_id", "agent_id", "task", "terminated_by", "final_output", "output_format"):
        assert getattr(persist.input, field) == getattr(debrief_input, field)


# -- AgentRunWorkflow: the decide_tool_calls update ---------------------------------------------


@st.composite
def pending_calls(draw: st.DrawFn) -> list[PendingApproval]:
    calls = draw(
        st.lists(
            st.builds(
                ToolCall,
                id=storable_text(max_repeat=100),
                name=plain_text,
                arguments=storable_text(max_repeat=5_000),
            ),
            max_size=5,
        )
    )
    taken: list[str] = []
    pending = []
    for seq, call in enumerate(calls):
        key = approval_rules.free_id(approval_rules.approval_id(call, seq, taken), taken)
        taken.append(key)
        pending.append(approval_rules.pending_approval(call, key, since=T0, iteration=1))
    return pending


@given(
    pending_calls(),
    st.builds(
        ApprovalDecision,
        call_ids=st.lists(storable_text(max_repeat=100) | st.sampled_from(["call-0", "call-1"])),
        approve=st.booleans(),
        reason=st.none() | storable_text(max_repeat=3_000),
        by=storable_text(max_repeat=300),
    ),
)
def test_a_decision_is_refused_or_recorded_within_bounds(
    pending: list[PendingApproval], decision: ApprovalDecision
):
    for p in pending:
        assert (
            len(p.call_id) <= 64 and len(p.arguments) <= approval_rules.ARGUMENTS_PREVIEW_CHARS + 1
        )
    assert len({p.call_id for p in pending}) == len(pending)
    problem = approval_rules.decision_problem(decision, pending, [])
    if problem is not None:  # the validator raises it: the update is refused, no trace
        assert problem.strip()
        return
    left, records = approval_rules.apply_decision(decision, pending, now=T0)
    assert len(left) + len(records) == len(pending)
    for record in records:
        assert record.by.strip() and len(record.by) <= DECIDER_MAX_CHARS
        assert record.reason is None or len(record.reason) <= REASON_MAX_CHARS
        assert "\x00" not in record.by + (record.reason or "")
        assert record.decision == "denied" or decision.approve
        approval_rules.approval_event_data(record)
        approval_rules.denial_observation(record)
    approval_rules.approval_lines(records)


# -- AgentRunWorkflow: a cancel request, the budgets, the deadline ------------------------------


@given(st.none() | hostile_text(max_repeat=100_000))
def test_a_cancels_reason_becomes_one_bounded_line(reason: str | None):
    ending = stop_rules.cancel_ending(reason, last_text="last")
    assert ending.terminated_by == "cancelled" and ending.note
    assert len(ending.note) <= len("cancelled: ") + stop_rules.REASON_MAX_CHARS + 1
    assert "\n" not in ending.note


@given(
    hostile_ints.filter(lambda n: n >= 1),
    hostile_floats.filter(lambda f: f > 0),
    hostile_ints.filter(lambda n: n >= 0),
    hostile_floats,
)
def test_budgets_and_durations_are_worded_for_any_number(
    token_budget: int, cost_budget: float, tokens: int, seconds: float
):
    agent = AgentConfig(agent_id="a", model="m", token_budget=token_budget, cost_budget=cost_budget)
    ending = stop_rules.budget_ending(agent, tokens=tokens, cost=seconds, last_text="")
    assert ending is None or ending.note
    stop_rules.duration_text(seconds)
