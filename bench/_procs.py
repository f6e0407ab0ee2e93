"""A stack whose every part is its own process, so each one's CPU and memory can be read.

`open_process_stack()` starts a Temporal dev server (the project's `DevServer`, plus a
Prometheus `--metrics-port` for its `action` counter), Postgres (embedded unless
DATABASE_URL is set), and the bench model (bench/_model.py) in its own process;
`stack.worker(options)` runs a bench worker (bench/_worker.py) in its own process with
those `Worker(...)` options. This process keeps only the client that starts runs and reads
histories, so its CPU is "the client's".

`stack.cpu()` reads utime + stime (Linux /proc) of: the worker, the Temporal server, the
model, this process, and Postgres (the postmaster, its live backends, and the backends it
has reaped).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client

from bench._actions import ServerMetrics
from bench._stack import _start_postgres, log
from reactive_temporal.embedded.dev_server import DevServer, free_port

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def cpu_of(pid: int, *, children: bool = False) -> float:
    """utime + stime (+ cutime + cstime of reaped children) in seconds; 0 when gone."""
    try:
        fields = _stat(pid)
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / CLK_TCK


def children_of(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if int(_stat(int(entry))[1]) == pid:
                    out.append(int(entry))
            except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
                continue
    return out


def rss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except FileNotFoundError:
        pass
    return 0.0


class LineProcess:
    """A child process that prints `READY…` once started, then answers one JSON line per
    line written to its stdin."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self.process: asyncio.subprocess.Process | None = None
        self.ready_line = ""

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def start(self, seconds: float = 120.0) -> LineProcess:
        self.process = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=2**20,
            env=self.env,
            cwd=self.cwd,
        )
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), seconds)
        if not line.startswith(b"READY"):
            await self.stop()
            raise RuntimeError(f"{self.name} did not start (said {line!r})")
        self.ready_line = line.decode().strip()
        return self

    async def ask(self, command: str = "stats", seconds: float = 60.0) -> dict[str, Any]:
        assert self.process is not None and self.process.stdin and self.process.stdout
        self.process.stdin.write(command.encode() + b"\n")
        await self.process.stdin.drain()
        while True:  # a line that is not the answer (something in the process printed) is shown
            line = await asyncio.wait_for(self.process.stdout.readline(), seconds)
            if not line or line.lstrip().startswith(b"{"):
                return dict(json.loads(line))
            print(f"[{self.name} stdout] {line.decode(errors='replace').rstrip()}", file=sys.stderr)

    async def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.returncode is not None:
            return
        if process.stdin is not None:
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 30)
        except TimeoutError:
            process.kill()
            await process.wait()


@dataclass
class ProcessStack:
    client: Client
    server: DevServer
    metrics: ServerMetrics
    database_url: str
    model: LineProcess
    llm_base_url: str
    postgres_pid: int | None
    tmp: Path
    pycache: Path
    """The project's bytecode, compiled once (as the worker image has it): without it,
    under PYTHONDONTWRITEBYTECODE, the sandbox compiles each workflow module for every
    workflow it starts (bench/sandbox_bytecode.py)."""
    workers: list[LineProcess] = field(default_factory=list)

    def cpu(self, *workers: LineProcess | None) -> dict[str, float]:
        """CPU seconds so far, by process (the workers' added up)."""
        assert self.server.process is not None
        out = {
            "worker": sum(cpu_of(w.pid) for w in workers if w is not None),
            "server": cpu_of(self.server.process.pid),
            "model": cpu_of(self.model.pid),
            "client": cpu_of(os.getpid()),
            "postgres": 0.0,
        }
        if self.postgres_pid is not None:
            out["postgres"] = cpu_of(self.postgres_pid, children=True) + sum(
                cpu_of(c) for c in children_of(self.postgres_pid)
            )
        return out

    @contextlib.asynccontextmanager
    async def worker(
        self, task_queue: str, options: dict[str, Any] | None = None, *, root: Path | None = None
    ) -> AsyncIterator[LineProcess]:
        """A bench worker process on `task_queue` with these Worker options, running the
        project's code in `root` (default: this tree; compiled with `compile_project` first)."""
        assert self.server is not None
        proc = LineProcess(
            f"worker {task_queue}",
            [
                sys.executable,
                "-m",
                "bench._worker",
                "--address",
                self.server.address,
                "--task-queue",
                task_queue,
                "--database-url",
                self.database_url,
                "--llm-base-url",
                self.llm_base_url,
                "--options",
                json.dumps(options or {}),
            ],
            env={**os.environ, "PYTHONPYCACHEPREFIX": str(self.pycache)},
            cwd=root,
        )
        await proc.start()
        try:
            yield proc
        finally:
            await proc.stop()


ROOT = Path(__file__).resolve().parent.parent


def compile_project(pycache: Path, root: Path = ROOT) -> Path:
    """The project's packages in `root` compiled into a `PYTHONPYCACHEPREFIX` tree at
    `pycache` (which mirrors absolute paths: several trees can share it)."""
    packages = [str(root / p) for p in ("reactive_temporal", "workflows", "activities", "bench")]
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", *packages],
        env={**os.environ, "PYTHONPYCACHEPREFIX": str(pycache)},
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return pycache


def delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before.get(k, 0.0) for k in after}


@contextlib.asynccontextmanager
async def open_process_stack() -> AsyncIterator[ProcessStack]:
    tmp = Path(tempfile.mkdtemp(prefix="rt-bench-"))
    metrics_port = free_port()
    server = DevServer(db_file=None, log_file=tmp / "temporal.log")
    base_command = server.command
    server.command = lambda: [*base_command(), "--metrics-port", str(metrics_port)]  # type: ignore[method-assign]
    postgres: Any = None
    model: LineProcess | None = None
    try:
        log("starting the Temporal dev server")
        client = await server.start()
        database_url = os.environ.get("DATABASE_URL") or ""
        postgres_pid: int | None = None
        if not database_url:
            log("starting embedded Postgres")
            postgres = await asyncio.to_thread(_start_postgres, tmp / "pg")
            database_url = str(postgres.get_uri())
            postgres_pid = int((tmp / "pg" / "postmaster.pid").read_text().split()[0])
        model = await LineProcess("model", [sys.executable, "-m", "bench._model"]).start()
        pycache = await asyncio.to_thread(compile_project, tmp / "pycache")
        yield ProcessStack(
            client=client,
            server=server,
            metrics=ServerMetrics(metrics_port),
            database_url=database_url,
            model=model,
            llm_base_url=model.ready_line.split()[1],
            postgres_pid=postgres_pid,
            tmp=tmp,
            pycache=pycache,
        )
    finally:
        log("tearing the stack down")
        if model is not None:
            await model.stop()
        await server.stop()
        if postgres is not None:
            await asyncio.to_thread(postgres.cleanup)
        shutil.rmtree(tmp, ignore_errors=True)
