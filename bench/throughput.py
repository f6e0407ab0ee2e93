"""Throughput: C concurrent 3-iteration agent runs on one worker (default C = 50).

Each run: 3 iterations of a zero-latency scripted model (call `noop`,
call `noop`, then `FINAL ANSWER: done`): 3 `llm_step` and 2 `run_tool` activities. A batch
starts C runs at once from this process (which also hosts the worker and the scripted
model, as an in-process `Agent` does) and waits for all of them. Scenarios, interleaved
batch by batch on the same worker and server:

- one agent, memory off: all runs belong to one agent (each keeps itself as its last run);
- one agent, memory on (the project default): the answer is trivial, so each run keeps its
  deterministic debrief itself (no child); a child, where a run starts one, is waited for,
  untimed, before the next batch;
- C distinct agents, memory off: one last-run row per run instead of one for all;
- the floor: C bare workflows of 6 no-op activities in sequence;
- unless --no-variants (the default with --quick): "one agent, memory off" again under
  bench-only changes, to size what they cost.

Runs/s is C / (first start → last result); latency is each run's start → result. CPU is
the CPU time this process (worker + client + scripted model) and the Temporal server used
during the batch, per run: on a shared machine it is steadier than runs/s.

    .venv/bin/python -m bench.throughput [--quick] [--concurrency C] [--batches B] [--no-variants]
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from temporalio import workflow
from temporalio.worker import UnsandboxedWorkflowRunner

with workflow.unsafe.imports_passed_through():
    from bench._runs import debrief_done
    from bench._stack import (
        BenchStack,
        Summary,
        cpu_seconds,
        log,
        machine,
        open_stack,
        parser,
        print_table,
        run,
    )
    from bench.overhead import BenchBareWorkflow, bench_noop
    from reactive_temporal.embedded.scripted_llm import Reply, Step, call

ITERATIONS = 3
TASK = "Benchmark run: call the noop tool twice, then answer."


def three_iterations(request: dict[str, Any]) -> Step:
    """Stateless, so any number of concurrent runs can share the model."""
    tool_results = sum(1 for m in request.get("messages", []) if m.get("role") == "tool")
    if tool_results < ITERATIONS - 1:
        return Reply("Calling noop.", [call("noop")])
    return Reply("FINAL ANSWER: done")


@dataclass
class Batch:
    wall: float
    latencies: list[float]
    cpu_here: float
    cpu_server: float


@dataclass
class Scenario:
    name: str
    one_run: Callable[[int], Awaitable[tuple[str, str | None]]]
    """Run number i to its end; returns its workflow id, and one to await afterwards."""
    patch: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext
    batches: list[Batch] = field(default_factory=list)


async def batch(stack: BenchStack, scenario: Scenario, concurrency: int) -> Batch:
    latencies: list[float] = []

    async def timed(i: int) -> tuple[str, str | None]:
        started = time.perf_counter()
        ids = await scenario.one_run(i)
        latencies.append(time.perf_counter() - started)
        return ids

    assert stack.server.process is not None
    server_pid = stack.server.process.pid
    here0, server0 = cpu_seconds(os.getpid()), cpu_seconds(server_pid)
    started = time.perf_counter()
    with scenario.patch():
        ids = await asyncio.gather(*(timed(i) for i in range(concurrency)))
    wall = time.perf_counter() - started
    here1, server1 = cpu_seconds(os.getpid()), cpu_seconds(server_pid)
    for run_id, memory in ids:  # untimed: let debriefs finish before the next batch
        if memory is not None:
            await debrief_done(stack.client, run_id)
    return Batch(wall, latencies, (here1 - here0) / concurrency, (server1 - server0) / concurrency)


def agent_runs(
    stack: BenchStack, model: str, *, memory: bool, distinct: bool, task_queue: str | None = None
) -> Callable[[int], Awaitable[tuple[str, str | None]]]:
    async def one(i: int) -> tuple[str, str | None]:
        agent_id = stack.unique(f"bench-{i}") if distinct else "bench-throughput"
        agent = stack.agent(
            model,
            agent_id=agent_id,
            memory=memory,
            tools=["noop"],
            max_iterations=10,
            task_queue=task_queue,
        )
        handle = await agent.start(TASK)
        result = await handle.result()
        assert result.metadata.iterations == ITERATIONS, result
        assert result.terminated_by == "final_answer", result
        return handle.id, handle.id if memory else None

    return one


def bare_runs(stack: BenchStack) -> Callable[[int], Awaitable[tuple[str, str | None]]]:
    async def one(i: int) -> tuple[str, str | None]:
        workflow_id = stack.unique("bench-bare")
        await stack.client.execute_workflow(
            "BenchBareWorkflow",
            2 * ITERATIONS,
            id=workflow_id,
            task_queue=stack.task_queue,
            result_type=int,
        )
        return workflow_id, None

    return one


async def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--concurrency", type=int, default=50, help="runs per batch (default 50)")
    p.add_argument("--batches", type=int, default=None, help="batches each (default 3; quick 1)")
    p.add_argument("--no-variants", action="store_true", help="skip the bench-only variants")
    args = p.parse_args()
    c: int = args.concurrency
    batches = args.batches or (1 if args.quick else 3)
    variants = not (args.no_variants or args.quick)

    async with (
        open_stack(workflows=[BenchBareWorkflow], activities=[bench_noop]) as stack,
        contextlib.AsyncExitStack() as workers,
    ):
        model = stack.llm.script(stack.unique("throughput"), three_iterations)
        cases = [
            Scenario("agent runs · one agent · memory off", agent_runs(
                stack, model, memory=False, distinct=False)),
            Scenario("agent runs · one agent · memory on", agent_runs(
                stack, model, memory=True, distinct=False)),
            Scenario(f"agent runs · {c} agents · memory off", agent_runs(
                stack, model, memory=False, distinct=True)),
            Scenario("floor: bare workflows, 6 no-op activities", bare_runs(stack)),
        ]  # fmt: skip
        if variants:
            unsandboxed = await workers.enter_async_context(
                stack.extra_worker(workflow_runner=UnsandboxedWorkflowRunner())
            )
            cases += [
                Scenario("variant · one agent · memory off · unsandboxed worker",
                         agent_runs(stack, model, memory=False, distinct=False,
                                    task_queue=unsandboxed)),
            ]  # fmt: skip
        log("warming up")
        for case in cases:
            await batch(stack, case, 5)
        for b in range(batches):
            for case in cases:
                log(f"batch {b + 1}/{batches}: {case.name}")
                case.batches.append(await batch(stack, case, c))

    print(f"\n## throughput — {c} concurrent {ITERATIONS}-iteration runs per batch, "
          f"{batches} batch(es) each, interleaved")  # fmt: skip
    print(f"_{machine()}_\n")
    floor_rate = Summary.of([c / b.wall for b in cases[3].batches]).p50
    rows = []
    for case in cases:
        rates = Summary.of([c / b.wall for b in case.batches])
        lat = Summary.of([x for b in case.batches for x in b.latencies])
        rows.append(
            [
                case.name,
                f"{rates.p50:.1f}",
                f"{rates.lo:.1f}–{rates.hi:.1f}",
                f"{rates.p50 / floor_rate:.2f}",
                f"{lat.p50 * 1000:.0f}",
                f"{lat.p95 * 1000:.0f}",
                f"{Summary.of([b.cpu_here for b in case.batches]).p50 * 1000:.0f}",
                f"{Summary.of([b.cpu_server for b in case.batches]).p50 * 1000:.0f}",
            ]
        )
    print_table(
        [
            "scenario",
            "runs/s (p50)",
            "runs/s min–max",
            "vs floor",
            "latency p50 ms",
            "latency p95 ms",
            "CPU ms/run: this process",
            "CPU ms/run: Temporal",
        ],
        rows,
    )


if __name__ == "__main__":
    run(main)
