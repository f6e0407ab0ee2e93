"""`starter.py watch RUN_ID --json` against a `worker.py` process: the model streams its
answer in chunks over real HTTP, and the watcher prints JSON Lines as it goes; attaching
after the run ended prints the same events."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import os
import pty
import subprocess
import time
import uuid
from pathlib import Path

import psutil
import pytest
from temporalio.client import Client

from activities.store import Store
from reactive_temporal.api.agents import Agent
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.embedded.dev_server import DevServer
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from reactive_temporal.hosting.runtime import Runtime
from tests import processes
from tests.conftest import wait_for
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

        offset = events[3]["offset"]  # a watcher that stopped there resumes after it
        resumed = await starter_async("watch", handle.id, "--json", "--from-offset",
                                      str(offset + 1), env=env, cwd=tmp_path)  # fmt: skip
        assert resumed.code == 0, resumed.describe()
        assert without_times(lines(resumed.stdout)) == without_times(
            [e for e in events if e.get("offset", offset + 1) > offset]
        )

        readable = await starter_async("watch", handle.id, env=env, cwd=tmp_path)
        assert readable.code == 0, readable.describe()
        assert readable.stdout.splitlines()[0] == "── iteration 1 ──"
        assert "→ calculator(" in readable.stdout and "← calculator ✓ 42" in readable.stdout
        assert f"{ANSWER}\n■ end_turn · succeeded\n" in readable.stdout

        missing = await starter_async("watch", "run-nope", "--json", env=env, cwd=tmp_path)
        assert missing.code == 1 and "no run with id 'run-nope'" in missing.stdout
    finally:
        processes.stop(worker)


def run_on_a_terminal(
    env: dict[str, str], cwd: Path, args: list[str], answer: bytes | None
) -> tuple[int, str]:
    """`starter.py run ARGS` on a real pseudo-terminal (stdin, stdout and stderr), typing
    `answer` when it asks for approval (None: never answering); its exit status and output."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [processes.PYTHON, str(processes.REPO / "starter.py"), "run", *args],
            env={**env, "TERM": "xterm", "COLUMNS": "200"}, cwd=cwd,
            stdin=slave, stdout=slave, stderr=slave,
        )  # fmt: skip
        os.close(slave)
        seen = b""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the process ended and closed the terminal
                break
            if not chunk:
                break
            seen += chunk
            if answer is not None and b"approve? [y/N]" in seen:
                os.write(master, answer)
                answer = None
        text = seen.decode(errors="replace")
        try:
            code = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError(f"`run` did not end: {text[-3000:]}") from None
        return code, text
    finally:
        os.close(master)


def test_run_in_a_terminal_streams_and_asks_inline(
    temporal_address: str, database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    """`run` on a real pseudo-terminal: the model's text as it streams, the tool call as it
    starts and ends, and the approval asked inline (answered here by typing `y`); a question
    nobody answers is dropped when the approval timeout decides, and `run` ends on its own."""
    queue = f"e2e-tty-{uuid.uuid4().hex[:8]}"
    env = processes.worker_env(temporal_address, database_url, llm.base_url, queue, tmp_path)
    worker = processes.start_worker(env, tmp_path / "worker.log")
    try:
        steps = [
            Reply("Let me add those up.", [call("calculator", expression="40+2")]),
            Reply(ANSWER, chunks=8, chunk_delay=0.05),
        ]
        model = llm.script(f"e2e-tty-{uuid.uuid4().hex[:6]}", steps)
        code, text = run_on_a_terminal(
            env, tmp_path, ["Count the units", "--model", model, "--approve", "calculator"], b"y\n"
        )
        assert code == 0, text[-3000:]
        assert "approve? [y/N]" in text
        assert "── iteration 1 ──" in text and "Let me add those up." in text
        assert "→ calculator(" in text and "← calculator ✓ 42" in text
        assert f"approved by {getpass.getuser()}" in text  # no --by at the terminal: the OS user
        assert ANSWER in text.replace("\r", "")

        model = llm.script(f"e2e-tty-late-{uuid.uuid4().hex[:6]}", steps)
        args = ["Count the units", "--model", model, "--approve", "calculator",
                "--approval-timeout", "3"]  # fmt: skip
        code, text = run_on_a_terminal(env, tmp_path, args, None)
        assert "approve? [y/N]" in text and "was decided elsewhere or the run ended" in text
        assert "denied by timeout" in text, text[-3000:]
        assert ANSWER in text.replace("\r", "")
        assert code == 0, text[-3000:]  # the model answered anyway
    finally:
        processes.stop(worker)


def test_chat_in_a_terminal_prints_the_reply_as_it_is_generated(
    temporal_address: str, database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    """`chat` with stderr on a real pseudo-terminal: the reply streams there piece by piece
    while the model writes it (stdout, a pipe, gets the whole reply at the end)."""
    model = f"e2e-chat-tty-{uuid.uuid4().hex[:6]}"
    reply = "Your last run counted forty-two units across three warehouses, nothing failed."
    llm.script(model, [Reply(reply, chunks=8, chunk_delay=1.0)])
    queue = f"e2e-chat-tty-{uuid.uuid4().hex[:8]}"
    env = {
        **processes.worker_env(temporal_address, database_url, llm.base_url, queue, tmp_path),
        "AGENT_MODEL": model,
    }
    worker = processes.start_worker(env, tmp_path / "worker.log")
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [processes.PYTHON, str(processes.REPO / "starter.py"), "chat", "What did you find?",
             "--agent", f"tty-{uuid.uuid4().hex[:6]}", "--no-tools"],
            env={**env, "TERM": "xterm", "COLUMNS": "200"}, cwd=tmp_path,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, text=True,
        )  # fmt: skip
        os.close(slave)
        seen, first_at, whole_at = "", None, None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and whole_at is None:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the process ended and closed the terminal
                break
            if not chunk:
                break
            seen += chunk.decode(errors="replace")
            flat = seen.replace("\r", "")
            if first_at is None and reply[:10] in flat:
                first_at = time.monotonic()
            if reply in flat:
                whole_at = time.monotonic()
        stdout, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, seen[-3000:]
        assert first_at is not None and whole_at is not None, seen[-3000:]
        # 8 chunks 1 s apart (7 s from first to last): shown as they came, not at the end;
        # a floor with room for a first write a loaded machine made late
        assert whole_at - first_at >= 1.5
        assert "forty-two units" in stdout  # the reply itself, at the end
    finally:
        os.close(master)
        processes.stop(worker)


def peers_of(run_id: str) -> set[int]:
    """The ports a `watch RUN_ID` process holds established TCP connections to."""
    ports: set[int] = set()
    for proc in psutil.process_iter(["cmdline"]):
        if "watch" in (proc.info["cmdline"] or []) and run_id in proc.info["cmdline"]:
            with contextlib.suppress(psutil.Error):
                ports |= {
                    c.raddr.port
                    for c in proc.net_connections(kind="tcp")
                    if c.status == psutil.CONN_ESTABLISHED and c.raddr
                }
    return ports


async def test_watch_json_keeps_stdout_json_when_the_server_goes_away(
    database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    """The Temporal server stops mid-watch (of a run no worker has taken): stdout holds JSON
    lines only, the error among them (Temporal's core wrote its retry warnings there, in
    colour, between the lines)."""
    await (await Store.open(database_url)).close()  # the schema, as a worker would make it
    server = DevServer(db_file=None, log_file=tmp_path / "temporal.log")
    client = await server.start()
    try:
        queue = f"e2e-gone-{uuid.uuid4().hex[:8]}"  # no worker: the run waits, running
        runtime = Runtime(client, queue, False, database_url=database_url)
        handle = await Agent(AgentConfig(agent_id="gone", model="m"), runtime).start("Wait")
        env = processes.worker_env(server.address, database_url, llm.base_url, queue, tmp_path)
        env["REACTIVE_TEMPORAL_UNREACHABLE_PATIENCE"] = "3"  # gone for good: waited 10 minutes
        watch = asyncio.ensure_future(
            starter_async("watch", handle.id, "--json", env=env, cwd=tmp_path, seconds=90)
        )
        # watching: connected to Temporal (a server stopped before the watch connected is
        # another case: `cannot reach Temporal`, exit 2)
        port = int(server.address.rsplit(":", 1)[1])
        await wait_for(lambda: port in peers_of(handle.id), seconds=60)
    finally:
        await server.stop()
    watched = await watch
    assert watched.code == 1, watched.describe()
    assert "error" in lines(watched.stdout)[-1], watched.describe()  # every line JSON
