"""A tool, a model endpoint or a workflow that fails with megabytes of words, on a real server:
the run ends as it does when the same thing fails with a line.

Before the failure budget (reactive_temporal/failure_budget.py), measured here: a tool's 3 MB
failure was replaced by the server with a non-retryable "Failure exceeds size limit." (tried
once where a short failure is tried three times) and quoted to the model as a 512 KB
observation; a 1.5 MB one was kept whole, a 1.5 MB event and a 1.5 MB observation; a model
endpoint's refusal with a 3 MB message put 512 KB of it in the run's history under the
server's "Failure exceeds size limit."; a workflow failing with a 3 MB message never failed,
its task retried every 10 s. A tool's `sys.exit` no longer fails its activity at all: like any
exception a tool raises, it is the model's observation, bounded, and the tool runs once.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.failure.v1 import Failure
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import Worker

from reactive_temporal.config import Settings
from reactive_temporal.contracts import names
from reactive_temporal.embedded.scripted_llm import HttpError, Reply, ScriptedLLM, call
from reactive_temporal.failure_budget import FAILURE_MESSAGE_MAX_CHARS, levels_of
from reactive_temporal.limits import OBSERVATION_MAX_CHARS
from reactive_temporal.tools import Tool, tool
from tests.adversarial.conftest import (
    failed_tasks,
    largest_event_bytes,
    observations,
    started_attempts,
    unique,
)
from tests.support.failing_workflows import (
    HUGE_FAILURE_TYPE,
    TANGLED_FAILURE_TYPE,
    TANGLES,
    HugeFailure,
    TangledFailure,
    tangled_activity,
)
from tests.workflow.conftest import Harness, running_worker

SIZES = {"a line": 100, "1.5 MB": 1_500_000, "3 MB": 3_000_000}
"""A short failure, one Temporal keeps whole, one past its 2 MiB."""
LARGEST_EVENT_BYTES = 50_000
"""Every event of these runs: a failure within the budget is a few kilobytes."""
OVERFLOW = (
    "This model's maximum context length is 4096 tokens. However, your messages resulted in "
    "9000 tokens. "
)


def failing_tool(name: str, size: int) -> Tool:
    """A plugin tool that ends as a script does, `sys.exit(f"HTTP 502: {body}")`: once the one
    way a tool's words reached its activity's failure; now, like any exception it raises, the
    model's observation, bounded (`tool_calls._execute`)."""

    async def fetch_page() -> str:
        sys.exit("HTTP 502: <html>" + "t" * size + "</html> the end")

    return tool(name=name, description="Fetches the page.")(fetch_page)


async def activity_failures(client: Client, run_id: str) -> list[Failure]:
    return [
        event.activity_task_failed_event_attributes.failure
        async for event in client.get_workflow_handle(run_id).fetch_history_events()
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
    ]


def kinds(failure: Failure) -> list[tuple[str, str, bool]]:
    """Each level's kind, type and non-retryable flag: what retries and the run read."""
    return [
        (
            level.WhichOneof("failure_info") or "",
            level.application_failure_info.type,
            level.application_failure_info.non_retryable or level.server_failure_info.non_retryable,
        )
        for level in levels_of(failure)
    ]


async def test_a_tool_failing_with_megabytes_runs_once_and_is_quoted_as_one_failing_with_a_line(
    client: Client, settings: Settings, llm: ScriptedLLM
):
    tools = {
        label: failing_tool(f"fetch_{n}", size) for n, (label, size) in enumerate(SIZES.items())
    }
    async with running_worker(client, settings, extra_tools=list(tools.values())) as harness:

        async def one(label: str) -> dict[str, Any]:
            name = tools[label].name
            model = llm.script(
                unique("tool"), [Reply(None, [call(name)]), Reply("FINAL ANSWER: done")]
            )
            result = await asyncio.wait_for(
                harness.run(model, "Fetch the page", agent_id=unique("tool"), tools=[name]), 90
            )
            [(_, observation)] = await observations(settings.database_url or "", result.run_id)
            return {
                "result": result,
                "observation": observation,
                "attempts": await started_attempts(client, result.run_id, names.RUN_TOOL),
                "failures": [kinds(f) for f in await activity_failures(client, result.run_id)],
                "largest": await largest_event_bytes(client, result.run_id),
            }

        ran = dict(zip(SIZES, await asyncio.gather(*map(one, SIZES)), strict=True))
    short = ran["a line"]
    assert short["result"].output == "done"
    assert short["attempts"] == [1]  # the tool's failure, run once: no activity failure
    assert short["observation"].startswith("[Tool error: fetch_0 failed: SystemExit: HTTP 502:")
    for label in ("1.5 MB", "3 MB"):
        big = ran[label]
        assert big["result"].output == "done", label
        assert big["attempts"] == short["attempts"], label
        assert big["failures"] == short["failures"] == []
        observation = big["observation"]
        said = f"[Tool error: {tools[label].name} failed: SystemExit: HTTP 502: <html>ttt"
        assert observation.startswith(said), observation[:100]
        assert len(observation) <= OBSERVATION_MAX_CHARS, (label, len(observation))
        assert "characters cut]" in observation and observation.endswith("</html> the end]")
        assert big["largest"] <= LARGEST_EVENT_BYTES, (label, big["largest"])


async def test_a_model_endpoint_refusing_with_megabytes_ends_the_run_as_one_refusing_with_a_line(
    harness: Harness, client: Client, llm: ScriptedLLM
):
    """A context-window refusal keeps the client's error as its cause: it quoted the whole
    message, the part the step's own error clips to 300 characters."""

    async def one(size: int) -> dict[str, Any]:
        body = {"error": {"message": OVERFLOW + "e" * size, "code": "context_length_exceeded"}}
        model = llm.script(unique("overflow"), [HttpError(400, body=body)], repeat_last=True)
        result = await asyncio.wait_for(harness.run(model, "Reply", agent_id=unique("llm")), 90)
        [failure] = await activity_failures(client, result.run_id)
        return {
            "result": result,
            "attempts": await started_attempts(client, result.run_id, names.LLM_STEP),
            "kinds": kinds(failure),
            "cause": levels_of(failure)[-1].message,
            "largest": await largest_event_bytes(client, result.run_id),
        }

    ran = dict(zip(SIZES, await asyncio.gather(*map(one, SIZES.values())), strict=True))
    short = ran["a line"]
    assert short["result"].terminated_by == "llm_error"
    assert "context window (4,096 tokens)" in (short["result"].error or "")
    assert short["attempts"] == [1]
    assert short["kinds"] == [
        ("application_failure_info", "LlmContextWindowExceeded", True),
        ("application_failure_info", "BadRequestError", False),
    ]
    for label in ("1.5 MB", "3 MB"):
        big = ran[label]
        assert big["result"].terminated_by == "llm_error", label
        assert "context window (4,096 tokens)" in (big["result"].error or ""), label
        assert big["attempts"] == short["attempts"], label
        assert big["kinds"] == short["kinds"], label  # no "Failure exceeds size limit." on top
        assert len(big["cause"]) == FAILURE_MESSAGE_MAX_CHARS and "characters cut]" in big["cause"]
        assert big["largest"] <= LARGEST_EVENT_BYTES, (label, big["largest"])


async def test_a_workflow_failing_with_megabytes_fails_instead_of_retrying_its_task_forever(
    client: Client,
):
    task_queue = f"huge-failure-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=task_queue, workflows=[HugeFailure]):
        handle = await client.start_workflow(
            HugeFailure.run,
            3_000_000,
            id=f"huge-failure-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
        )
        outcome = asyncio.ensure_future(handle.result())
        for _ in range(600):  # hang guard: 60 s
            if outcome.done() or await failed_tasks(client, handle.id):
                break
            await asyncio.sleep(0.1)
        assert outcome.done(), f"its workflow task failed: {await failed_tasks(client, handle.id)}"
        with pytest.raises(WorkflowFailureError) as failed:
            await outcome
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError)
    assert (cause.type, cause.non_retryable) == (HUGE_FAILURE_TYPE, True)
    assert len(cause.message) == FAILURE_MESSAGE_MAX_CHARS
    assert cause.message.startswith("www") and cause.message.endswith("w the end")
    assert "characters cut]" in cause.message


@pytest.mark.parametrize("own", [True, False], ids=["the workflow's", "its activity's"])
@pytest.mark.parametrize("tangle", TANGLES)
async def test_a_failure_whose_causes_are_tangled_fails_with_its_type_and_flag(
    client: Client, tangle: str, own: bool
):
    """A chain of causes that comes back on itself, or 2,000 deep: the SDK's conversion raised
    RecursionError, an activity's failure became "Failed building exception result" (its type
    and non-retryable flag lost: tried three times) and a workflow's task failed on every try."""
    task_queue = f"tangled-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client, task_queue=task_queue, workflows=[TangledFailure], activities=[tangled_activity]
    ):
        handle = await client.start_workflow(
            TangledFailure.run,
            args=[tangle, own],
            id=f"tangled-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
        )
        outcome = asyncio.ensure_future(handle.result())
        for _ in range(600):  # hang guard: 60 s
            if outcome.done() or await failed_tasks(client, handle.id):
                break
            await asyncio.sleep(0.1)
        assert outcome.done(), f"its workflow task failed: {await failed_tasks(client, handle.id)}"
        with pytest.raises(WorkflowFailureError) as failed:
            await outcome
    cause: BaseException | None = failed.value.cause
    if not own:
        assert isinstance(cause, ActivityError)
        # tried once: its last attempt's start is the one the history keeps
        assert await started_attempts(client, handle.id, "test-tangled-failure") == [1]
        cause = cause.cause
    assert isinstance(cause, ApplicationError)
    assert (cause.type, cause.non_retryable) == (TANGLED_FAILURE_TYPE, True)
    assert cause.message.startswith("tangled")
