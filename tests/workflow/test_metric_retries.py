"""A workflow task that counted a run and then failed is tried again, not replayed: the
run's start and its end are still counted once, on a real dev server, read from the worker's
Prometheus scrape.

The runs' first task fails once after the run began (the shape a worker that crashed or
timed out mid-task leaves), and their last task fails once after the run's code returned
(as when the server refuses a completion, or a signal came in meanwhile). Both are tried
again on the same worker here, which replays nothing it had not completed.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.client import Interceptor as ClientInterceptor
from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from reactive_temporal.config import Settings
from reactive_temporal.contracts import names
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from tests.support.metered import metered_worker

pytestmark = pytest.mark.workflow

began: set[str] = set()
"""Runs whose first task failed after the run's code began (the worker runs unsandboxed)."""
returned: set[str] = set()
"""Runs whose last task failed after the run's code returned."""


class TasksFailOnce(ClientInterceptor, Interceptor):
    """An AgentRunWorkflow's first task fails once after its code began (counting the start
    where it counts it in its first task), its last task once after its code returned. A
    RuntimeError is not among the workflows' failure exception types: it fails the task."""

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor]:
        return _FailsAfterCounting


class _FailsAfterCounting(WorkflowInboundInterceptor):
    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        info = workflow.info()
        if info.workflow_type != names.AGENT_RUN_WORKFLOW:
            return await super().execute_workflow(input)
        run = asyncio.ensure_future(super().execute_workflow(input))
        if info.workflow_id not in began:
            began.add(info.workflow_id)
            for _ in range(3):  # the run's code runs up to its first wait
                await asyncio.sleep(0)
            raise RuntimeError(f"the first task of {info.workflow_id} fails after it began")
        result = await run
        if info.workflow_id not in returned:
            returned.add(info.workflow_id)
            raise RuntimeError(f"the last task of {info.workflow_id} fails after it returned")
        return result


async def test_a_run_whose_first_and_last_tasks_were_tried_again_is_counted_once(
    client: Client, temporal_address: str, settings: Settings, llm: ScriptedLLM, model_name: str
):
    llm.script(
        model_name,
        [Reply("Computing.", [call("calculator", expression="6 * 7")]), Reply("FINAL ANSWER: 42")],
    )
    name = f"retried-{uuid.uuid4().hex[:8]}"
    async with metered_worker(
        client, temporal_address, settings, interceptors=[TasksFailOnce()]
    ) as metered:
        agent = metered.harness.agent(model_name, agent_id=name, memory=False)
        result = await agent.run("What is 6 * 7?")
        assert result.success
        history = await client.get_workflow_handle(result.run_id).fetch_history()
        failed = [
            e.event_id
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
        ]
        assert result.run_id in began and result.run_id in returned
        assert len(failed) == 2 and failed[0] == 4, failed  # the first task and the last
        started = metered.scrape(names.RUNS_STARTED_METRIC)
        ended = metered.scrape(names.RUNS_METRIC)
    assert started[(("agent", name),)] == 1
    assert ended[(("agent", name), ("terminated_by", "final_answer"))] == 1
