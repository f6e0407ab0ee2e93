"""What a workflow costs the worker when its modules have no bytecode to load.

Temporal's sandbox imports each workflow's module anew for every workflow it runs (the
project's other modules are passed through, imported once). Python loads a module from its
`.pyc` when there is a valid one and compiles the source otherwise; with
`PYTHONDONTWRITEBYTECODE=1` (the worker image sets it, as do many images) nothing writes one,
so every run, debrief and agent entity the worker starts compiles `workflows/agent_run.py`
and the rest again. The Dockerfile compiles them at build time.

Here: committed histories (tests/histories) replayed in a fresh process, each replay a new
sandboxed workflow, once with no bytecode and once with bytecode compiled beforehand (into a
`PYTHONPYCACHEPREFIX` tree, so the source tree is left alone), alternating, both with
`PYTHONDONTWRITEBYTECODE=1`. Printed: CPU ms per replayed workflow.

    .venv/bin/python -m bench.sandbox_bytecode [--replays N] [--rounds R] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench._procs import compile_project

ROOT = Path(__file__).resolve().parent.parent
HISTORIES = ("approval_run.json", "cancelled_run.json", "budget_exceeded_run.json")

CHILD = """
import asyncio, json, sys, time
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer
from workflows.agent_debrief import DebriefWorkflow
from workflows.agent_entity import AgentWorkflow
from workflows.agent_run import AgentRunWorkflow

async def main(replays: int, files: list[str]) -> None:
    histories = [WorkflowHistory.from_json(f, json.load(open(f))) for f in files]
    replayer = Replayer(workflows=[AgentRunWorkflow, AgentWorkflow, DebriefWorkflow])
    for h in histories:  # warm: the passed-through modules are imported once per process
        await replayer.replay_workflow(h)
    started = time.process_time()
    for _ in range(replays):
        for h in histories:
            await replayer.replay_workflow(h)
    print((time.process_time() - started) / (replays * len(histories)) * 1000)

asyncio.run(main(int(sys.argv[1]), sys.argv[2:]))
"""


def per_replay_ms(replays: int, pycache: str) -> float:
    """CPU ms per replay, bytecode looked for in `pycache` only (an empty tree: none, even
    where `make` compiled the source tree's own __pycache__)."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONWARNINGS": "ignore"}
    env["PYTHONPYCACHEPREFIX"] = pycache
    files = [str(ROOT / "tests" / "histories" / name) for name in HISTORIES]
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(replays), *files],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def main(replays: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        pycache = str(compile_project(Path(tmp)))  # as the cost and scale benches' workers
        empty = Path(tmp) / "empty"
        empty.mkdir()
        without: list[float] = []
        with_bytecode: list[float] = []
        for _ in range(rounds):
            without.append(per_replay_ms(replays, str(empty)))
            with_bytecode.append(per_replay_ms(replays, pycache))
    a, b = statistics.median(without), statistics.median(with_bytecode)
    print(f"CPU ms per replayed workflow (a new sandboxed instance each), median of {rounds}")
    print(f"  no bytecode (compiled from source each time): {a:.1f}")
    print(f"  bytecode compiled beforehand:                 {b:.1f}")
    print(f"  saved per workflow: {a - b:.1f} ms ({b / a:.2f}×)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replays", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one round")
    args = parser.parse_args()
    main(args.replays, 1 if args.quick else args.rounds)
