"""A run's payloads at their worst on a real dev server (encrypting, as a deployment may) and
Postgres, with the scripted model over HTTP: the run that carries the heaviest result its
limits allow completes and delivers it, its debrief too; an answer past the limits is refused
rather than wedging the run's last task; a client's input by hand past the run's budget fails
the run as it starts, saying why (docs/payload-budget.md)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from reactive_temporal import limits
from reactive_temporal.api.agents import Agent
from reactive_temporal.codec import build_data_converter, generate_key_string
from reactive_temporal.config import Settings
from reactive_temporal.contracts import names
from reactive_temporal.contracts.run import (
    TASK_MAX_CHARS,
    AgentConfig,
    AgentRunInput,
    FinalAnswerCapture,
)
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from reactive_temporal.hosting.runtime import Runtime
from tests.conftest import wait_for
from tests.support.worst_parts import heavy, worst_synthesis
from tests.workflow.conftest import Harness, running_worker
from workflows.agent_run import AgentRunWorkflow

pytestmark = pytest.mark.workflow

KEYS = generate_key_string("k1")
HANG_GUARD_SECONDS = 90


@pytest.fixture
async def encrypting(temporal_address: str, settings: Settings) -> AsyncIterator[Harness]:
    """A client and a worker that encrypt every payload, on a fresh task queue."""
    client = await Client.connect(temporal_address, data_converter=build_data_converter(KEYS))
    async with running_worker(client, settings) as harness:
        yield harness


def made_up(n: int) -> str:
    """A tool name no worker has, as long as a call's name is kept, of six-byte characters."""
    return heavy(limits.TOOL_CALL_NAME_MAX_CHARS, n)


def rationale_blocks(count: int) -> str:
    """Audit-mode rationale for `count` calls, each at its limits in control characters."""
    why = {"why": heavy(280), "refs": [heavy(200)] * 8, "confidence": 0.5}
    return "\n".join(
        f'<rationale call="{n}">{json.dumps(why)}</rationale>' for n in range(1, count + 1)
    )


def failing_turn(first: int) -> Reply:
    """16 calls of made-up names (each a failed call, an error, a tool's stats), with their
    rationale."""
    calls = [call(made_up(first + n)) for n in range(limits.MAX_TOOL_CALLS_PER_TURN)]
    return Reply(rationale_blocks(len(calls)), calls)


async def pending(handle: Any, count: int) -> None:
    async def parked() -> bool:
        progress = await handle.query(AgentRunWorkflow.progress)
        return len(progress.pending_approvals) == count

    await wait_for(parked, seconds=60)


async def handled(handle: Any) -> None:
    """Wait until a workflow task has taken the run's last signal (it is in the history only
    once the workflow task in flight when it came has completed: the server buffers it)."""

    async def taken() -> bool:
        kinds = [e.event_type for e in (await handle.fetch_history()).events]
        signalled = [
            i for i, k in enumerate(kinds) if k == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
        ]
        return bool(signalled) and (
            EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED in kinds[signalled[-1] :]
        )

    await wait_for(taken, seconds=60)


async def test_the_heaviest_result_a_run_carries_is_delivered(
    encrypting: Harness, llm: ScriptedLLM, model_name: str
):
    """Every record a run keeps at its limit (64 failed calls of made-up names, their errors,
    tools' stats and rationale; denials with the longest reasons), then an operator's answer:
    the heaviest the old limits took (100,000 control characters) is ignored, the heaviest the
    budget takes ends the run. Before the budget that first answer made a result of 2.2 MB,
    and the run's last workflow task failed for good."""
    turns = [failing_turn(n * 16) for n in range(4)]
    approvals = [call("calculator", expression=f"{n}+1") for n in range(16)]
    llm.script(
        model_name,
        [
            *turns,
            Reply(rationale_blocks(16), approvals),
            Reply("one more", [call("calculator", expression="2+2")]),
            Reply(json.dumps(worst_synthesis().model_dump())),  # the debrief's synthesis
        ],
    )
    agent = Agent(
        AgentConfig(
            agent_id=f"budget-{uuid.uuid4().hex[:8]}", model=model_name, audit_rationale=True,
            approve_tools=["calculator"], live_output=False, max_iterations=20,
        ),
        Runtime(encrypting.client, encrypting.task_queue, offline_model=False),
    )  # fmt: skip

    async def drive() -> Any:
        handle = await agent.start(heavy(TASK_MAX_CHARS))  # 600 KB, within the run's input
        await pending(handle, 16)
        await agent.deny(handle.id, reason=heavy(2_000), by=heavy(200))
        await pending(handle, 1)
        long = {"format": "text", "summary": heavy(20_000), "confidence": heavy(20_000)}
        too_heavy = FinalAnswerCapture(output=heavy(limits.ANSWER_MAX_CHARS), **long)
        await handle.signal(AgentRunWorkflow.final_answer, too_heavy)
        await handled(handle)  # taken (and ignored) alone: the next is no later answer to it
        answer = FinalAnswerCapture(output=heavy((limits.ANSWER_MAX_BYTES - 2) // 6), **long)
        await handle.signal(AgentRunWorkflow.final_answer, answer)
        result = await agent.result(handle)
        return result, answer, await result.debrief_rich()

    result, answer, rich = await asyncio.wait_for(drive(), HANG_GUARD_SECONDS)
    assert result.success and result.terminated_by == "final_answer_tool"
    assert result.output == answer.output  # the heavy one, not the one past the limit
    assert result.final_answer is not None
    assert len(result.final_answer.summary) == limits.ANSWER_SUMMARY_MAX_CHARS
    assert len(result.final_answer.confidence or "") == limits.CONFIDENCE_MAX_CHARS
    assert result.debrief is not None and len(result.debrief.tools_used) == 64
    assert len(result.debrief.approvals) >= 2 and result.debrief.rationale  # within their bytes
    size = limits.json_bytes(result.model_dump(exclude={"run_id"}))
    print(f"the result delivered: {size:,} bytes")
    assert 1_100_000 < size <= limits.PAYLOAD_BUDGET_BYTES  # the heavy result, delivered
    assert rich is not None and rich.synthesized and rich.key_findings


async def test_a_run_input_made_by_hand_past_the_budget_fails_as_it_starts(harness: Harness):
    """The starters refuse it; a client of its own can still send it (the contract takes any
    system prompt): the run fails at once, saying why, rather than carry it into payloads
    Temporal would refuse (each continue-as-new input, its first step's)."""
    agent = AgentConfig(agent_id="by-hand", model="m", system_prompt=heavy(100_000))
    handle = await harness.client.start_workflow(
        AgentRunWorkflow.run,
        AgentRunInput(task="t", agent=agent),
        id=f"run-by-hand-{uuid.uuid4().hex[:12]}",
        task_queue=harness.task_queue,
    )
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(handle.result(), HANG_GUARD_SECONDS)
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == names.RUN_INPUT_TOO_LARGE_ERROR and cause.non_retryable
    assert "agent's configuration is 600," in cause.message


async def test_a_long_answer_holding_a_lone_surrogate_escape_ends_the_run(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """A final-answer call's output long enough to be weighed (past 51,666 characters) with a
    `\\ud800` escape, which the workflow decodes to a lone surrogate: weighing it raised in
    workflow code, and the run's workflow task failed on every try, the run stuck as running.
    The payload converter writes the surrogate as U+FFFD, and so does the result."""
    output = "x" * 60_000 + "\ud800"
    arguments = json.dumps({"output": output, "format": "text", "summary": "s"})
    llm.script(
        model_name,
        [
            Reply(None, [call("calculator", expression="1+1")]),
            Reply(None, [call("final-answer", arguments)]),
        ],
    )
    handle = await harness.start(model_name, "Answer at length", agent_id="surrogate")

    async def ended_or_failing() -> bool:
        kinds = [e.event_type for e in (await handle.fetch_history()).events]
        return EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED in kinds or any(
            k == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED for k in kinds
        )

    await wait_for(ended_or_failing, seconds=HANG_GUARD_SECONDS)
    async for event in handle.fetch_history_events():
        failure = event.workflow_task_failed_event_attributes.failure
        assert event.event_type != EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED, failure.message
    result = await harness.agent(model_name, agent_id="surrogate").result(handle)
    assert result.success and result.terminated_by == "final_answer_tool"
    assert result.output == "x" * 60_000 + "\ufffd"
