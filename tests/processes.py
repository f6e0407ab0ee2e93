"""Workers as real processes, for tests that kill them."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def worker_env(
    temporal_address: str, database_url: str, llm_base_url: str, task_queue: str, tmp: Path
) -> dict[str, str]:
    """The environment of a `worker.py` (and CLI) on this test's servers and task queue."""
    from tests.e2e.test_cli_run import clean_env

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
