"""A bench worker in its own process, so its CPU, memory and event loop are its own.

    python -m bench._worker --address HOST:PORT --task-queue Q --database-url URL \
        --llm-base-url URL [--options JSON]

runs the project's worker (`create_worker`, every project workflow and activity, plus the
`noop` tool and the floor workflow of bench/_floor.py) with these extra `Worker(...)`
options (JSON object, e.g. '{"max_concurrent_activities": 1000}'; `"floor_unsandboxed":
true` runs the floor outside Temporal's sandbox, as the project's own workflows run, where
by default it runs inside, as a user's bare workflow would), prints `READY`, then
answers one JSON line of statistics for each line it reads on stdin (`stats`; `reset`
zeroes the peaks and counters first) until stdin closes, and shuts down.

Statistics: the Postgres pool's (psycopg_pool `get_stats()`: requests that had to wait for
a connection, total wait, the peak number waiting, sampled every 50 ms) and the event loop's
lag (how late a 50 ms sleep wakes up: a saturated worker's loop is late for everything,
heartbeats included).

With BENCH_WORKER_PROFILE=DIR set, the worker's event-loop thread runs under cProfile and
writes DIR/<task queue>.prof when it stops (a diagnostic: it slows the worker down).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from psycopg_pool import AsyncConnectionPool
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.pool import warm_connections
    from bench._floor import BenchFloorWorkflow, FloorActivities, FloorIoActivities
    from bench._stack import _start_project_worker, _stop_worker, noop
    from reactive_temporal.config import Settings
    from reactive_temporal.embedded.stack import connect
    from reactive_temporal.hosting.sandbox import OwnWorkflowsUnsandboxed
    from reactive_temporal.hosting.worker_factory import WORKFLOWS, llm_client

SAMPLE_SECONDS = 0.05


class Sampler:
    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self.base: dict[str, int] = {}
        self.peak_waiting = 0
        self.peak_pool_size = 0
        self.lags: list[float] = []
        self.reset()

    def reset(self) -> None:
        self.base = dict(self.pool.get_stats())
        self.peak_waiting = 0
        self.peak_pool_size = 0
        self.lags = []

    async def run(self) -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(SAMPLE_SECONDS)
            self.lags.append(time.perf_counter() - started - SAMPLE_SECONDS)
            stats = self.pool.get_stats()
            self.peak_waiting = max(self.peak_waiting, stats.get("requests_waiting", 0))
            self.peak_pool_size = max(self.peak_pool_size, stats.get("pool_size", 0))

    def snapshot(self) -> dict[str, Any]:
        now = self.pool.get_stats()

        def delta(key: str) -> int:
            return int(now.get(key, 0)) - int(self.base.get(key, 0))

        lags = sorted(self.lags) or [0.0]
        return {
            "pool_max": now.get("pool_max"),
            "pool_size": now.get("pool_size"),
            "pool_peak_size": self.peak_pool_size,
            "pool_requests": delta("requests_num"),
            "pool_requests_queued": delta("requests_queued"),
            "pool_wait_ms": delta("requests_wait_ms"),
            "pool_peak_waiting": self.peak_waiting,
            "pool_errors": delta("requests_errors"),
            "loop_lag_p50_ms": lags[len(lags) // 2] * 1000,
            "loop_lag_p99_ms": lags[min(len(lags) - 1, int(len(lags) * 0.99))] * 1000,
            "loop_lag_max_ms": lags[-1] * 1000,
        }


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--address", required=True)
    p.add_argument("--namespace", default="default")
    p.add_argument("--task-queue", required=True)
    p.add_argument("--database-url", required=True)
    p.add_argument("--llm-base-url", required=True)
    p.add_argument("--options", default="{}", help="extra Worker(...) options, JSON")
    args = p.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="rt-bench-worker-"))
    options = json.loads(args.options)
    # Activity slots and the sticky queue's timeout go through the settings, as an operator
    # sets them, so what the project sizes from the slots (the Postgres pool, the model
    # client's connections) follows.
    chosen = {
        name: options.pop(name)
        for name in ("max_concurrent_activities", "sticky_queue_timeout_seconds")
        if name in options
    }
    if options.pop("floor_unsandboxed", False):
        options["workflow_runner"] = OwnWorkflowsUnsandboxed([*WORKFLOWS, BenchFloorWorkflow])
    settings = Settings(
        database_url=args.database_url,
        openai_base_url=args.llm_base_url,
        openai_api_key="bench",
        data_dir=tmp / "data",
        workspace_dir=tmp / "workspace",
        **chosen,
    )
    client = await connect(args.address, args.namespace)
    floor = FloorActivities(args.llm_base_url)
    floor_io = FloorIoActivities(
        llm_client(settings, args.llm_base_url),
        AsyncConnectionPool(  # sized and opened warm as the project's pool is
            args.database_url,
            min_size=warm_connections(settings.store_pool_size()),
            max_size=settings.store_pool_size(),
            open=False,
        ),
    )
    agent_worker = await _start_project_worker(
        client,
        settings,
        args.database_url,
        args.task_queue,
        [noop],
        [BenchFloorWorkflow],
        [
            floor.bench_llm,
            floor.bench_tool,
            floor_io.bench_llm_io,
            floor_io.bench_tool_io,
            floor_io.bench_prepare_io,
        ],
        options,
    )
    running = asyncio.create_task(agent_worker.worker.run())
    sampler = Sampler(agent_worker.store.pool)
    sampling = asyncio.create_task(sampler.run())
    loop = asyncio.get_running_loop()
    done = asyncio.Event()

    def serve_stdin() -> None:
        """Stats on request; runs in a thread so a busy loop still answers (a bit late)."""
        for line in sys.stdin:
            command = line.strip()
            future = asyncio.run_coroutine_threadsafe(_answer(sampler, command), loop)
            print(json.dumps(future.result()), flush=True)
        loop.call_soon_threadsafe(done.set)

    threading.Thread(target=serve_stdin, daemon=True).start()
    print("READY", flush=True)
    await done.wait()
    sampling.cancel()
    await _stop_worker(agent_worker, running)
    await floor.close()
    await floor_io.close()


async def _answer(sampler: Sampler, command: str) -> dict[str, Any]:
    if command == "reset":
        sampler.reset()
    return sampler.snapshot()


if __name__ == "__main__":
    profile_dir = os.environ.get("BENCH_WORKER_PROFILE")
    if profile_dir:
        profiler = cProfile.Profile()
        profiler.enable()
        try:
            asyncio.run(main())
        finally:
            profiler.disable()
            queue = sys.argv[sys.argv.index("--task-queue") + 1]
            profiler.dump_stats(str(Path(profile_dir) / f"{queue}.prof"))
    else:
        asyncio.run(main())
