"""`worker --processes N`'s supervisor: each worker's command, exit codes, the first worker
alone, and a stop that reaches every worker. Its workers here are tiny Python scripts (real
processes); tests/e2e/test_worker_processes.py runs real workers."""

from __future__ import annotations

import asyncio
import inspect
import os
import sys

import pytest

from reactive_temporal.cli import serve_commands, serve_options
from reactive_temporal.hosting.worker_processes import (
    exit_code,
    run_workers,
    worker_commands,
    worker_environment,
)

WORKER = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # drains, as a real worker does
print("a warning", file=sys.stderr, flush=True)  # before the ready line: a stop may follow it
print("worker on here", flush=True)
time.sleep(60)
"""
FAILING = "import sys; print('error: no Postgres', flush=True); sys.exit(3)"


def script(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_each_worker_is_one_process_with_its_own_metrics_port():
    commands = worker_commands(["w", "--tools", "t"], 3, 9000)
    assert commands == [
        ["w", "--tools", "t", "--processes", "1", "--metrics-port", str(9000 + i)] for i in range(3)
    ]
    assert worker_commands(["w"], 2, None) == [["w", "--processes", "1"]] * 2


def test_metrics_ports_past_65535_name_the_options():
    with pytest.raises(ValueError, match=r"--metrics-port 65534 with --processes 3.*65536"):
        worker_commands(["w"], 3, 65534)
    assert worker_commands(["w"], 2, 65534)[1][-1] == "65535"


def test_a_worker_killed_by_a_signal_exits_as_a_shell_says():
    assert exit_code(-9) == 137 and exit_code(3) == 3 and exit_code(0) == 0


def test_workers_look_for_modules_where_this_process_did(monkeypatch: pytest.MonkeyPatch):
    """`python /opt/app/worker.py --tools my_tools` run from elsewhere: its workers (started
    with `-m`) find my_tools in /opt/app, as it would have, before PYTHONPATH's own."""
    monkeypatch.setattr(sys, "path", ["/opt/app", *sys.path[1:]])
    monkeypatch.setenv("PYTHONPATH", "/site/extra")
    assert worker_environment()["PYTHONPATH"] == os.pathsep.join(["/opt/app", "/site/extra"])
    monkeypatch.delenv("PYTHONPATH")
    assert worker_environment()["PYTHONPATH"] == "/opt/app"


def test_every_worker_option_reaches_the_workers():
    """A new `worker` option must be passed on by `worker_command` (or be one of the three
    that are not: each worker's own port, `--processes 1`, the profile in the environment)."""
    worker = set(inspect.signature(serve_commands.worker).parameters)
    forwarded = set(inspect.signature(serve_options.worker_command).parameters)
    assert worker - forwarded == {"metrics_port", "processes", "profile"}
    command = serve_options.worker_command(
        ["a", "b"],
        ["fs=x"],
        ["TOKEN"],
        ["web=Authorization: Bearer ${T}"],
        5.0,
        7,
        9,
        "deploy",
        "b1",
    )
    assert command[1:4] == ["-m", "reactive_temporal.cli", "worker"]
    assert command[4:] == [
        "--tools", "a", "--tools", "b", "--mcp", "fs=x", "--mcp-env", "TOKEN",
        "--mcp-header", "web=Authorization: Bearer ${T}",
        "--graceful-shutdown", "5.0", "--max-concurrent-activities", "7",
        "--max-concurrent-workflow-tasks", "9", "--deployment-name", "deploy", "--build-id", "b1",
    ]  # fmt: skip


async def test_a_first_worker_that_fails_is_the_only_one_started(capfd: pytest.CaptureFixture[str]):
    said: list[str] = []
    code = await run_workers([script(FAILING), script(WORKER)], asyncio.Event(), said.append)
    assert code == 3
    assert said[0].startswith("worker 1/2: pid ") and said[1:] == [
        "worker 1/2 exited with code 3 before it polled"
    ], said
    assert "[worker 1/2] error: no Postgres" in capfd.readouterr().out


async def test_a_stop_reaches_every_worker_and_their_output_comes_through(
    capfd: pytest.CaptureFixture[str],
):
    said: list[str] = []
    stop = asyncio.Event()

    def say(line: str) -> None:  # a SIGTERM as soon as all three poll
        said.append(line)
        if "polling" in line:
            stop.set()

    code = await asyncio.wait_for(run_workers([script(WORKER)] * 3, stop, say), 30)
    assert any("3 worker processes polling" in line for line in said), said
    assert code == 0, said  # each one exited 0 on SIGTERM
    assert said[-1].startswith("stopping 3 worker processes"), said
    captured = capfd.readouterr()
    for n in (1, 2, 3):
        assert f"[worker {n}/3] worker on here" in captured.out
        assert f"[worker {n}/3] a warning" in captured.err


async def test_a_line_longer_than_any_limit_neither_stops_the_output_nor_the_worker(
    capfd: pytest.CaptureFixture[str],
):
    """A 3 MiB line (a huge log record): what follows it still comes through, so the ready
    line is seen and the worker's pipe never fills up and blocks it."""
    huge = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
print("x" * (3 << 20), flush=True)
print("worker on here", flush=True)
time.sleep(60)
"""
    said: list[str] = []
    stop = asyncio.Event()

    def say(line: str) -> None:
        said.append(line)
        if "polling" in line:
            stop.set()

    code = await asyncio.wait_for(run_workers([script(huge)] * 2, stop, say), 30)
    assert code == 0 and any("2 worker processes polling" in line for line in said), said
    out = capfd.readouterr().out
    assert out.count("x") == 2 * (3 << 20) and "[worker 2/2] worker on here" in out
