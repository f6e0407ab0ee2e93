"""The project's own workflows run outside Temporal's sandbox, any other workflow on the same
worker inside it (`reactive_temporal/hosting/sandbox.py`); `sandbox_workflows` puts the
project's back in, and a run still completes there."""

from __future__ import annotations

import uuid

import pytest
from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from reactive_temporal.config import Settings
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from reactive_temporal.hosting.sandbox import OwnWorkflowsUnsandboxed
from reactive_temporal.hosting.worker_factory import WORKFLOWS
from tests.support.sandbox_probe import OtherProbe, OwnProbe
from tests.workflow.conftest import running_worker

pytestmark = pytest.mark.workflow


async def test_own_workflows_run_unsandboxed_and_others_sandboxed(client: Client):
    task_queue = f"test-sandbox-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[OwnProbe, OtherProbe],
        workflow_runner=OwnWorkflowsUnsandboxed([OwnProbe]),
    ):
        own = await client.execute_workflow(
            OwnProbe.run, id=f"own-{uuid.uuid4().hex[:8]}", task_queue=task_queue
        )
        other = await client.execute_workflow(
            OtherProbe.run, id=f"other-{uuid.uuid4().hex[:8]}", task_queue=task_queue
        )
    assert (own, other) == (False, True)


async def test_the_worker_runs_the_project_workflows_unsandboxed_by_default(
    client: Client, settings: Settings
):
    async with running_worker(client, settings) as harness:
        runner = harness.worker.worker.config()["workflow_runner"]
    assert isinstance(runner, OwnWorkflowsUnsandboxed)
    for cls in WORKFLOWS:
        defn = workflow._Definition.must_from_class(cls)
        assert isinstance(runner.runner_for(defn), UnsandboxedWorkflowRunner)
    assert isinstance(runner.sandboxed, SandboxedWorkflowRunner)


async def test_a_run_completes_with_the_project_workflows_sandboxed(
    client: Client, settings: Settings, llm: ScriptedLLM, model_name: str
):
    sandboxed = settings.model_copy(update={"sandbox_workflows": True})
    llm.script(
        model_name,
        [
            Reply(None, [call("calculator", expression="6*7")]),
            Reply(None, [call("final-answer", output="42", format="text", summary="Multiplied.")]),
        ],
    )
    async with running_worker(client, sandboxed) as harness:
        assert isinstance(
            harness.worker.worker.config()["workflow_runner"], SandboxedWorkflowRunner
        )
        result = await harness.run(model_name, "What is 6*7?", agent_id="sandboxed-agent")
    assert result.output == "42" and result.metadata.iterations == 2
