"""`worker --processes N`: a worker per core on one host, under one command.

A worker process runs its workflow tasks and its steps on one Python event loop, so it uses
one core however many the host has (README, "One worker process uses one core"). Runs
spread over the workers polling a task queue, so more cores take more worker processes.
`--processes N` runs N copies of the same `worker` command here and supervises them:

- the first starts alone: the schema migrations run once, and a bad setting or an
  unreachable server is reported once, by one worker, before any other starts;
- every line a worker prints comes through here marked with it (`[worker 2/4]`);
- SIGINT and SIGTERM stop every worker, and each drains as a lone worker does;
- when one exits on its own, the others are stopped and this exits with its code. The
  host's supervisor (systemd, Kubernetes) restarts the whole; restarting one worker here
  would hide a worker that fails the same way every time.

Worker i (from 0) serves its metrics and /healthz on the metrics port + i. Each worker has its
own Postgres pool: N workers may hold N times a pool's connections (and one each listening
for stopped runs, `activities.run_stops`).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

READY = "worker on "
"""What a worker prints once it polls (`serve_commands.worker`)."""
OUTPUT_GRACE_SECONDS = 2.0
"""How long a worker's last output may come after its exit."""
LINE_LIMIT = 1 << 20
"""The longest line of a worker's output that comes through whole."""


def worker_commands(
    command: Sequence[str], processes: int, metrics_port: int | None
) -> list[list[str]]:
    """The command of each of `processes` workers: `command` (a `worker` command line
    without --processes or --metrics-port) as one process, each with its own metrics port.

    ValueError when the ports would run past 65535."""
    if metrics_port is not None and metrics_port + processes - 1 > 65_535:
        raise ValueError(
            f"--metrics-port {metrics_port} with --processes {processes}: worker i serves "
            f"metrics on port {metrics_port} + i, and {metrics_port + processes - 1} is past 65535"
        )
    commands = []
    for i in range(processes):
        ports = [] if metrics_port is None else ["--metrics-port", str(metrics_port + i)]
        commands.append([*command, "--processes", "1", *ports])
    return commands


def worker_environment() -> dict[str, str]:
    """This process's environment, its first import path put in front of PYTHONPATH.

    A worker starts as `python -m reactive_temporal.cli`, which looks for modules in its
    working directory first; this process, started as `python worker.py`, looked in
    worker.py's directory. With that directory in front, a worker finds the project and the
    `--tools` modules where this process would have, wherever it was started from."""
    env = dict(os.environ)
    first = sys.path[0] or os.getcwd()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (first, env.get("PYTHONPATH")) if p)
    return env


def exit_code(returncode: int) -> int:
    """A worker's exit as a shell reports it: killed by signal S is 128 + S."""
    return returncode if returncode >= 0 else 128 - returncode


@dataclass
class Worker:
    """One worker process and the tasks that copy its output here."""

    number: int
    process: asyncio.subprocess.Process
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    copies: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def running(self) -> bool:
        return self.process.returncode is None

    @property
    def code(self) -> int:
        """Its exit code, once it has exited."""
        return exit_code(self.process.returncode or 0)

    async def exited(self) -> int:
        """Its exit code, once it has exited and its output has come through (not waiting
        long for the end of its output: a process it started may hold the pipe open)."""
        returncode = await self.process.wait()
        _, late = await asyncio.wait(self.copies, timeout=OUTPUT_GRACE_SECONDS)
        for copy in late:
            copy.cancel()
        return exit_code(returncode)

    def stop(self) -> None:
        if self.running:
            self.process.terminate()  # SIGTERM: it drains, as a lone worker does


async def copy_lines(
    stream: asyncio.StreamReader | None,
    out: Callable[[], TextIO],
    tag: str,
    ready: asyncio.Event | None,
) -> None:
    """Every line of `stream` to `out()`, after `tag`; `ready` set at the worker's ready line.

    Read in chunks, not lines: a line longer than the reader's limit would end a line reader,
    and a worker whose pipe nobody drains blocks on its next write. A line longer than
    LINE_LIMIT comes through in pieces."""
    if stream is None:
        return

    def write(line: bytes) -> None:
        text = line.decode(errors="replace")
        if ready is not None and READY in text:
            ready.set()
        sink = out()
        sink.write(f"{tag}{text}\n")
        sink.flush()

    pending = b""
    while chunk := await stream.read(1 << 16):
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            write(line)
        if len(pending) > LINE_LIMIT:
            write(pending)
            pending = b""
    if pending:
        write(pending)


async def start_worker(command: Sequence[str], number: int, total: int) -> Worker:
    process = await asyncio.create_subprocess_exec(
        *command,
        env=worker_environment(),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    worker = Worker(number, process)
    tag = f"[worker {number}/{total}] "
    worker.copies = [
        asyncio.create_task(copy_lines(process.stdout, lambda: sys.stdout, tag, worker.ready)),
        asyncio.create_task(copy_lines(process.stderr, lambda: sys.stderr, tag, None)),
    ]
    return worker


async def first_of(*futures: asyncio.Future[Any]) -> None:
    await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)


async def run_workers(
    commands: Sequence[Sequence[str]], stop: asyncio.Event, say: Callable[[str], None]
) -> int:
    """Run a worker per command until `stop` is set or one exits; then stop them all.

    The exit code: the code of the worker that exited on its own; after `stop`, 0 when every
    worker exited 0, else the first one's code that did not."""
    total = len(commands)
    workers: list[Worker] = []
    ended_by: Worker | None = None
    stopping = asyncio.ensure_future(stop.wait())
    try:
        for number, command in enumerate(commands, start=1):
            worker = await start_worker(command, number, total)
            workers.append(worker)
            say(f"worker {number}/{total}: pid {worker.process.pid}")
            if number == 1:  # alone: migrations once, a bad setting reported once
                exited = asyncio.ensure_future(worker.process.wait())
                await first_of(asyncio.ensure_future(worker.ready.wait()), exited, stopping)
                if not worker.ready.is_set():
                    ended_by = None if stop.is_set() else worker
                    if ended_by is not None:
                        await worker.process.wait()
                        say(f"worker 1/{total} exited with code {worker.code} before it polled")
                    return await _stop_all(workers, ended_by)
        exits = {asyncio.ensure_future(w.process.wait()): w for w in workers}
        everyone_ready = asyncio.ensure_future(asyncio.gather(*(w.ready.wait() for w in workers)))
        await first_of(everyone_ready, stopping, *exits)
        if everyone_ready.done():
            say(f"{total} worker processes polling; Ctrl-C or SIGTERM stops them all")
        else:
            everyone_ready.cancel()
        await first_of(stopping, *exits)
        ended_by = next((w for f, w in exits.items() if f.done()), None)
        if ended_by is not None:
            number, code = ended_by.number, ended_by.code
            say(f"worker {number}/{total} exited with code {code}: stopping the others")
        else:
            say(f"stopping {total} worker processes (each finishes its steps in flight)")
        return await _stop_all(workers, ended_by)
    finally:
        stopping.cancel()
        for worker in workers:  # an error here, or a cancelled supervisor
            worker.stop()


async def _stop_all(workers: list[Worker], ended_by: Worker | None) -> int:
    for worker in workers:
        worker.stop()
    codes = [await worker.exited() for worker in workers]
    if ended_by is not None:
        return ended_by.code
    return next((code for code in codes if code != 0), 0)
