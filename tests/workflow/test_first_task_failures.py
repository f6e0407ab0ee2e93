"""Workflows whose first workflow task failed once finish on the next attempt, and their
histories replay: the shape a worker killed mid-first-task (or a full cache evicting a task
with a local activity in flight) leaves behind, here made on purpose for every workflow of a
run: the run, its debrief child and the agent's workflow (chat)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.client import Interceptor as ClientInterceptor
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from reactive_temporal.api.replay import replay
from reactive_temporal.api.replay_batch import quiet_replayer
from reactive_temporal.config import Settings
from reactive_temporal.contracts import names
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from reactive_temporal.hosting.worker_factory import WORKFLOWS
from tests.workflow.conftest import running_worker

pytestmark = pytest.mark.workflow

LONG_ANSWER = "Forty-two, which is six times seven, as the calculator confirmed. " * 3
SYNTHESIS = {
    "summary": "Multiplied six by seven.",
    "key_findings": [],
    "errors_encountered": [],
    "lessons_learned": ["The calculator is exact"],
    "caveats": "",
}

failed_once: set[str] = set()
"""Workflow ids whose first task has failed (the worker runs our workflows unsandboxed)."""


class FirstTaskFails(ClientInterceptor, Interceptor):
    """Every workflow's first workflow task fails: a RuntimeError is not among the
    workflows' failure exception types, so it fails the task and Temporal tries it again."""

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor]:
        return _FailsOnce


class _FailsOnce(WorkflowInboundInterceptor):
    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        workflow_id = workflow.info().workflow_id
        if workflow_id not in failed_once:
            failed_once.add(workflow_id)
            raise RuntimeError(f"the first task of {workflow_id} fails")
        return await super().execute_workflow(input)


async def test_workflows_whose_first_task_failed_finish_and_replay(
    client: Client, settings: Settings, llm: ScriptedLLM, model_name: str
):
    llm.script(
        model_name,
        [
            Reply("Computing.", [call("calculator", expression="6 * 7")]),
            Reply("Done.", [call("final-answer", output=LONG_ANSWER, format="text", summary="ok")]),
            Reply("I multiplied six by seven."),  # the chat turn
        ],
    )
    synth = llm.script(f"{model_name}-debrief", [Reply(json.dumps(SYNTHESIS))])
    config = client.config()
    config["interceptors"] = [FirstTaskFails()]  # a client's worker interceptors reach its workers
    failing = Client(**config)
    async with running_worker(failing, settings) as harness:
        agent = harness.agent(
            model_name, agent_id=f"first-task-{uuid.uuid4().hex[:8]}", debrief_model=synth
        )
        result = await agent.run("What is 6 * 7?")
        rich = await result.debrief_rich()
        reply = await agent.chat("What did you do?")  # starts the agent's workflow
    assert result.output == LONG_ANSWER
    assert reply.message == "I multiplied six by seven."
    assert rich is not None and rich.synthesized and rich.summary == SYNTHESIS["summary"]

    replayer = quiet_replayer(WORKFLOWS, pydantic_data_converter)  # as `starter.py replay`
    workflow_ids = [
        result.run_id,
        names.debrief_workflow_id(result.run_id),
        names.agent_workflow_id(agent.config.agent_id),
    ]
    for workflow_id in workflow_ids:
        assert workflow_id in failed_once
        history = await client.get_workflow_handle(workflow_id).fetch_history()
        types = [e.event_type for e in history.events]
        assert types[3] == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED, workflow_id
        report = await replay(history, replayer)
        assert report.ok, report.error
