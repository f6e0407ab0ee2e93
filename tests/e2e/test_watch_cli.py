"""`starter.py watch RUN_ID --json` against a `worker.py` process: the model streams its
answer in chunks over real HTTP, and the watcher prints JSON Lines as it goes; attaching
after the run ended prints the same events."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from reactive_temporal.api.agents import Agent
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from reactive_temporal.hosting.runtime import Runtime
from tests import processes
from tests.processes import starter_async

pytestmark = pytest.mark.e2e

ANSWER = "Three warehouses hold 42 units in all; the count was reconciled twice."


def lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def without_times(events: list[dict]) -> list[dict]:
    return [{k: v for k, v in e.items() if k not in ("at",)} for e in events]


async def test_watch_prints_json_lines_live_and_again_after_the_end(
    client: Client, temporal_address: str, database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    queue = f"e2e-watch-{uuid.uuid4().hex[:8]}"
    env = processes.worker_env(temporal_address, database_url, llm.base_url, queue, tmp_path)
    worker = processes.start_worker(env, tmp_path / "worker.log")
    try:
        model = llm.script(
            f"e2e-watch-{uuid.uuid4().hex[:6]}",
            [
                Reply("Counting.", [call("calculator", expression="40+2")], delay=3),
                Reply(ANSWER, chunks=10, chunk_delay=0.15),
            ],
        )
        agent = Agent(AgentConfig(agent_id="watched", model=model), Runtime(client, queue, False))
        handle = await agent.start("Count the units")

        live = await starter_async("watch", handle.id, "--json", env=env, cwd=tmp_path, seconds=120)
        assert live.code == 0, live.describe()
        events = lines(live.stdout)
        assert events[-1]["type"] == "finished"
        assert events[-1]["result"]["output"] == ANSWER
        assert events[-1]["result"]["terminated_by"] == "end_turn"
        texts = [e for e in events if e["type"] == "text"]
        answer_step = texts[-1]["step"]
        answer = [e["delta"] for e in texts if e["step"] == answer_step]
        assert len(answer) >= 2  # several text events for the one answer
        assert "".join(answer) == ANSWER
        types = [e["type"] for e in events]
        assert types[0] == "iteration" and {"tool_start", "tool_end"} <= set(types)
        assert all(set(e) >= {"type", "run_id"} for e in events)
        assert all(None not in e.values() for e in events)  # unset fields are left out

        again = await starter_async("watch", handle.id, "--json", env=env, cwd=tmp_path)
        assert again.code == 0, again.describe()
        assert without_times(lines(again.stdout)) == without_times(events)

        missing = await starter_async("watch", "run-nope", "--json", env=env, cwd=tmp_path)
        assert missing.code == 1 and "no run with id 'run-nope'" in missing.stdout
    finally:
        processes.stop(worker)


def test_run_in_a_terminal_streams_and_asks_inline(
    temporal_address: str, database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    """`run` on a real pseudo-terminal: the model's text as it streams, the tool call as it
    starts and ends, and the approval asked inline (answered here by typing `y`)."""
    queue = f"e2e-tty-{uuid.uuid4().hex[:8]}"
    env = processes.worker_env(temporal_address, database_url, llm.base_url, queue, tmp_path)
    worker = processes.start_worker(env, tmp_path / "worker.log")
    master, slave = pty.openpty()
    try:
        model = llm.script(
            f"e2e-tty-{uuid.uuid4().hex[:6]}",
            [
                Reply("Let me add those up.", [call("calculator", expression="40+2")]),
                Reply(ANSWER, chunks=8, chunk_delay=0.05),
            ],
        )
        proc = subprocess.Popen(
            [processes.PYTHON, str(processes.REPO / "starter.py"), "run", "Count the units",
             "--model", model, "--approve", "calculator"],
            env={**env, "TERM": "xterm", "COLUMNS": "200"}, cwd=tmp_path,
            stdin=slave, stdout=slave, stderr=slave,
        )  # fmt: skip
        os.close(slave)
        seen = b""
        answered = False
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the process ended and closed the terminal
                break
            if not chunk:
                break
            seen += chunk
            if not answered and b"approve? [y/N]" in seen:
                os.write(master, b"y\n")
                answered = True
        assert proc.wait(30) == 0, seen.decode(errors="replace")[-3000:]
        text = seen.decode(errors="replace")
        assert answered, text[-3000:]
        assert "── iteration 1 ──" in text and "Let me add those up." in text
        assert "→ calculator(" in text and "← calculator ✓ 42" in text
        assert "approved by" in text
        assert ANSWER in text.replace("\r", "")
    finally:
        os.close(master)
        processes.stop(worker)
