"""Two versions of the project's worker side by side on one stack: `--before REV` (a git
revision, checked out into a temporary worktree) and now (this tree).

Whole-stack benches run before-then-after do not resolve a change of 5–10% on this shared
machine: the second run of a pair was the faster whichever code it ran (bench/README.md).
Here both versions' workers run at once, each in its own process on its own task queue,
against the same Temporal server, Postgres and bench model (bench/_procs.py), and their
batches alternate round by round (before then now, then now then before), so each round
compares two batches taken seconds apart. Each worker also runs the floor
(`BenchFloorWorkflow`, the same activities as no-ops): its now / before ratio is the
method's own noise, since the floor's code is the same in both.

Per round and version: a batch of C concurrent K-iteration agent runs (memory on or off,
live output on: the project's defaults) and a batch of C floor runs. Reported: CPU per run
of each worker, of the server and of Postgres over each batch, runs/s and latency; medians
over rounds, and the per-round ratio now / before (median, min–max).

    .venv/bin/python -m bench.ab --before REV [--rounds R] [--concurrency C]
        [--iterations K] [--memory-off] [--quick]

The runs are started by this tree's client (`Agent.start`): REV must take the same workflow
input (any revision since the run's input last changed).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import statistics
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from bench._procs import ROOT, compile_project, open_process_stack
from bench._runs import FLOOR, MEMORY_OFF, MEMORY_ON, Scenario
from bench._stack import Summary, log, machine, parser, print_table, run
from bench.cost import Batch, batch
from reactive_temporal.contracts import names

VERSIONS = ("before", "now")


@contextlib.contextmanager
def worktree(rev: str) -> Iterator[Path]:
    """This repository at `rev`, checked out (detached) into a temporary directory."""
    path = Path(tempfile.mkdtemp(prefix="rt-bench-ab-")) / "before"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(path), rev],
        check=True,
    )
    try:
        yield path
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)], check=False
        )


def git(*argv: str) -> str:
    """What `git argv…` prints in this repository."""
    done = subprocess.run(["git", "-C", str(ROOT), *argv], check=True, capture_output=True)
    return done.stdout.decode().strip()


def starters_bundle(root: Path) -> str | None:
    """The patch bundle the starters of the tree at `root` put in a run's input (None: the
    tree predates bundles). A worker given a newer bundle than it knows asks its own bundle's
    patch (a marker and an upsert more per run), so each version's runs carry their own."""
    source = (root / "reactive_temporal" / "contracts" / "names.py").read_text()
    constants = dict(re.findall(r'^([A-Z0-9_]+): Final = "([^"]*)"', source, re.MULTILINE))
    alias = re.search(r"^RUN_PATCH_BUNDLE: Final = ([A-Z0-9_]+)$", source, re.MULTILINE)
    if alias:
        return constants[alias.group(1)]
    return constants.get("RUN_PATCHES_2026_12")


@contextlib.contextmanager
def starting_with(bundle: str | None) -> Iterator[None]:
    """This process's starters (`Agent.start`) put `bundle` in the runs they start."""
    now = names.RUN_PATCH_BUNDLE
    names.RUN_PATCH_BUNDLE = bundle  # type: ignore[misc,assignment]
    try:
        yield
    finally:
        names.RUN_PATCH_BUNDLE = now  # type: ignore[misc]


def ratio_summary(nows: list[float], befores: list[float]) -> str:
    """Median (min–max) of the per-round ratios now / before."""
    ratios = [n / b for n, b in zip(nows, befores, strict=True) if b]
    if not ratios:
        return "–"
    return f"{statistics.median(ratios):.3f}× ({min(ratios):.3f}–{max(ratios):.3f})"


async def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--before", required=True, help="the git revision to compare this tree with")
    p.add_argument("--rounds", type=int, default=None, help="rounds (default 10; quick 2)")
    p.add_argument("--concurrency", type=int, default=50, help="runs per batch (default 50)")
    p.add_argument("--iterations", type=int, default=3, help="K per run (default 3)")
    p.add_argument("--memory-off", action="store_true", help="agent runs with memory=False")
    args = p.parse_args()
    rounds = args.rounds or (2 if args.quick else 10)
    c, k = args.concurrency, args.iterations
    kind = MEMORY_OFF if args.memory_off else MEMORY_ON
    revision = git("rev-parse", "--short", args.before)
    now_revision = git("describe", "--always", "--dirty")
    agent: dict[str, list[Batch]] = {v: [] for v in VERSIONS}
    floor: dict[str, list[Batch]] = {v: [] for v in VERSIONS}

    with worktree(revision) as before_root:
        async with open_process_stack() as stack:
            await asyncio.to_thread(compile_project, stack.pycache, before_root)
            roots = {"before": before_root, "now": ROOT}
            async with (
                stack.worker("bench-ab-before", root=roots["before"]) as before_worker,
                stack.worker("bench-ab-now", root=roots["now"]) as now_worker,
            ):
                workers = {"before": before_worker, "now": now_worker}
                bundles = {v: starters_bundle(roots[v]) for v in VERSIONS}
                agents = {v: Scenario(kind, f"bench-ab-{v}") for v in VERSIONS}
                floors = {v: Scenario(FLOOR, f"bench-ab-{v}") for v in VERSIONS}
                log("warming up")
                for v in VERSIONS:
                    with starting_with(bundles[v]):
                        await batch(stack, workers[v], agents[v], 5, k)
                    await batch(stack, workers[v], floors[v], 5, k)
                for r in range(rounds):
                    order = VERSIONS if r % 2 == 0 else tuple(reversed(VERSIONS))
                    for v in order:
                        log(f"round {r + 1}/{rounds}: {v}, {c} × {k} iterations, {kind}")
                        with starting_with(bundles[v]):
                            agent[v].append(await batch(stack, workers[v], agents[v], c, k))
                    for v in order:
                        log(f"round {r + 1}/{rounds}: {v}, {c} × {k} iterations, floor")
                        floor[v].append(await batch(stack, workers[v], floors[v], c, k))

    print(f"\n## ab — {revision} (before) against {now_revision} (now), one stack")
    print(f"_{machine()}_\n")
    print(f"{rounds} rounds; each round, per version: {c} concurrent {k}-iteration runs "
          f"({kind}, live output on), then {c} floor runs. Each worker in its own process; "
          "CPU per run over each batch.\n")  # fmt: skip

    def figure(batches: dict[str, list[Batch]], fn: Callable[[Batch], float]) -> list[str]:
        before, now = ([fn(x) for x in batches[v]] for v in VERSIONS)
        return [
            f"{statistics.median(before):.2f}",
            f"{statistics.median(now):.2f}",
            ratio_summary(now, before),
        ]

    def cpu(process: str) -> Callable[[Batch], float]:
        return lambda x: x.cpu[process] * 1000

    def rate(x: Batch) -> float:
        return c / x.wall

    rows = [
        [f"{kind}: worker CPU ms/run", *figure(agent, cpu("worker"))],
        [f"{kind}: server CPU ms/run", *figure(agent, cpu("server"))],
        [f"{kind}: Postgres CPU ms/run", *figure(agent, cpu("postgres"))],
        [f"{kind}: model CPU ms/run", *figure(agent, cpu("model"))],
        [f"{kind}: runs/s", *figure(agent, rate)],
        [
            f"{kind}: latency p50 ms",
            *figure(agent, lambda x: Summary.of(x.latencies).p50 * 1000),
        ],
        ["floor (control): worker CPU ms/run", *figure(floor, cpu("worker"))],
        ["floor (control): server CPU ms/run", *figure(floor, cpu("server"))],
        ["floor (control): runs/s", *figure(floor, rate)],
    ]
    print_table(["per run (medians over rounds)", "before", "now", "now / before by round"], rows)


if __name__ == "__main__":
    run(main)
