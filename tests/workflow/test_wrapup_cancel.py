"""A cancel that lands while a run that has its answer is wrapping up. Real dev server and
Postgres, scripted model over HTTP.

The wrap-up's local activity (`notify_agent`) runs in the workflow task that took the model's
final reply; a cancel request arriving meanwhile makes the server refuse that task's
completion (UnhandledCommand), and the task tried again gets the reply and the cancel in one
activation. The cancel interrupted the wait for the reply already in, and the run ended
`cancelled` with no output: the answer lost, after the first try's wrap-up had kept a
`final_answer` debrief and last run (overwritten later by the `cancelled` one). The
`reply-before-stop` patch takes the reply (workflows/run_llm_step.py).
"""

from __future__ import annotations

import asyncio
import uuid

import psycopg
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from reactive_temporal.api.control import request_cancel
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM
from tests.conftest import wait_for
from tests.workflow.conftest import Harness

pytestmark = pytest.mark.workflow


async def test_a_cancel_during_the_wrap_up_keeps_the_answer(
    harness: Harness, client: Client, llm: ScriptedLLM, model_name: str, database_url: str
):
    llm.script(model_name, [Reply("FINAL ANSWER: 4")])
    agent_id = f"wrap-{uuid.uuid4().hex[:8]}"
    agent = harness.agent(model_name, agent_id=agent_id)
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        # the agent's last-run row, inserted and not committed: the wrap-up's write of it waits
        await conn.execute(
            "INSERT INTO agent_last_runs (agent_id, run_id, started_at, run)"
            " VALUES (%s, 'placeholder', now(), '{}')",
            (agent_id,),
        )
        handle = await agent.start("What is 2+2?")

        async def wrapping_up() -> bool:  # its write waits on the row
            async with await psycopg.AsyncConnection.connect(database_url) as watcher:
                cur = await watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND query ILIKE '%%agent_last_runs%%'"
                )
                row = await cur.fetchone()
                return row is not None and row[0] > 0

        await wait_for(wrapping_up, seconds=60)
        # accepted, the cancel waits in the server for the workflow task in flight to end;
        # released before that task's local activity heartbeat (8 s), the task then ends
        await request_cancel(client, handle.id, "too late")
        await conn.rollback()
    result = await asyncio.wait_for(agent.result(handle), 60)
    events = [e.event_type for e in (await handle.fetch_history()).events]
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED in events  # the case: its task refused
    assert (result.terminated_by, result.output) == ("final_answer", "4")
