"""A run stopped while it announces the calls it parks for approval: a cancel (or its
deadline) lands while the approvals go to its live output, before the wait itself. Real dev
server and Postgres, scripted model over HTTP."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from reactive_temporal import search_attributes as sa
from reactive_temporal.api.control import request_cancel
from reactive_temporal.contracts import names
from reactive_temporal.contracts.events import once_key
from reactive_temporal.contracts.run import RunProgress
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from tests.conftest import wait_for
from tests.workflow.conftest import Harness
from workflows.agent_run import AgentRunWorkflow

pytestmark = pytest.mark.workflow


@asynccontextmanager
async def approvals_announcement_held(
    database_url: str, handle: WorkflowHandle
) -> AsyncIterator[None]:
    """The run's announcement of the calls it parks, held in Postgres until the block ends:
    rows with the keys it writes (`approval-pending:SEQ:TEMPORAL_RUN`, at any position a call
    may take), inserted and not committed, make its insert wait (ON CONFLICT on the key);
    nothing else the run writes is held (far-off offsets, other keys)."""
    temporal_run = (await handle.describe()).run_id
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        for seq in range(40):
            await conn.execute(
                'INSERT INTO run_events (run_id, "offset", type, step, position, data, key)'
                " VALUES (%s, %s, 'approval', %s, 0, '{}', %s)",
                (handle.id, 1_000_000 + seq, seq, once_key("approval-pending", seq, temporal_run)),
            )
        try:
            yield
        finally:
            await conn.rollback()


async def announcing(handle: WorkflowHandle) -> None:
    """Until the run has parked its call and its announcement is in flight."""

    async def there() -> bool:
        progress: RunProgress = await handle.query(AgentRunWorkflow.progress)
        pending = (await handle.describe()).raw_description.pending_activities
        return progress.waiting_for == "approval" and any(
            a.activity_type.name == names.RECORD_RUN_EVENTS for a in pending
        )

    await wait_for(there, seconds=60)


async def test_a_cancel_while_the_run_announces_its_approvals_leaves_nothing_waiting(
    harness: Harness, client: Client, llm: ScriptedLLM, model_name: str, database_url: str
):
    """Cancelled while its approvals went to its live output (an operator who cancels the
    run the moment `approvals` lists it): the run ended `cancelled`, but its closed execution
    kept WaitingFor = 'approval' (the Web UI's filter listed it among runs waiting), its
    `progress` said it waited for approval of the call, and the call was never counted as
    abandoned."""
    llm.script(
        model_name,
        [
            Reply("Checking.", [call("calculator", expression="6*7")]),
            Reply("FINAL ANSWER: 42"),
        ],
    )
    agent = harness.agent(
        model_name, agent_id=f"apr-{uuid.uuid4().hex[:8]}", approve_tools=["calculator"]
    )
    handle = await agent.start("What is 6*7?")
    async with approvals_announcement_held(database_url, handle):
        await announcing(handle)
        await request_cancel(client, handle.id, "not now")

        async def cancel_taken() -> bool:  # the run's task after the cancel has completed
            events = [e.event_type for e in (await handle.fetch_history()).events]
            asked = events.index(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED)
            return EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED in events[asked:]

        await wait_for(cancel_taken, seconds=60)
    result = await asyncio.wait_for(agent.result(handle), 60)
    assert result.terminated_by == "cancelled"
    description = await handle.describe()
    assert description.typed_search_attributes.get(sa.WAITING_FOR) is None
    progress: RunProgress = await handle.query(AgentRunWorkflow.progress)
    assert (progress.waiting_for, progress.pending_approvals) == (None, [])
