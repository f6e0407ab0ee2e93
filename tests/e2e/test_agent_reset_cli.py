"""An agent whose chat is stuck, as an operator meets it: `chat` and `session` say so and name
the way out, `check` lists it, `agent reset` frees it; real processes on a real dev server.

The dev server marks a workflow after its first failed workflow task here
(`system.numConsecutiveWorkflowTaskProblemsToTriggerSearchAttribute=1`; five by default), so
`check` lists the stuck agent within seconds rather than a minute.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.common import RawValue

from reactive_temporal.contracts import names
from reactive_temporal.embedded.dev_server import DevServer
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM
from tests.processes import CliResult, start_worker, starter_async, stop, worker_env

pytestmark = pytest.mark.e2e

PROBLEMS_AFTER = "system.numConsecutiveWorkflowTaskProblemsToTriggerSearchAttribute"
HANG_GUARD = 90


@pytest.fixture
async def marking_server(tmp_path: Path) -> AsyncIterator[tuple[DevServer, Client]]:
    server = DevServer(
        db_file=None,
        log_file=tmp_path / "temporal.log",
        extra_args=["--dynamic-config-value", f"{PROBLEMS_AFTER}=1"],
    )
    client = await server.start()
    yield server, client
    await server.stop()


def raw(value: object) -> RawValue:
    """`value` as `temporal workflow signal --input` sends it: JSON, checked by nothing."""
    return RawValue(Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(value).encode()))


async def agent_chat_row(env: dict[str, str], cwd: Path) -> dict[str, Any]:
    result = await starter_async("check", "--json", env=env, cwd=cwd, seconds=HANG_GUARD)
    rows = {row["name"]: row for row in json.loads(result.stdout)["checks"]}
    return dict(rows["agent chat"])


def one_line_error(result: CliResult) -> str:
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, result.describe()
    return lines[0]


async def test_a_stuck_agent_is_said_listed_and_reset_from_the_command_line(
    marking_server: tuple[DevServer, Client], database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    server, client = marking_server
    model = llm.script(f"cli-{uuid.uuid4().hex[:6]}", [Reply("aye")], repeat_last=True)
    queue = f"stuck-{uuid.uuid4().hex[:8]}"
    env = {**worker_env(server.address, database_url, llm.base_url, queue, tmp_path)}
    env["AGENT_MODEL"] = model
    agent = f"stuck-{uuid.uuid4().hex[:6]}"
    worker = start_worker(env, tmp_path / "worker.log")
    try:

        async def cli(*args: str) -> CliResult:
            return await starter_async(*args, env=env, cwd=tmp_path, seconds=HANG_GUARD)

        assert (await cli("chat", "hello", "--agent", agent)).code == 0
        row = await agent_chat_row(env, tmp_path)
        assert row == {
            "name": "agent chat",
            "status": "ok",
            "detail": f"no agent's chat workflow on {queue!r} is stuck",
        }

        entity = client.get_workflow_handle(names.agent_workflow_id(agent))
        tools = ["\x01" * 1_000] * 330  # 2 MB: with the next turn's message, past 2 MiB
        await entity.signal(
            names.CONFIGURE_SIGNAL, raw({"agent_id": agent, "model": model, "tools": tools})
        )
        stuck = await cli("chat", "\x01" * 20_000, "--agent", agent)
        assert stuck.code == 1, stuck.describe()  # not the request's fault
        said = one_line_error(stuck)
        assert said.startswith(
            f"error: agent {agent}'s chat workflow (agent-{agent}) is stuck: its workflow task "
            "keeps failing (attempt "
        ), said
        assert f"`python starter.py agent reset {agent}`" in said and "payloads too large" in said

        again = await cli("chat", "still there?", "--agent", agent, "--json")
        assert again.code == 1 and json.loads(again.stdout)["error"].endswith(
            "The request was not sent"
        )
        session = await cli("session", "--agent", agent)  # refused as it opens
        assert session.code == 1 and "is stuck" in one_line_error(session)

        for _ in range(HANG_GUARD):  # the server marks it after its next failed task
            row = await agent_chat_row(env, tmp_path)
            if row["status"] != "ok":
                break
            await asyncio.sleep(1)
        assert row["status"] == "warn", row
        assert row["detail"].startswith(
            f"1 agents' chat on {queue!r} is stuck, their chat workflow's task failing on "
            f"every try: {agent} (PayloadsTooLarge)"
        )

        reset = await cli("agent", "reset", agent, "--json")
        assert reset.code == 0, reset.describe()
        done = json.loads(reset.stdout)  # one object
        assert (done["stuck"], done["workflow_id"]) == (True, f"agent-{agent}")
        assert done["new_run_id"] and done["failure"]["cause"] == "payloads_too_large"
        assert (await cli("chat", "hello again", "--agent", agent)).stdout.strip() == "aye"
        assert (await agent_chat_row(env, tmp_path))["status"] == "ok"

        healthy = await cli("agent", "reset", agent)
        assert healthy.code == 1
        assert one_line_error(healthy) == (
            f"error: agent {agent}'s chat workflow (agent-{agent}) is not stuck: its workflow "
            "task does not keep failing. Nothing was done; --force resets it anyway"
        )
        forced = await cli("agent", "reset", agent, "--force")
        assert forced.code == 0 and "by --force" in forced.stdout, forced.describe()
    finally:
        stop(worker)
