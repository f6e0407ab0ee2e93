"""What a run's first write costs as a local activity, against the same write in its first
LLM step: is folding `prepare_run` into the first LLM step worth a new patch bundle?

An agent run seeds its transcript in `prepare_run`, a local activity in its first workflow
task, before its first LLM step: one marker event (≈1.1 kB), one billable action, and a
workflow task held open across a Postgres round trip. Folding it into the first LLM step
removes the marker and the action, but that step's input must then carry the task and the
agent's configuration (≈ the marker's size again), so history bytes would not shrink; what
it could gain is worker and server CPU and runs/s. Measured here on the floor with I/O
(bench/_floor.py), whose code is the same in all three scenarios but for where one write is
made, on one stack and one worker, batches interleaved:

- floor + I/O: no first write (the reference);
- … · prepare as a local activity: the write in a local activity before the first step;
- … · prepare in the first LLM step: the write at the start of that step.

    .venv/bin/python -m bench.prepare_fold [--quick] [--concurrency C] [--rounds R]
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from bench._procs import open_process_stack
from bench._runs import FLOOR_IO, FLOOR_IO_LOCAL_PREPARE, FLOOR_IO_STEP_PREPARE, Scenario
from bench._stack import Summary, log, machine, parser, print_table, run
from bench.cost import Batch, batch

SCENARIOS = (FLOOR_IO, FLOOR_IO_LOCAL_PREPARE, FLOOR_IO_STEP_PREPARE)


async def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--concurrency", type=int, default=50, help="runs per batch (default 50)")
    p.add_argument("--iterations", type=int, default=3, help="K per run (default 3)")
    p.add_argument("--rounds", type=int, default=None, help="batches each (default 6; quick 2)")
    args = p.parse_args()
    c, k = args.concurrency, args.iterations
    rounds = args.rounds or (2 if args.quick else 6)
    batches: dict[str, list[Batch]] = {kind: [] for kind in SCENARIOS}
    async with open_process_stack() as stack, stack.worker("bench-prepare") as worker:
        scenarios = {kind: Scenario(kind, "bench-prepare") for kind in SCENARIOS}
        log("warming up")
        for s in scenarios.values():
            await batch(stack, worker, s, 5, k)
        for r in range(rounds):
            for kind in SCENARIOS if r % 2 == 0 else tuple(reversed(SCENARIOS)):
                log(f"round {r + 1}/{rounds}: {c} × {k} iterations, {kind}")
                batches[kind].append(await batch(stack, worker, scenarios[kind], c, k))
    report(batches, c, k, rounds)


def report(batches: dict[str, list[Batch]], c: int, k: int, rounds: int) -> None:
    print(f"\n## prepare_fold — {c} concurrent {k}-iteration runs × {rounds} batches each")
    print(f"_{machine()}_\n")

    def med(kind: str, fn: Callable[[Batch], float]) -> float:
        return statistics.median(fn(x) for x in batches[kind])

    def figures(fn: Callable[[Batch], float], fmt: str) -> list[str]:
        base = med(FLOOR_IO, fn)
        return [f"{med(kind, fn):{fmt}} ({med(kind, fn) / base:.2f}×)" for kind in SCENARIOS]

    def rate(x: Batch) -> float:
        return c / x.wall

    def worker_ms(x: Batch) -> float:
        return x.cpu["worker"] * 1000

    def server_ms(x: Batch) -> float:
        return x.cpu["server"] * 1000

    def postgres_ms(x: Batch) -> float:
        return x.cpu["postgres"] * 1000

    def actions(x: Batch) -> float:
        return x.accounting.per_run(x.accounting.total_actions)

    def history_bytes(x: Batch) -> float:
        return x.accounting.per_run(x.accounting.history_bytes)

    latency = {
        kind: Summary.of([v for x in batches[kind] for v in x.latencies]) for kind in SCENARIOS
    }
    print_table(
        ["figure (median over batches; × floor + I/O)", *SCENARIOS],
        [
            ["runs/s", *figures(rate, ".1f")],
            ["run latency p50 / p95 ms",
             *(f"{latency[kd].p50 * 1000:.0f} / {latency[kd].p95 * 1000:.0f}" for kd in SCENARIOS)],
            ["worker CPU per run ms", *figures(worker_ms, ".1f")],
            ["server CPU per run ms", *figures(server_ms, ".1f")],
            ["Postgres CPU per run ms", *figures(postgres_ms, ".1f")],
            ["actions per run", *(f"{med(kd, actions):.1f}" for kd in SCENARIOS)],
            ["history bytes per run", *figures(history_bytes, ",.0f")],
        ],
    )  # fmt: skip
    local, step = FLOOR_IO_LOCAL_PREPARE, FLOOR_IO_STEP_PREPARE

    def cpu(kind: str) -> float:
        return med(kind, worker_ms) + med(kind, server_ms)

    print(
        f"\nThe write in the first LLM step against it in a local activity: runs/s "
        f"{med(step, rate) / med(local, rate):.2f}×, worker + server CPU per run "
        f"{cpu(step) / cpu(local):.2f}×, actions per run "
        f"{med(step, actions) - med(local, actions):+.1f}."
    )


if __name__ == "__main__":
    run(main)
