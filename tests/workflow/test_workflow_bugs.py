"""A bug in workflow code fails the run visibly, with its debrief, instead of wedging it.

Temporal retries a workflow task that raises anything but a configured failure type, forever
and silently. The run's workflow is given one where a turn raises TypeError (a stand-in for
any bug in the loop): the run must end as `error` with its deterministic debrief persisted,
its workflow must fail with the bug named, and no workflow task may be left failing.
"""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest
from temporalio import workflow
from temporalio.client import Client, WorkflowFailureError
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ApplicationError

from reactive_temporal import search_attributes as sa
from reactive_temporal.config import Settings
from reactive_temporal.contracts import names
from reactive_temporal.contracts.llm_payloads import LlmStepResult
from reactive_temporal.contracts.result import AgentResult
from reactive_temporal.contracts.run import AgentConfig, AgentRunInput
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from reactive_temporal.hosting import worker_factory
from tests.adversarial.conftest import assert_no_failed_tasks
from tests.conftest import wait_for
from tests.workflow.conftest import running_worker
from workflows.agent_debrief import DebriefWorkflow
from workflows.agent_entity import AgentWorkflow
from workflows.agent_run import AgentRunWorkflow
from workflows.bugs import BUG_EXCEPTIONS, WORKFLOW_BUG

BUGGY = "BuggyAgentRunWorkflow"


@workflow.defn(name=BUGGY, failure_exception_types=BUG_EXCEPTIONS, sandboxed=False)
class BuggyAgentRunWorkflow(AgentRunWorkflow):
    """The run's workflow, with a bug in its second turn."""

    @workflow.run
    async def run(self, input: AgentRunInput) -> AgentResult:
        return await super().run(input)

    async def _take_turn(self, step: LlmStepResult) -> None:
        if self.state.iteration == 1:
            raise TypeError("unsupported operand type(s) for +: 'int' and 'NoneType'")
        await super()._take_turn(step)


def definition(cls: type) -> workflow._Definition:
    return workflow._Definition.must_from_class(cls)


def test_every_workflow_fails_visibly_on_a_bug_but_holds_on_nondeterminism():
    for cls in (AgentRunWorkflow, DebriefWorkflow, AgentWorkflow):
        types = tuple(definition(cls).failure_exception_types)
        assert types == BUG_EXCEPTIONS, cls
        assert not any(issubclass(workflow.NondeterminismError, t) for t in types)
    assert issubclass(RecursionError, BUG_EXCEPTIONS) and issubclass(KeyError, BUG_EXCEPTIONS)


async def test_a_bug_ends_the_run_as_error_with_its_debrief_and_fails_the_workflow(
    client: Client,
    settings: Settings,
    llm: ScriptedLLM,
    model_name: str,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
):
    synthesis = Reply(json.dumps({"summary": "It broke.", "lessons_learned": ["Fix the bug"]}))
    llm.script(
        model_name,
        [Reply(None, [call("calculator", expression="1+1")]), Reply("FINAL ANSWER: 2"), synthesis],
        repeat_last=True,  # the debrief's synthesis
    )
    agent_id = f"bug-{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(
        worker_factory, "WORKFLOWS", [*worker_factory.WORKFLOWS, BuggyAgentRunWorkflow]
    )

    async def debriefed() -> bool:
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            cur = await conn.execute(
                "SELECT terminated_by, outcome FROM agent_debriefs WHERE run_id = %s",
                (run_id,),
            )
            return await cur.fetchone() == ("error", "failed")

    run_id = names.run_workflow_id(agent_id, uuid.uuid4())
    async with running_worker(client, settings) as harness:
        handle = await client.start_workflow(
            BUGGY,
            AgentRunInput(task="1+1", agent=AgentConfig(agent_id=agent_id, model=model_name)),
            id=run_id,
            task_queue=harness.task_queue,
            search_attributes=TypedSearchAttributes([SearchAttributePair(sa.AGENT_NAME, agent_id)]),
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        await wait_for(debriefed, seconds=60)  # its debrief, kept while the worker runs
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == WORKFLOW_BUG
    assert "TypeError: unsupported operand type(s) for +" in cause.message
    await assert_no_failed_tasks(client, run_id)
