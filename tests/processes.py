"""The CLI and workers as real processes: the helpers every process test shares.

`starter(...)` runs `python starter.py` and waits (blocking: for tests with no worker in
their own event loop); `starter_async(...)` runs it without blocking the loop (for tests
whose worker runs in this process); `start_worker(...)` starts `python worker.py` and
returns once it polls; `clean_env(...)` is the machine's environment without our settings.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable

OUR_VARIABLES = {
    "TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_TASK_QUEUE", "DATABASE_URL",
    "DATABASE_URL_FILE",
    "OPENAI_BASE_URL", "OPENAI_API_KEY", "AGENT_MODEL", "REACTIVE_TEMPORAL_DATA_DIR",
}  # fmt: skip


def clean_env(**extra: str) -> dict[str, str]:
    """The machine's environment without any of our settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in OUR_VARIABLES}
    return {**env, **extra}


def starter(
    *args: str, env: dict[str, str], cwd: Path, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`python starter.py ARGS…`, waited for."""
    return subprocess.run(
        [PYTHON, str(REPO / "starter.py"), *args],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


@dataclass
class CliResult:
    code: int | None
    """None when the command did not finish within its timeout (it was killed)."""
    stdout: str
    stderr: str
    seconds: float = 0.0

    def describe(self) -> str:
        return (
            f"exit {self.code} after {self.seconds:.1f}s\n"
            f"stdout: {self.stdout[-1500:]}\nstderr: {self.stderr[-3000:]}"
        )


async def starter_async(
    *args: str, env: dict[str, str], cwd: Path, seconds: float = 60
) -> CliResult:
    """`python starter.py ARGS…` without blocking the loop (a worker may share it)."""
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        PYTHON, str(REPO / "starter.py"), *args,
        env=env, cwd=cwd, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(), seconds)
    except TimeoutError:
        proc.kill()
        stdout, stderr = await proc.communicate()
        return CliResult(
            None, stdout.decode(errors="replace"), stderr.decode(errors="replace"), seconds
        )
    return CliResult(
        proc.returncode,
        stdout.decode(errors="replace"),
        stderr.decode(errors="replace"),
        time.monotonic() - started,
    )


def worker_env(
    temporal_address: str, database_url: str, llm_base_url: str, task_queue: str, tmp: Path
) -> dict[str, str]:
    """The environment of a `worker.py` (and CLI) on this test's servers and task queue."""
    return clean_env(
        TEMPORAL_ADDRESS=temporal_address,
        DATABASE_URL=database_url,
        OPENAI_BASE_URL=llm_base_url,
        OPENAI_API_KEY="test",
        TEMPORAL_TASK_QUEUE=task_queue,
        REACTIVE_TEMPORAL_DATA_DIR=str(tmp / "data"),
    )


def start_worker(
    env: dict[str, str],
    log: Path,
    *args: str,
    startup_seconds: float = 60,
    command: tuple[str, ...] = ("worker.py",),
) -> subprocess.Popen[bytes]:
    """Start `python worker.py ARGS` (or `python starter.py worker ARGS` with
    `command=("starter.py", "worker")`) and return once it polls (its log says "worker on")."""
    log.touch()
    before = log.read_text().count("worker on")
    with open(log, "ab") as out:
        worker = subprocess.Popen(
            [sys.executable, str(REPO / command[0]), *command[1:], *args],
            env=env, cwd=log.parent, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    deadline = time.monotonic() + startup_seconds
    while log.read_text().count("worker on") <= before:
        assert worker.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "worker did not start"
        time.sleep(0.1)
    return worker


def stop(*workers: subprocess.Popen[bytes] | None) -> None:
    for worker in workers:
        if worker is not None and worker.poll() is None:
            worker.terminate()
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
