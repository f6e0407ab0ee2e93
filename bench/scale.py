"""Scale when the LLM is slow: C runs started at once, every LLM call taking 2 s.

Each run: K `noop` tool calls, then `FINAL ANSWER: done` — K+1 LLM calls of `--delay` s
each, so the ideal wall time is (K+1) × delay (8 s for K=3, 2 s). Runs are started all at
once from this process; the worker, the Temporal dev server, the model and Postgres each
run in their own process (bench/_procs.py), the workers fresh for each scenario:

- floor · project defaults: `BenchFloorWorkflow` (bench/_floor.py) whose LLM activity
  sends the same 2 s request to the same model (plain httpx), and whose tool activity is a
  no-op, on the project's worker with its defaults (500 activity slots; the SDK's own
  default, 100, was the project's too when the "before" figures were taken);
- floor + I/O · project defaults: the same workflow, its steps doing only the I/O an agent's
  cannot skip (the model call streamed through the project's own client, one committed
  Postgres write per step; bench/_floor.py `FloorIoActivities`), so the agent runs' wall
  time above it is the framework's;
- floor · activity slots = C: the same as the first with `max_concurrent_activities=C` (set as an
  operator sets it, so the Postgres pool and the model client's connections follow);
- ours · project defaults: agent runs, memory on (the project default), on a worker with the
  project's own defaults;
- ours · activity slots = C: the same with `max_concurrent_activities=C`;
- floor · 2 worker processes, ours · 2 worker processes (only with `--scenarios`): the first
  and the fourth with two worker processes on the task queue, as `worker --processes 2`
  runs them (each its own pool; their CPU, RSS and pool figures added up).
- ours · workflow cache 3,000 (only with `--scenarios`): the fourth with room for 3,000 open
  workflows in the worker's cache (the SDK's default, 1,000, is less than a run, its debrief
  child and the entity at 1,000 runs: evicted runs replay their history at their next task).
- floor · sticky queue 10 s, ours · sticky queue 10 s, ours · sticky queue 60 s (only with
  `--scenarios`): the first and the fourth with the SDK's 10 s (or 60 s, the project's
  default before 30 s) for a workflow task on the worker's sticky queue instead of the
  project's 30 s (`REACTIVE_TEMPORAL_STICKY_QUEUE_TIMEOUT`): past it a task goes to the
  shared queue, a workflow-task timeout in the run's history.

First, the model alone: C concurrent 2 s requests sent straight to it (httpx, no pool
limit), to show whether the scripted model can hold C slow requests at once
(`ThreadingHTTPServer`: one thread per request), first with the listen backlog it ships
with (5, socketserver's default), then with 1024, the backlog the scenarios use
(`--model-backlog`; bench-side only).

For each scenario: wall time (first start → last result) against the ideal and against
the floor with the same worker settings; runs that succeeded; run latency; LLM calls in
flight at peak and duplicate LLM calls (the same run and iteration requested twice),
counted at the model; the Postgres pool (requests that waited for a connection, peak
waiting; psycopg_pool `get_stats()` in the worker); the worker's RSS (idle before the
batch, peak during it, and the difference per run); CPU per run of every process (to the
end of the runs and their debrief children); workflow-task timeouts and activity retries
(from every history); activity heartbeats that reached the server (its metrics); the
worker's event-loop lag; the longest waits of the runs' workflow tasks after their first
(scheduled → started: how close they came to the sticky queue's timeout); and where a run's
time went (server event times).

    .venv/bin/python -m bench.scale [--quick] [--runs C …] [--tools K] [--delay S]
        [--scenarios NAME …] [--model-backlog N] [--repeat R] [--stream-chunks N]

--stream-chunks N: a streamed reply comes as a real model's does, its first chunk after half
the delay and N chunks over the other half (default 0: the whole reply after the delay);
the floor's requests are not streamed and wait the whole delay.

--quick: C = 50 only. Default: C = 200 and 1000 (about 20 minutes on 2 cores).
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx2

from bench._actions import heartbeats
from bench._model import model_name
from bench._procs import ProcessStack, delta, open_process_stack, rss_mib
from bench._runs import (
    FLOOR,
    FLOOR_IO,
    MEMORY_ON,
    Accounting,
    Run,
    Scenario,
    account,
    debrief_done,
    entity_position,
    one_run,
    time_breakdown,
)
from bench._stack import Summary, log, machine, parser, print_table, run

PROCESSES = ("worker", "server", "model", "client", "postgres")
SCENARIOS = (
    "floor · project defaults",
    "floor + I/O · project defaults",
    "floor · activity slots = C",
    "ours · project defaults",
    "ours · activity slots = C",
    "floor · 2 worker processes",
    "ours · 2 worker processes",
    "ours · workflow cache 3,000",
    "floor · sticky queue 10 s",
    "ours · sticky queue 10 s",
    "ours · sticky queue 60 s",
)


DEFAULT_SCENARIOS = SCENARIOS[:5]
"""The rest run when named (`--scenarios`): on 2 cores two worker processes measure
their competition for the cores more than the workflow, a larger workflow cache measured the
same as the default, and the SDK's sticky-queue timeout is the default this project replaced
(bench/README.md)."""


def worker_options(name: str, c: int) -> dict[str, Any]:
    if " · sticky queue " in name:
        return {"sticky_queue_timeout_seconds": int(name.split()[-2])}
    if name.endswith("workflow cache 3,000"):
        return {"max_cached_workflows": 3000}
    return {"max_concurrent_activities": c} if name.endswith("slots = C") else {}


def worker_processes(name: str) -> int:
    """How many worker processes a scenario runs on its task queue (each with its own pool)."""
    return 2 if name.endswith("2 worker processes") else 1


def merged_stats(stats: list[dict[str, Any]]) -> dict[str, Any]:
    """Several workers' statistics as one: counts and sizes added, peaks and lags the worst."""
    if not stats or not all(stats):
        return {}
    merged: dict[str, Any] = {}
    for key in stats[0]:
        values = [s[key] for s in stats]
        worst = "peak" in key or "lag" in key
        merged[key] = max(values) if worst else sum(values)
    return merged


@dataclass
class ModelCheck:
    backlog: str
    c: int
    wall: float
    ok: int
    errors: list[str]
    peak_in_flight: int
    peak_threads: int
    connect_p95: float


@dataclass
class Outcome:
    name: str
    c: int
    wall: float
    succeeded: int
    failures: list[str]
    latencies: list[float]
    model: dict[str, Any]
    worker: dict[str, Any]
    rss_idle: float
    rss_peak: float
    cpu: dict[str, float]
    accounting: Accounting
    heartbeats: int
    wft_queue: list[float] = field(default_factory=list)


def rss_of(pids: list[int]) -> float:
    return sum(rss_mib(pid) for pid in pids)


@contextlib.contextmanager
def sampling_rss(pids: list[int], peaks: list[float]) -> Iterator[None]:
    """Sample the processes' RSS (added up) every 0.2 s (in a thread) and append the peak to
    `peaks`."""
    import threading

    stop = threading.Event()
    peak = [rss_of(pids)]

    def sample() -> None:
        while not stop.wait(0.2):
            peak[0] = max(peak[0], rss_of(pids))

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        peaks.append(max(peak[0], rss_of(pids)))


async def check_model(stack: ProcessStack, c: int, delay: float, backlog: str) -> ModelCheck:
    """C concurrent slow requests straight to the model (httpx2, the openai client's HTTP
    stack, no pool limit): can it hold them?"""
    await stack.model.ask("reset")
    limits = httpx2.Limits(max_connections=None, max_keepalive_connections=None)
    errors: list[str] = []
    connects: list[float] = []
    async with httpx2.AsyncClient(
        base_url=stack.llm_base_url, limits=limits, timeout=delay * 10 + 30
    ) as http:

        async def one(i: int) -> bool:
            body = {
                "model": model_name(0, delay),
                "messages": [{"role": "user", "content": f"{i}"}],
            }
            started = time.perf_counter()
            try:
                response = await http.post("/chat/completions", json=body)
                connects.append(time.perf_counter() - started - delay)
                return response.status_code == 200
            except httpx2.HTTPError as err:
                errors.append(type(err).__name__)
                return False

        started = time.perf_counter()
        ok = sum(await asyncio.gather(*(one(i) for i in range(c))))
        wall = time.perf_counter() - started
    stats = await stack.model.ask()
    return ModelCheck(
        backlog=backlog,
        c=c,
        wall=wall,
        ok=ok,
        errors=errors,
        peak_in_flight=stats["peak_in_flight"],
        peak_threads=stats["peak_threads"],
        connect_p95=Summary.of(connects).p95 if connects else float("nan"),
    )


async def scenario(
    stack: ProcessStack,
    name: str,
    c: int,
    tools: int,
    delay: float,
    live_output: bool = True,
    chunks: int = 0,
) -> Outcome:
    task_queue = f"bench-scale-{uuid.uuid4().hex[:6]}"
    kind = MEMORY_ON
    if name.startswith("floor"):
        kind = FLOOR_IO if name.startswith("floor + I/O") else FLOOR
    s = Scenario(kind, task_queue, label=name, live_output=live_output)
    async with contextlib.AsyncExitStack() as opened:
        workers = [
            await opened.enter_async_context(stack.worker(task_queue, worker_options(name, c)))
            for _ in range(worker_processes(name))
        ]
        pids = [w.pid for w in workers]
        # one run first: the agent entity exists and the worker is warm
        await one_run(stack.client, s, tool_calls=0)
        await asyncio.sleep(2)
        entity_from = await entity_position(stack.client, s)
        await stack.model.ask("reset")
        await asyncio.gather(*(w.ask("reset") for w in workers))
        metrics0 = stack.metrics.read()
        rss_idle = rss_of(pids)
        peaks: list[float] = []
        cpu0 = stack.cpu(*workers)
        failures: list[str] = []
        runs: list[Run] = []

        async def one(i: int) -> None:
            try:
                runs.append(
                    await one_run(
                        stack.client,
                        s,
                        tool_calls=tools,
                        delay=delay,
                        chunks=chunks,
                        task=f"Scale run {i} {uuid.uuid4().hex[:8]}: call noop {tools} times.",
                    )
                )
            except Exception as err:  # noqa: BLE001 — counted and reported
                failures.append(f"{type(err).__name__}: {err}"[:300])

        log(f"{name}: starting {c} runs")
        with sampling_rss(pids, peaks):
            started = time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(c)))
            wall = time.perf_counter() - started
            log(f"{name}: {len(runs)} runs done in {wall:.1f} s; waiting for debriefs")
            model_stats = await stack.model.ask()
            each: list[dict[str, Any]] = []
            for worker in workers:
                try:
                    each.append(await worker.ask())
                except (ValueError, TimeoutError) as err:  # reported, not fatal to the others
                    code = worker.process.returncode if worker.process else None
                    log(f"{name}: a worker did not answer its statistics ({err!r}; exit {code})")
                    each.append({})
            worker_stats = merged_stats(each)
            if kind == MEMORY_ON:
                await asyncio.gather(
                    *(debrief_done(stack.client, r.workflow_id) for r in runs),
                    return_exceptions=True,
                )
            cpu1 = stack.cpu(*workers)
        await asyncio.sleep(2)
        metrics1 = stack.metrics.read()
        log(f"{name}: reading {len(runs)} histories")
        acc = await account(stack.client, s, runs, entity_from=entity_from)
    return Outcome(
        name=name,
        c=c,
        wall=wall,
        succeeded=len(runs),
        failures=failures,
        latencies=[r.latency for r in runs],
        model=model_stats,
        worker=worker_stats,
        rss_idle=rss_idle,
        rss_peak=max(peaks),
        cpu={p: v / c for p, v in delta(cpu1, cpu0).items()},
        accounting=acc,
        heartbeats=heartbeats(metrics1 - metrics0),
    )


async def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--runs", type=int, nargs="+", default=None, help="C values (200 1000)")
    p.add_argument("--tools", type=int, default=3, help="K tool calls per run (default 3)")
    p.add_argument("--delay", type=float, default=2.0, help="seconds per LLM call (default 2)")
    p.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(DEFAULT_SCENARIOS))
    p.add_argument(
        "--model-backlog",
        type=int,
        default=1024,
        help="the model's listen backlog during the scenarios (default 1024; 0: as shipped, 5)",
    )
    p.add_argument("--repeat", type=int, default=1, help="run every scenario R times")
    p.add_argument(
        "--stream-chunks",
        type=int,
        default=0,
        help="stream each reply in N chunks over the second half of the delay (default 0)",
    )
    p.add_argument(
        "--no-live-output",
        action="store_true",
        help="agent runs without live output (on by default)",
    )
    args = p.parse_args()
    sizes = args.runs or ([50] if args.quick else [200, 1000])
    checks: list[ModelCheck] = []
    outcomes: list[Outcome] = []
    async with open_process_stack() as stack:
        for backlog in (5, 1024):
            await stack.model.ask(f"backlog {backlog}")
            for c in sizes:
                log(f"model alone, backlog {backlog}: {c} concurrent {args.delay:g} s requests")
                label = f"{backlog}" + (" (as shipped)" if backlog == 5 else " (bench)")
                checks.append(await check_model(stack, c, args.delay, label))
        await stack.model.ask(f"backlog {args.model_backlog or 5}")
        for c in sizes:
            for r in range(args.repeat):
                order = args.scenarios if r % 2 == 0 else list(reversed(args.scenarios))
                for name in order:
                    outcomes.append(
                        await scenario(
                            stack,
                            name,
                            c,
                            args.tools,
                            args.delay,
                            not args.no_live_output,
                            args.stream_chunks,
                        )
                    )
    if args.no_live_output:
        print("\nAgent runs with `live_output=False` (`--no-live-output`).")
    if args.stream_chunks:
        print(f"\nReplies streamed in {args.stream_chunks} chunks (`--stream-chunks`).")
    report(checks, outcomes, args.tools, args.delay, args.model_backlog)


def pool_figure(w: dict[str, Any]) -> str:
    if not w:
        return "worker gave no statistics"
    return (
        f"{w['pool_requests_queued']} ({w['pool_wait_ms']} ms; peak {w['pool_peak_waiting']}; "
        f"size {w['pool_peak_size']}/{w['pool_max']})"
    )


def task_waits(acc: Accounting) -> str:
    """How long the runs' workflow tasks after their first waited to be taken (scheduled →
    started), p99 and longest: those go to the worker's sticky queue, and past its timeout to
    the shared one (a run's first task waits on the shared queue, with every run started)."""
    waits = sorted(w for p in acc.profiles for w in p.wft_wait[1:])
    if not waits:
        return "—"
    return f"{waits[int(0.99 * (len(waits) - 1))]:.1f} / {waits[-1]:.1f}"


def report(
    checks: list[ModelCheck],
    outcomes: list[Outcome],
    tools: int,
    delay: float,
    backlog: int | None,
) -> None:
    ideal = (tools + 1) * delay
    print(f"\n## scale — runs of {tools} tool calls + an answer, every LLM call {delay:g} s "
          f"(ideal {ideal:g} s)")  # fmt: skip
    print(f"_{machine()}_\n")
    print(f"The model alone (ScriptedLLM in its own process), C concurrent {delay:g} s requests "
          "from one httpx2 client:\n")  # fmt: skip
    print_table(
        ["listen backlog", "C", "wall s", "answered", "errors", "peak in flight", "peak threads",
         "p95 time beyond the delay, s"],
        [[m.backlog, m.c, f"{m.wall:.2f}", m.ok, ", ".join(sorted(set(m.errors))) or "none",
          m.peak_in_flight, m.peak_threads, f"{m.connect_p95:.2f}"] for m in checks],
    )  # fmt: skip
    print(f"\nDuring the scenarios the model's listen backlog is {backlog or '5 (as shipped)'}.")

    def wall_of(name: str, c: int) -> float | None:
        walls = [x.wall for x in outcomes if x.c == c and x.name == name]
        return statistics.median(walls) if walls else None

    def floor_wall(o: Outcome) -> float | None:
        return wall_of("floor · " + o.name.split(" · ", 1)[1], o.c)  # the same worker settings

    def io_floor_wall(o: Outcome) -> float | None:
        if o.name != "ours · project defaults":
            return None
        return wall_of("floor + I/O · project defaults", o.c)

    rows = []
    for o in outcomes:
        fw = floor_wall(o)
        iw = io_floor_wall(o)
        lat = Summary.of(o.latencies)
        acc = o.accounting
        rows.append(
            [
                o.c,
                o.name,
                f"{o.wall:.1f}",
                f"{o.wall / ideal:.2f}×",
                f"{o.wall / fw:.2f}×" if fw else "—",
                f"{o.wall / iw:.2f}×" if iw else "—",
                f"{o.succeeded}/{o.c}",
                f"{lat.p50:.1f} / {lat.p95:.1f}",
                o.model["peak_in_flight"],
                o.model["duplicate_calls"],
                pool_figure(o.worker),
                f"{o.rss_idle:.0f} → {o.rss_peak:.0f} "
                f"({(o.rss_peak - o.rss_idle) * 1024 / o.c:.0f} KiB/run)",
                f"{sum(o.cpu[p] for p in PROCESSES) * 1000:.0f}",
                f"{o.cpu['worker'] * 1000:.0f} / {o.cpu['server'] * 1000:.0f}",
                acc.wft_timeouts,
                task_waits(acc),
                acc.activity_attempts["retries"],
                o.heartbeats,
                f"{o.worker['loop_lag_p99_ms']:.0f} / {o.worker['loop_lag_max_ms']:.0f}"
                if o.worker
                else "—",
            ]
        )
    print(f"\n### {len(outcomes)} scenario runs\n")
    print_table(
        ["C", "scenario", "wall s", "vs ideal", "vs floor (same settings)", "vs floor + I/O",
         "succeeded", "latency p50 / p95 s", "LLM calls in flight, peak", "duplicate LLM calls",
         "pool: requests that waited (total wait; peak waiting; size/max)",
         "worker RSS MiB idle → peak (per run)", "CPU ms/run, all processes",
         "CPU ms/run worker / server", "WFT timeouts", "later WFT waits p99 / max s",
         "activity retries", "heartbeats",
         "worker loop lag p99 / max ms"],
        rows,
    )  # fmt: skip
    timeouts = [
        (o, k, n) for o in outcomes for k, n in sorted(o.accounting.wft_timeouts_by.items())
    ]
    if timeouts:
        print("\nWorkflow-task timeouts by workflow and timeout type:\n")
        print_table(
            ["C", "scenario", "workflow · timeout", "count"],
            [[o.c, o.name, k, n] for o, k, n in timeouts],
        )
    failures = [(o.name, o.c, f) for o in outcomes for f in o.failures[:3]]
    if failures:
        print("\nFailed runs (first 3 per scenario):\n")
        for name, c, f in failures:
            print(f"- C={c} {name}: {f}")

    print("\nWhere a run's time went (s, median over runs; server event times):\n")
    breakdowns = [(o, time_breakdown(o.accounting.profiles)) for o in outcomes]
    names = list(breakdowns[0][1]) if breakdowns else []
    print_table(
        ["", *(f"C={o.c} · {o.name}" for o, _ in breakdowns)],
        [[n] + [f"{b[n]:.2f}" for _, b in breakdowns] for n in names],
    )
    print("\nCPU ms per run by process (to the end of the runs and their debrief children):\n")
    print_table(
        ["", *PROCESSES],
        [[f"C={o.c} · {o.name}", *(f"{o.cpu[p] * 1000:.0f}" for p in PROCESSES)] for o in outcomes],
    )


if __name__ == "__main__":
    run(main)
