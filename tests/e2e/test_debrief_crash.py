"""A worker SIGKILLed while the debrief synthesis is in flight loses nothing."""

from __future__ import annotations

import asyncio
import json
import signal
import uuid
from pathlib import Path

import psycopg
import pytest
from temporalio.client import Client

from reactive_temporal.api.agents import Agent
from reactive_temporal.contracts import names
from reactive_temporal.contracts.debrief import AgentDebrief
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from reactive_temporal.hosting.runtime import Runtime
from tests.conftest import wait_for
from tests.processes import start_worker, stop, worker_env

pytestmark = pytest.mark.e2e


async def test_sigkill_during_synthesis_still_writes_the_debrief_once(
    client: Client, temporal_address: str, database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    task_queue = f"crash-{uuid.uuid4().hex[:8]}"
    env = worker_env(temporal_address, database_url, llm.base_url, task_queue, tmp_path)
    model = llm.script(
        f"crash-{uuid.uuid4().hex[:6]}",
        [
            Reply(None, [call("calculator", expression="1+1")]),
            Reply(
                None,
                [call("final-answer", output="A long answer. " * 10, format="text", summary="s")],
            ),
        ],
    )
    synthesis = {"summary": "Written after the crash.", "lessons_learned": ["Survive crashes"]}
    synth = llm.script(
        f"{model}-debrief",
        [Reply(json.dumps(synthesis), delay=60), Reply(json.dumps(synthesis))],
    )
    log = tmp_path / "worker.log"
    first = start_worker(env, log)
    second = None
    try:
        config = AgentConfig(agent_id="crash-agent", model=model, debrief_model=synth)
        agent = Agent(config, Runtime(client, task_queue, offline_model=False))
        result = await agent.run("Write a long answer")
        assert result.debrief is not None

        await wait_for(lambda: len(llm.requests[synth]) >= 1, seconds=60)
        first.send_signal(signal.SIGKILL)  # mid-synthesis: the LLM call is in flight
        first.wait(10)
        second = start_worker(env, log)

        child = client.get_workflow_handle(
            names.debrief_workflow_id(result.run_id), result_type=AgentDebrief
        )
        rich = await asyncio.wait_for(child.result(), timeout=90)
        assert rich.synthesized and rich.summary == "Written after the crash."
        assert len(llm.requests[synth]) == 2  # retried once, on the new worker
        with psycopg.connect(database_url) as conn:
            rows = conn.execute(
                "SELECT debrief_json->>'summary' FROM agent_debriefs WHERE run_id = %s",
                (result.run_id,),
            ).fetchall()
            lessons = conn.execute(
                "SELECT lesson FROM agent_lessons WHERE run_id = %s", (result.run_id,)
            ).fetchall()
        assert rows == [("Written after the crash.",)]
        assert lessons == [("Survive crashes",)]
    finally:
        stop(first, second)
