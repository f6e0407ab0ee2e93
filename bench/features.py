"""What each default feature of an agent run costs, per run, next to the floor with I/O.

`bench.cost` compares ours, as a user runs it, with the floors. This script splits what ours
costs above the floor with I/O (bench/_floor.py: the model call and one committed write per
step) among the two features that are on by default: the agent's memory (notes read when the
run is seeded, its debrief and last-run rows written at its end) and the live output (the
reply streamed, the iteration, text and tool events written with the steps' records). Four
agent variants (memory off/on × live output off/on) and the floor with I/O (outside Temporal's
sandbox, as ours runs), 3-iteration runs (noop, noop, answer), one at a time so each run's
CPU is its own; the variants interleaved round by round on one worker, CPU per run of every
process (`/proc`), medians over rounds. With `--concurrency C`, each round's runs go C at a
time instead (a worker under load).

Without live output a step asks the model without streaming; the floor with I/O streams as
ours does with it. So "live output" below is the events and the streamed read together.

    .venv/bin/python -m bench.features [--quick] [--runs N] [--rounds R] [--concurrency C]
"""

from __future__ import annotations

import asyncio
import statistics

from bench._procs import ProcessStack, delta, open_process_stack
from bench._runs import FLOOR_IO, MEMORY_OFF, MEMORY_ON, Scenario, one_run
from bench._stack import log, machine, parser, print_table, run

VARIANTS = (
    (FLOOR_IO, True),
    (MEMORY_OFF, False),
    (MEMORY_OFF, True),
    (MEMORY_ON, False),
    (MEMORY_ON, True),
)
PROCESSES = ("worker", "server", "postgres")


def label(kind: str, live: bool) -> str:
    return kind if kind == FLOOR_IO else f"{kind}, live output {'on' if live else 'off'}"


async def cpu_per_run(
    stack: ProcessStack, worker: object, s: Scenario, runs: int, concurrency: int = 1
) -> dict:
    """CPU ms per run of each process, over `runs` runs, `concurrency` at a time."""
    before = stack.cpu(worker)  # type: ignore[arg-type]
    for start in range(0, runs, concurrency):
        now = min(concurrency, runs - start)
        await asyncio.gather(*(one_run(stack.client, s, tool_calls=2) for _ in range(now)))
    if concurrency > 1:
        await asyncio.sleep(1.5)  # the server's work the last runs started (visibility)
    spent = delta(stack.cpu(worker), before)  # type: ignore[arg-type]
    return {p: spent[p] / runs * 1000 for p in PROCESSES}


async def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--runs", type=int, default=None, help="runs per round (default 40; quick 15)")
    p.add_argument("--rounds", type=int, default=None, help="rounds (default 5; quick 2)")
    p.add_argument("--concurrency", type=int, default=1, help="runs at a time (default 1)")
    args = p.parse_args()
    c = args.concurrency
    runs = args.runs or max(c, 15 if args.quick else 40)
    rounds = args.rounds or (2 if args.quick else 5)
    measured: dict[tuple[str, bool], list[dict]] = {v: [] for v in VARIANTS}
    # the floor outside Temporal's sandbox, as ours runs: the sandbox is not what is compared
    options = {"floor_unsandboxed": True}
    async with open_process_stack() as stack, stack.worker("bench-features", options) as worker:
        scenarios = {v: Scenario(v[0], "bench-features", live_output=v[1]) for v in VARIANTS}
        log("warming up")
        for s in scenarios.values():
            await cpu_per_run(stack, worker, s, 3)
        for r in range(rounds):
            log(f"round {r + 1}/{rounds}: {runs} runs of each variant")
            for v in VARIANTS if r % 2 == 0 else tuple(reversed(VARIANTS)):
                measured[v].append(await cpu_per_run(stack, worker, scenarios[v], runs, c))
    report(measured, runs, rounds, c)


def report(
    measured: dict[tuple[str, bool], list[dict]], runs: int, rounds: int, concurrency: int
) -> None:
    at = "one at a time" if concurrency == 1 else f"{concurrency} at a time"
    print(f"\n## features — 3-iteration runs {at}, {runs} a round × {rounds} rounds")
    print(f"_{machine()}_\n")
    med = {
        v: {p: statistics.median(m[p] for m in ms) for p in PROCESSES} for v, ms in measured.items()
    }
    floor = med[(FLOOR_IO, True)]

    def total(v: tuple[str, bool]) -> float:
        return sum(med[v].values())

    print_table(
        ["CPU ms per run (median of rounds)", *PROCESSES, "all three", "above the floor with I/O"],
        [
            [label(*v), *(f"{med[v][p]:.1f}" for p in PROCESSES), f"{total(v):.1f}",
             "" if v == (FLOOR_IO, True) else f"{total(v) - sum(floor.values()):+.1f}"]
            for v in VARIANTS
        ],
    )  # fmt: skip

    def cost(a: tuple[str, bool], b: tuple[str, bool]) -> str:
        return ", ".join(f"{p} {med[b][p] - med[a][p]:+.1f}" for p in PROCESSES)

    print("\nWhat each feature adds per run (ms of CPU):\n")
    print(f"- live output, memory off: {cost((MEMORY_OFF, False), (MEMORY_OFF, True))}")
    print(f"- live output, memory on: {cost((MEMORY_ON, False), (MEMORY_ON, True))}")
    print(f"- memory, live output off: {cost((MEMORY_OFF, False), (MEMORY_ON, False))}")
    print(f"- memory, live output on: {cost((MEMORY_OFF, True), (MEMORY_ON, True))}")
    print(f"- neither, against the floor with I/O: {cost((FLOOR_IO, True), (MEMORY_OFF, False))}")


if __name__ == "__main__":
    run(main)
