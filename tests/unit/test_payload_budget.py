"""Every payload of an agent run, at its worst, is within PAYLOAD_BUDGET_BYTES.

Temporal refuses a payload over 2 MiB, and an oversized activity input, workflow result or
continue-as-new input fails the workflow task, which Temporal retries forever: the run stops
there, silently. The worst case of each payload (tests/support/worst_payloads.py) is built
on purpose from the limits, every part at the limit that bounds it, in control characters
(six bytes each in JSON), and weighed here against the ceiling, which leaves room under
Temporal's wall for the payload's metadata, the encryption codec and the next field a
contract gains (docs/payload-budget.md). Then the limits that make it so, where data enters
a run: the starters, a worker's tools, a model's reply, a final answer.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from temporalio.api.common.v1 import Payloads
from temporalio.exceptions import ApplicationError

from activities.run_seed import resolve_tools
from activities.workflow_calls import live_runs_result
from reactive_temporal import limits
from reactive_temporal.api.run_inputs import build_run_input
from reactive_temporal.codec import EncryptionCodec, generate_key_string
from reactive_temporal.contracts.entity import ReadLiveRunsResult
from reactive_temporal.contracts.llm_payloads import RationaleDetail
from reactive_temporal.contracts.run import (
    FINAL_ANSWER_TOOL,
    AgentConfig,
    AgentRunInput,
    FinalAnswerCapture,
    RunProgress,
    RunSeed,
    ToolCall,
    ToolResult,
)
from reactive_temporal.payloads import ProjectPayloadConverter
from reactive_temporal.tool_registry import ToolRegistry
from reactive_temporal.tools import Tool
from tests.support.worst_parts import (
    heavy,
    payload_bytes,
    worst_agent,
    worst_answer,
    worst_reply_calls,
    worst_run_input,
)
from tests.support.worst_payloads import PAYLOADS, read_live_runs_result
from workflows.final_answer import operator_answer_problem
from workflows.run_limits import answer_too_long
from workflows.run_state import RunState

TEMPORAL_PAYLOAD_MAX_BYTES = 2 * 1024 * 1024
"""The server's `limit.blobSize.error`: a payload over it is refused."""
CODEC = EncryptionCodec(generate_key_string("k20261231"))


def sealed_bytes(value: object) -> int:
    """What `value` weighs as the server sees it with the encryption codec on."""
    payload = ProjectPayloadConverter().to_payload(value)
    assert payload is not None
    return Payloads(payloads=asyncio.run(CODEC.encode([payload]))).ByteSize()


# -- the ceiling --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(PAYLOADS))
def test_every_payload_of_a_run_at_its_worst_is_within_the_budget(name: str):
    worst = PAYLOADS[name]()
    assert payload_bytes(worst) <= limits.PAYLOAD_BUDGET_BYTES, name
    assert sealed_bytes(worst) <= TEMPORAL_PAYLOAD_MAX_BYTES, name


def test_the_budget_leaves_room_under_temporals_wall_for_metadata_the_codec_and_a_new_field():
    """Measured on a 2 MB payload: the metadata and the codec's own bytes (a nonce, a tag,
    the key's id, the original's metadata inside the ciphertext) are a hundred-odd bytes; the
    rest of the margin is for the next optional field a contract gains."""
    plain = ProjectPayloadConverter().to_payload(heavy(333_000))
    assert plain is not None and len(plain.data) > 1_990_000
    sealed = Payloads(payloads=asyncio.run(CODEC.encode([plain]))).ByteSize()
    overhead = sealed - len(plain.data)
    assert overhead < 200
    margin = TEMPORAL_PAYLOAD_MAX_BYTES - limits.PAYLOAD_BUDGET_BYTES - overhead
    assert margin > 0.1 * TEMPORAL_PAYLOAD_MAX_BYTES


def test_the_worst_cases_are_at_their_limits_not_found_by_chance():
    """Each part is as heavy as its limit lets it be: one character more is refused."""
    run = worst_run_input()
    assert limits.json_bytes(run) > limits.RUN_INPUT_MAX_BYTES - 6
    with pytest.raises(ValueError, match="bytes as JSON"):
        build_run_input(run.agent, run.task + "\x01")
    assert limits.json_bytes(worst_agent()) > limits.AGENT_CONFIG_MAX_BYTES - 6
    answer = worst_answer()
    assert limits.json_bytes(answer.output) > limits.ANSWER_MAX_BYTES - 6
    assert answer_too_long(answer.output + "\x01", bytes_checked=lambda: True) is not None
    content, calls = worst_reply_calls()
    reply = limits.json_bytes([content, [c.model_dump() for c in calls]])
    assert reply > limits.REPLY_MAX_BYTES - 6 * limits.MAX_TOOL_CALLS_PER_TURN
    assert len(calls) == limits.MAX_TOOL_CALLS_KEPT


def test_mid_run_chat_reads_its_runs_progress_with_a_tenth_of_the_ceiling_to_spare():
    """`read_live_runs` carries the agent's last run beside up to five runs' progress: at
    their worst 1.77 MB, 2% under the ceiling. The newest runs' progress is kept within
    LIVE_RUNS_MAX_BYTES (two at their worst)."""
    result = read_live_runs_result()
    assert isinstance(result, ReadLiveRunsResult) and len(result.runs) == 2
    assert payload_bytes(result) <= 0.9 * limits.PAYLOAD_BUDGET_BYTES
    assert limits.json_bytes(result.runs) <= limits.LIVE_RUNS_MAX_BYTES
    light = RunProgress(run_id="r", agent_id="a", tools_called=["calculator"])
    assert live_runs_result([light] * 5, None).runs == [light] * 5


# -- where an agent and a run's input enter: the starters, and the run itself -------------------


def test_the_starters_take_a_long_prompt_in_any_script_and_refuse_one_of_control_characters():
    """100,000 characters, the prompt's limit, of Chinese (three bytes each) are an agent the
    run carries; of control characters (six) they were 600 KB, twice in a run's news."""
    prose = AgentConfig(agent_id="a", model="m", system_prompt="日" * 100_000)
    assert limits.agent_config_problem(prose) is None
    build_run_input(prose, "t" * 100_000)
    controls = prose.model_copy(update={"system_prompt": heavy(100_000)})
    assert "configuration is 600," in (limits.agent_config_problem(controls) or "")
    with pytest.raises(ValueError, match="limit is 400,000"):
        build_run_input(controls, "task")


def test_the_starters_refuse_lists_of_tool_names_heavier_than_a_run_carries():
    names = [f"tool_{n:03d}_" + "x" * 119 for n in range(256)]  # 256 names of 128: 33 KB
    agent = AgentConfig(agent_id="a", model="m", approve_tools=names)
    assert "approve_tools is 33," in (limits.agent_config_problem(agent) or "")
    assert (
        limits.agent_config_problem(agent.model_copy(update={"approve_tools": names[:200]})) is None
    )


def test_the_starters_refuse_a_task_and_an_agent_heavier_together_than_a_run_carries():
    agent = AgentConfig(agent_id="a", model="m", system_prompt=heavy(40_000))  # 240 KB
    build_run_input(agent, heavy(70_000))  # 420 KB more: within
    with pytest.raises(ValueError, match="the run's input is 8"):
        build_run_input(agent, heavy(100_000))


def test_a_run_refuses_an_input_made_by_hand_heavier_than_it_carries():
    """What the run checks as it starts (`run_input_problem`): a client's input by hand skips
    the starters, and the contract takes any system prompt."""
    by_hand = AgentRunInput(
        task="t", agent=AgentConfig(agent_id="a", model="m", system_prompt=heavy(100_000))
    )
    assert "agent's configuration is 600," in (limits.run_input_problem(by_hand) or "")
    heavy_task = by_hand.model_copy(update={"task": heavy(100_000)})
    assert "run's input is 1,200," in (limits.run_input_problem(heavy_task) or "")
    assert limits.run_input_problem(worst_run_input()) is None


# -- where a worker's tools enter a run ---------------------------------------------------------


def _tool(name: str) -> Tool:
    async def call() -> str:
        return "ok"

    return Tool(name=name, description="d", function=call, json_schema={"type": "object"})


def test_a_worker_with_more_tools_than_a_run_carries_refuses_a_run_that_takes_them_all():
    registry = ToolRegistry([_tool(f"server/tool_{n:04d}_" + "x" * 40) for n in range(700)])
    with pytest.raises(ApplicationError, match="Name the agent's tools") as refused:
        resolve_tools(RunSeed(task="t", agent_id="a"), registry)
    assert refused.value.type == "UnknownToolError" and refused.value.non_retryable
    named = resolve_tools(RunSeed(task="t", agent_id="a", tools=registry.names[:10]), registry)
    assert named.tool_names == registry.names[:10]
    many = ToolRegistry([_tool(f"tool_{n}") for n in range(300)])  # light: their bytes count
    assert len(resolve_tools(RunSeed(task="t", agent_id="a"), many).tool_names) == 300


# -- where a model's reply enters (the llm_step activity) ---------------------------------------


def test_a_replys_text_is_clipped_to_its_bytes_as_well_as_its_characters():
    content, _ = limits.bound_reply(heavy(limits.REPLY_CONTENT_MAX_CHARS), [])
    assert content is not None and limits.json_bytes(content) <= limits.REPLY_CONTENT_MAX_BYTES
    assert content.startswith(heavy(100)) and "characters cut" in content
    prose = "日" * limits.REPLY_CONTENT_MAX_CHARS  # three bytes each: kept whole
    assert limits.bound_reply(prose, []) == (prose, [])


def test_a_replys_rationale_is_kept_within_the_bytes_of_a_runs_records():
    """64 blocks at their limits were 722 KB in the step's result, with the reply at its own
    bound (1.5 MB then) past 2 MB."""
    detail = RationaleDetail(why=heavy(280), refs=[heavy(200)] * 8, confidence=0.5)
    blocks = {n: detail for n in range(limits.MAX_TOOL_CALLS_KEPT, 0, -1)}
    kept = limits.bound_rationale(blocks)
    assert limits.json_bytes(list(kept.values())) <= limits.RECORDS_MAX_BYTES
    assert list(kept) == list(range(1, len(kept) + 1))  # the first calls'
    few = {1: detail, 2: RationaleDetail(why="\ud800 why")}
    assert limits.bound_rationale({1: detail}) == {1: detail}
    assert limits.bound_rationale(few)[2].why == "\ufffd why"  # storable, as the reply


# -- where a final answer enters: a `final-answer` call, the operator's signal -----------------


def test_an_answer_heavier_than_a_run_carries_is_refused_asking_the_patch_only_then():
    asked: list[bool] = []

    def budgeted() -> bool:
        asked.append(True)
        return True

    assert answer_too_long("x" * limits.ANSWER_MAX_CHARS, bytes_checked=budgeted) is None
    assert answer_too_long("日" * limits.ANSWER_MAX_CHARS, bytes_checked=budgeted) is None
    assert not asked  # within its bytes: the patch is not asked, no marker
    controls = heavy(60_000)  # within the characters, 360 KB
    assert answer_too_long(controls) is None  # a run from before the patch took it
    assert "360,002 bytes" in (answer_too_long(controls, bytes_checked=budgeted) or "")
    answer = FinalAnswerCapture(output=controls, format="text")
    assert operator_answer_problem(answer) is None
    assert "bytes as JSON" in (operator_answer_problem(answer, bytes_checked=budgeted) or "")
    assert len(asked) == 2


def _final_answer(**fields: str) -> ToolCall:
    return ToolCall(
        id="f", name=FINAL_ANSWER_TOOL, arguments=json.dumps(fields, ensure_ascii=False)
    )


def _state() -> RunState:
    state = RunState(tool_names=["calculator"], iteration=2)
    state.record_tool_results([ToolResult(call_id="c", name="calculator", success=True,
                                          content="42")])  # fmt: skip
    return state


def test_a_final_answer_call_heavier_than_a_run_carries_is_refused_to_the_model():
    """80,000 emoji are within a call's arguments (116,000 characters) and 320 KB."""
    agent = AgentConfig(agent_id="a", model="m")
    call = _final_answer(output="😀" * 80_000, format="text", summary="s")
    assert len(call.arguments) <= limits.FINAL_ANSWER_ARGUMENTS_MAX_CHARS
    state = _state()
    observation = state.judge_final_answer(
        call, task="t", agent=agent, limit_answer=True, budgeted=lambda: True
    )
    assert observation is not None and "bytes as JSON" in observation and not state.ended
    before = _state()  # a run from before the payload-budget patch took it
    assert before.judge_final_answer(call, task="t", agent=agent, limit_answer=True)
    assert before.ended


def test_a_final_answer_holding_a_lone_surrogate_escape_is_weighed_not_raised_in_workflow_code():
    """A model's `\\ud800` escape decodes, in the workflow, to a lone surrogate, which
    pydantic's JSON refuses to write: weighing the answer raised (a ValueError, no failure
    type: its workflow task failed on every try). Weighed as the payload converter writes it
    (U+FFFD, three bytes), it is taken, and a heavy one refused, as any other answer."""
    agent = AgentConfig(agent_id="a", model="m")
    output = "x" * 60_000 + "\ud800"  # past the length below which it is not weighed
    assert limits.json_bytes(output) == 60_000 + 3 + 2
    assert answer_too_long(output, bytes_checked=lambda: True) is None
    call = ToolCall(id="f", name=FINAL_ANSWER_TOOL,
                    arguments=json.dumps({"output": output, "format": "text"}))  # fmt: skip
    assert "\\ud800" in call.arguments  # as an endpoint sends it: an escape, storable text
    state = _state()
    state.judge_final_answer(call, task="t", agent=agent, limit_answer=True, budgeted=lambda: True)
    assert state.ending is not None and state.ending.output == output
    heavier = heavy(60_000) + "\ud800"
    assert "360,005 bytes" in (answer_too_long(heavier, bytes_checked=lambda: True) or "")


def test_an_accepted_answers_summary_and_confidence_are_clipped_as_an_operators_are():
    agent = AgentConfig(agent_id="a", model="m")
    asked: list[bool] = []

    def budgeted() -> bool:
        asked.append(True)
        return True

    light = _state()
    added = _final_answer(output="42", format="text", summary="Added.")
    light.judge_final_answer(added, task="t", agent=agent, limit_answer=True, budgeted=budgeted)
    assert light.ended and not asked  # nothing to clip: the patch is not asked
    long = _final_answer(output="42", format="text", summary="s" * 20_000, confidence="c" * 5_000)
    state = _state()
    state.judge_final_answer(long, task="t", agent=agent, limit_answer=True, budgeted=budgeted)
    capture = state.ending.capture if state.ending else None
    assert capture is not None and capture.output == "42" and asked == [True]
    assert len(capture.summary) == limits.ANSWER_SUMMARY_MAX_CHARS
    assert capture.confidence is not None and len(capture.confidence) == 1_000
    before = _state()  # a run from before the patch carried them whole
    before.judge_final_answer(long, task="t", agent=agent, limit_answer=True)
    assert before.ending and before.ending.capture and len(before.ending.capture.summary) == 20_000


def test_an_operators_confidence_is_clipped_shorter_than_its_summary():
    answer = FinalAnswerCapture(output="42", summary="s" * 20_000, confidence="c" * 20_000)
    old = limits.bound_answer(answer)
    assert len(old.summary) == len(old.confidence or "") == limits.ANSWER_SUMMARY_MAX_CHARS
    assert limits.answer_over_budget(old)
    new = limits.bound_answer(answer, confidence_max_chars=limits.CONFIDENCE_MAX_CHARS)
    assert len(new.confidence or "") == limits.CONFIDENCE_MAX_CHARS
    assert not limits.answer_over_budget(new)
