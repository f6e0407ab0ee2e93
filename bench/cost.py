"""Cost per run, next to the floor: CPU by process, billable actions, events, latency.

Every part of the stack runs in its own process (bench/_procs.py): the Temporal dev server,
Postgres, the bench model (zero latency), and one project worker with the project's default
settings; this process only starts runs and reads histories. Four scenarios, interleaved
on that worker and server:

- floor: `BenchFloorWorkflow` (bench/_floor.py), the same LLM and tool activities as no-ops,
  in Temporal's sandbox as a user's bare workflow runs (ours run outside it; with
  `--floor-unsandboxed`, the floor does too);
- floor + I/O: the same workflow, its steps doing only the I/O an agent's cannot skip (the
  model call through the project's client, streamed, posted and read as `llm_step` does; one
  committed Postgres write per step): the agent runs' cost above it is the framework's, its
  own above the floor the I/O's;
- memory off: agent runs with `memory=False`;
- memory on (the project default): agent runs with `memory=True` (debrief child, lessons).

Part 1, per run: batches of C concurrent runs of K iterations (K-1 `noop` tool calls, then
`FINAL ANSWER:`), B batches each. Runs/s and latency are to the runs' results; CPU per run
is each process's CPU over the batch *including* the memory-on runs' debrief children (the
batch ends when they have finished), divided by C; actions per run count every workflow
involved (run, debrief child, the agent entity's new events) by Temporal Cloud's rules
(bench/_actions.py), next to the dev server's own `action` metric over the same window.

Part 2, per iteration: single runs of K_small and K_big iterations, T trials each,
interleaved; the per-iteration figures are the differences between the two sizes divided by
K_big - K_small (fixed per-run costs cancel), plus ms per iteration of the K_big run.

    .venv/bin/python -m bench.cost [--quick] [--concurrency C] [--batches B] [--trials T]
        [--floor-unsandboxed]
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from bench._actions import heartbeats, server_action_total
from bench._procs import ProcessStack, delta, open_process_stack
from bench._runs import (
    FLOOR,
    FLOOR_IO,
    MEMORY_OFF,
    MEMORY_ON,
    Accounting,
    Run,
    Scenario,
    account,
    entity_position,
    one_run,
    time_breakdown,
    wait_for_debriefs,
)
from bench._stack import Summary, log, machine, parser, print_table, run

PROCESSES = ("worker", "server", "model", "client", "postgres")
SCENARIOS = (FLOOR, FLOOR_IO, MEMORY_OFF, MEMORY_ON)


@dataclass
class Batch:
    wall: float
    latencies: list[float]
    cpu: dict[str, float]
    """Per run, seconds, by process."""
    accounting: Accounting
    server_actions: int
    heartbeats: int


@dataclass
class Sequential:
    wall: float
    cpu: dict[str, float]
    accounting: Accounting


@dataclass
class Results:
    batches: dict[str, list[Batch]] = field(default_factory=dict)
    small: dict[str, list[Sequential]] = field(default_factory=dict)
    big: dict[str, list[Sequential]] = field(default_factory=dict)


async def settle(stack: ProcessStack) -> None:
    """Let the server finish what the last runs started (entity signals, visibility), and
    its metrics reporter flush, before reading counters."""
    await asyncio.sleep(1.5)


async def batch(
    stack: ProcessStack, worker_pid_holder: object, scenario: Scenario, c: int, k: int
) -> Batch:
    worker = worker_pid_holder
    entity_from = await entity_position(stack.client, scenario)
    await settle(stack)
    metrics0 = stack.metrics.read()
    cpu0 = stack.cpu(worker)  # type: ignore[arg-type]
    started = time.perf_counter()
    runs: list[Run] = list(
        await asyncio.gather(*(one_run(stack.client, scenario, tool_calls=k - 1) for _ in range(c)))
    )
    wall = time.perf_counter() - started
    if scenario.memory:
        await wait_for_debriefs(stack.client, runs)
    cpu1 = stack.cpu(worker)  # type: ignore[arg-type]
    await settle(stack)
    metrics1 = stack.metrics.read()
    acc = await account(stack.client, scenario, runs, entity_from=entity_from)
    server = metrics1 - metrics0
    return Batch(
        wall=wall,
        latencies=[r.latency for r in runs],
        cpu={p: v / c for p, v in delta(cpu1, cpu0).items()},
        accounting=acc,
        server_actions=server_action_total(server),
        heartbeats=heartbeats(server),
    )


async def sequential(stack: ProcessStack, worker: object, scenario: Scenario, k: int) -> Sequential:
    cpu0 = stack.cpu(worker)  # type: ignore[arg-type]
    started = time.perf_counter()
    r = await one_run(stack.client, scenario, tool_calls=k - 1)
    wall = time.perf_counter() - started
    cpu1 = stack.cpu(worker)  # type: ignore[arg-type]
    if scenario.memory:
        await wait_for_debriefs(stack.client, [r])
    acc = await account(stack.client, scenario, [r], entity_from=1 << 62)  # runs only
    return Sequential(wall, delta(cpu1, cpu0), acc)


def med(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


async def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--concurrency", type=int, default=50, help="runs per batch (default 50)")
    p.add_argument("--iterations", type=int, default=3, help="K per run in part 1 (default 3)")
    p.add_argument("--batches", type=int, default=None, help="batches each (default 3; quick 1)")
    p.add_argument("--trials", type=int, default=None, help="part 2 trials (default 5; quick 2)")
    p.add_argument("--small", type=int, default=3, help="K_small (default 3)")
    p.add_argument("--big", type=int, default=30, help="K_big (default 30)")
    p.add_argument(
        "--floor-unsandboxed",
        action="store_true",
        help="run the floor outside Temporal's sandbox, as the project's workflows run "
        "(default: inside, as a user's bare workflow would)",
    )
    p.add_argument(
        "--no-live-output",
        action="store_true",
        help="agent runs without live output (on by default)",
    )
    args = p.parse_args()
    c, k = args.concurrency, args.iterations
    batches = args.batches or (1 if args.quick else 3)
    trials = args.trials or (2 if args.quick else 5)
    results = Results()

    options = {"floor_unsandboxed": True} if args.floor_unsandboxed else None
    async with open_process_stack() as stack, stack.worker("bench-cost", options) as worker:
        live = not args.no_live_output
        scenarios = {kind: Scenario(kind, "bench-cost", live_output=live) for kind in SCENARIOS}
        log("warming up")
        for s in scenarios.values():
            await batch(stack, worker, s, 5, k)
        for b in range(batches):
            order = SCENARIOS if b % 2 == 0 else tuple(reversed(SCENARIOS))
            for kind in order:
                log(f"batch {b + 1}/{batches}: {c} × {k} iterations, {kind}")
                results.batches.setdefault(kind, []).append(
                    await batch(stack, worker, scenarios[kind], c, k)
                )
        for t in range(trials):
            log(f"trial {t + 1}/{trials}: single runs of {args.small} and {args.big} iterations")
            for kind in SCENARIOS if t % 2 == 0 else tuple(reversed(SCENARIOS)):
                s = scenarios[kind]
                results.small.setdefault(kind, []).append(
                    await sequential(stack, worker, s, args.small)
                )
                big = await sequential(stack, worker, s, args.big)
                results.big.setdefault(kind, []).append(big)

    if args.no_live_output:
        print("\nAgent runs with `live_output=False` (`--no-live-output`).")
    if args.floor_unsandboxed:
        print("\nThe floor runs outside Temporal's sandbox, as ours does (`--floor-unsandboxed`).")
    report(results, c, k, batches, trials, args.small, args.big)


def report(
    results: Results, c: int, k: int, batches: int, trials: int, small: int, big: int
) -> None:  # noqa: E501
    print(f"\n## cost — {c} concurrent {k}-iteration runs × {batches} batch(es) per scenario; "
          f"single runs of {small} and {big} iterations × {trials}")  # fmt: skip
    print(f"_{machine()}_\n")
    print("Worker, Temporal server, model, client (this process) and Postgres each in their own "
          "process; one worker, project defaults.\n")  # fmt: skip

    def per_batch(kind: str, fn: Callable[[Batch], float]) -> float:
        """Median over the scenario's batches."""
        return med([fn(x) for x in results.batches[kind]])

    def cpu_of(process: str) -> Callable[[Batch], float]:
        return lambda x: x.cpu[process]

    def rate(x: Batch) -> float:
        return c / x.wall

    def worker_server(x: Batch) -> float:
        return x.cpu["worker"] + x.cpu["server"]

    def server(x: Batch) -> float:
        return x.cpu["server"]

    def actions(x: Batch) -> float:
        return x.accounting.per_run(x.accounting.total_actions)

    def events(x: Batch) -> float:
        return x.accounting.per_run(sum(x.accounting.events.values()))

    def tasks(x: Batch) -> float:
        return x.accounting.per_run(x.accounting.workflow_tasks)

    def latency(kind: str) -> Summary:
        return Summary.of([v for x in results.batches[kind] for v in x.latencies])

    floor = {fn: per_batch(FLOOR, fn) for fn in (rate, worker_server, server, actions)}
    rows = []
    for kind in SCENARIOS:
        lat = latency(kind)
        ws, act = per_batch(kind, worker_server), per_batch(kind, actions)
        rows.append(
            [
                kind,
                f"{per_batch(kind, rate):.1f} ({per_batch(kind, rate) / floor[rate]:.2f}×)",
                f"{lat.p50 * 1000:.0f} / {lat.p95 * 1000:.0f}",
                *(f"{per_batch(kind, cpu_of(p)) * 1000:.1f}" for p in PROCESSES),
                f"{ws * 1000:.1f} ({ws / floor[worker_server]:.2f}×)",
                f"{per_batch(kind, server) / floor[server]:.2f}×",
                f"{act:.1f} ({act - floor[actions]:+.1f})",
                f"{per_batch(kind, lambda x: x.server_actions / c):.1f}",
                f"{per_batch(kind, events):.1f}",
                f"{per_batch(kind, tasks):.1f}",
                str(sum(x.accounting.wft_timeouts for x in results.batches[kind])),
                str(sum(x.heartbeats for x in results.batches[kind])),
            ]
        )
    print(f"### Per run: {c} concurrent runs of {k} iterations (medians over batches)\n")
    print_table(
        ["scenario", "runs/s (vs floor)", "latency p50 / p95 ms",
         *(f"CPU ms/run: {p}" for p in PROCESSES), "worker + server (vs floor)",
         "server vs floor", "actions/run (vs floor)", "server's action metric/run",
         "events/run", "workflow tasks/run", "WFT timeouts", "heartbeats"],
        rows,
    )  # fmt: skip

    print("\nWhere a run's time went (ms, median over the runs of every batch; server times):\n")
    breakdowns = {
        kind: time_breakdown([pr for x in results.batches[kind] for pr in x.accounting.profiles])
        for kind in SCENARIOS
    }
    print_table(
        ["", *SCENARIOS],
        [[name] + [f"{breakdowns[kind][name] * 1000:.1f}" for kind in SCENARIOS]
         for name in breakdowns[FLOOR]],
    )  # fmt: skip

    first = {kind: results.batches[kind][0].accounting for kind in SCENARIOS}
    names = sorted({name for acc in first.values() for name in acc.actions})
    print("\nBillable actions per run by kind (first batch of each scenario):\n")
    print_table(
        ["action", *SCENARIOS],
        [[n, *(f"{first[kind].per_run(first[kind].actions[n]):.2f}" for kind in SCENARIOS)]
         for n in names]
        + [[f"— of which in the {role}",
            *(f"{first[kind].per_run(first[kind].actions_by_workflow[role]):.2f}"
              for kind in SCENARIOS)]
           for role in ("run", "debrief child", "agent entity")],
    )  # fmt: skip

    print(f"\n### Per iteration: single runs of {small} and {big} iterations, {trials} trials "
          f"(Δ = ({big}-iteration run − {small}-iteration run) / {big - small})\n")  # fmt: skip
    per_iter = {kind: per_iteration(results, kind, small, big) for kind in SCENARIOS}
    print_table(
        ["scenario", f"ms / iteration ({big}-iteration run)", "Δ ms / iteration",
         "Δ worker CPU ms", "Δ server CPU ms", "Δ actions", "Δ events", "Δ history bytes (proto)"],
        [[kind, f"{v['ms'] * 1000:.1f}", f"{v['dms'] * 1000:.1f}", f"{v['worker'] * 1000:.2f}",
          f"{v['server'] * 1000:.2f}", f"{v['actions']:.2f}", f"{v['events']:.1f}",
          f"{v['bytes']:,.0f}"] for kind, v in per_iter.items()],
    )  # fmt: skip

    f = per_iter[FLOOR]

    def by_round(kind: str, fn: Callable[[Batch], float]) -> str:
        """The median of the per-round ratios to the floor (each round runs every scenario
        back to back), with their range: drift over the run moves both sides of a ratio."""
        rounds = zip(results.batches[kind], results.batches[FLOOR], strict=True)
        return spread([fn(x) / fn(b) for x, b in rounds])

    def by_trial(kind: str) -> str:
        pairs = zip(results.big[kind], results.big[FLOOR], strict=True)
        return spread([x.wall / b.wall for x, b in pairs])

    print("\n### Goals (issue 14), as measured in this run\n")
    print("Ratio of the medians, then the median of the per-round (or per-trial) ratios and "
          "their range.\n")  # fmt: skip
    goal_rows = []
    for kind in (MEMORY_OFF, MEMORY_ON):
        v = per_iter[kind]
        goal_rows += [
            [kind, "CPU per run, worker + server ≤ 1.3× floor",
             f"{per_batch(kind, worker_server) / floor[worker_server]:.2f}×",
             by_round(kind, worker_server)],
            [kind, "server CPU per run ≤ 1.2× floor",
             f"{per_batch(kind, server) / floor[server]:.2f}×", by_round(kind, server)],
            [kind, "actions per iteration = floor's", f"{v['actions']:.2f} vs {f['actions']:.2f}",
             ""],
            [kind, "actions per run ≤ floor + 3",
             f"{per_batch(kind, actions) - floor[actions]:+.1f}", ""],
            [kind, f"{c} concurrent runs: runs/s ≥ 0.8× floor",
             f"{per_batch(kind, rate) / floor[rate]:.2f}×", by_round(kind, rate)],
            [kind, f"ms per iteration ({big} iterations) ≤ 1.2× floor",
             f"{v['ms'] / f['ms']:.2f}×", by_trial(kind)],
        ]  # fmt: skip
    on_off = latency(MEMORY_ON).p50 / latency(MEMORY_OFF).p50
    on_off_rounds = spread(
        [Summary.of(on.latencies).p50 / Summary.of(off.latencies).p50
         for on, off in zip(results.batches[MEMORY_ON], results.batches[MEMORY_OFF], strict=True)]
    )  # fmt: skip
    goal_rows.append(["both", f"{c} concurrent runs: latency memory on / off ≤ 1.05×",
                      f"{on_off:.2f}×", on_off_rounds])  # fmt: skip
    print_table(["scenario", "goal", "ratio of medians", "by round: median (range)"], goal_rows)

    io, fio = (
        {fn: per_batch(FLOOR_IO, fn) for fn in (rate, worker_server, server)},
        per_iter[FLOOR_IO],
    )
    print("\n### The same ratios against the floor with I/O (what the framework adds to the I/O)\n")
    print_table(
        ["scenario", "worker + server CPU per run", "server CPU per run", "runs/s",
         "ms per iteration"],
        [[kind, *(f"{per_batch(kind, fn) / io[fn]:.2f}×" for fn in (worker_server, server)),
          f"{per_batch(kind, rate) / io[rate]:.2f}×", f"{per_iter[kind]['ms'] / fio['ms']:.2f}×"]
         for kind in (MEMORY_OFF, MEMORY_ON)]
        + [[f"({FLOOR_IO} vs {FLOOR})",
            *(f"{io[fn] / floor[fn]:.2f}×" for fn in (worker_server, server)),
            f"{io[rate] / floor[rate]:.2f}×", f"{fio['ms'] / f['ms']:.2f}×"]],
    )  # fmt: skip


def spread(ratios: Sequence[float]) -> str:
    """`median× (min–max)` of ratios."""
    return f"{med(ratios):.2f}× ({min(ratios):.2f}–{max(ratios):.2f})"


def per_iteration(results: Results, kind: str, small: int, big: int) -> dict[str, float]:
    """Medians over trials of (big run − small run) / (big − small); `ms` is the big run's
    wall time per iteration."""
    pairs = list(zip(results.small[kind], results.big[kind], strict=True))
    n = big - small

    def d(fn: Callable[[Sequential], float]) -> float:
        return med([(fn(b) - fn(s)) / n for s, b in pairs])

    return {
        "ms": med([b.wall / big for _, b in pairs]),
        "dms": d(lambda x: x.wall),
        "worker": d(lambda x: x.cpu["worker"]),
        "server": d(lambda x: x.cpu["server"]),
        "actions": d(lambda x: x.accounting.total_actions),
        "bytes": d(lambda x: x.accounting.history_bytes),
        "events": d(lambda x: sum(x.accounting.events.values())),
    }


if __name__ == "__main__":
    run(main)
