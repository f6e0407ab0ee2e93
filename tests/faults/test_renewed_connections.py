"""A Python API process moved onto a connection made with renewed credentials, its old one
then cut for good (`Runtime.take_renewed`, `hosting/runtime.py`): what it made from its
client goes on through the new one. The renewal itself, TLS files rotated behind a proxy that
then refuses the old certificate, is tests/e2e/test_secure_connections.py's."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.client import Client

from reactive_temporal.api.agents import Agent
from reactive_temporal.config import Settings
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.embedded.scripted_llm import ScriptedLLM
from reactive_temporal.embedded.stack import connect
from reactive_temporal.hosting.runtime import Runtime
from reactive_temporal.hosting.worker_lifecycle import start_worker_host
from tests.faults.conftest import slow_demo
from tests.support.tcp_gate import TcpGate

pytestmark = pytest.mark.faults


async def test_what_the_runtime_made_goes_on_through_the_renewed_connection(
    client: Client, settings: Settings, llm: ScriptedLLM
):
    """The connection the runtime opened with is cut for good once it took a renewed one (as a
    refused certificate's is): a wait for a result under way, the run handle it waits on, the
    agent's chat and the in-process worker serving them all go on through the new one. A new
    client put in `runtime.client` left each of them on the old (the SDK has no way to change
    a client's TLS): every call failed."""
    server = client.service_client.config.target_host
    gate = await TcpGate(int(server.rsplit(":", 1)[1])).start()
    model = llm.script(f"renew-{uuid.uuid4().hex[:6]}", slow_demo(0.5))
    queue = f"renew-{uuid.uuid4().hex[:8]}"
    try:
        opened = await connect(gate.address)
        host = await start_worker_host(
            opened, settings, database_url=settings.database_url or "", task_queue=queue
        )
        runtime = Runtime(opened, queue, offline_model=False, host=host)
        agent = Agent(
            AgentConfig(agent_id=f"renew-{uuid.uuid4().hex[:6]}", model=model, memory=False),
            runtime,
        )
        try:
            await agent.chat("Hello there.", use_tools=False)  # the agent's entity is up
            handle = await agent.start("What is 6 * 7?")
            waiting = asyncio.ensure_future(agent.result(handle))
            await asyncio.sleep(0.3)  # waiting on the old connection
            runtime.take_renewed(await connect(server))
            gate.shut()
            result = await asyncio.wait_for(waiting, 60)
            # the call under way at the cut finished on the old connection (refused, after
            # the SDK's own tries); the wait's next call went through the new one
            assert gate.refused > 0
            reply = await asyncio.wait_for(agent.chat("Anything new?", use_tools=False), 60)
            second = await asyncio.wait_for(agent.run("What is 6 * 7?"), 60)
        finally:
            await runtime.close()
    finally:
        await gate.stop()
    assert result.output == second.output == "6 * 7 = 42" and reply.message
    assert runtime.client is opened  # the one every handle holds, on its new connection
