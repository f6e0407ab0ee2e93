"""Workers as real processes, for tests that kill them."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def start_worker(
    env: dict[str, str], log: Path, *args: str, startup_seconds: float = 60
) -> subprocess.Popen[bytes]:
    """Start `python worker.py` and return once it polls (its log says "worker on")."""
    log.touch()
    before = log.read_text().count("worker on")
    with open(log, "ab") as out:
        worker = subprocess.Popen(
            [sys.executable, str(REPO / "worker.py"), *args],
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
