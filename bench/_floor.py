"""The floor: a bare workflow running the activities an agent run runs, and nothing else.

`BenchFloorWorkflow(FloorInput(iterations=K))` runs, per iteration, one `bench_llm`
activity, then one `bench_tool` activity on every iteration but the last (the agent runs'
shape: call a tool K-1 times, then answer): K + (K-1) activities, in sequence. Both are
no-ops, unless `model` is set: then `bench_llm` sends one chat-completions request to the
worker's LLM endpoint (the scale bench's 2 s model), so the floor waits on the same model
as the agent runs do.

The floor with I/O (`io=True`, bench/cost.py's "floor + I/O"): `bench_llm_io` and
`bench_tool_io` instead, which do only the I/O an agent's steps cannot skip: the model call,
streamed through the project's own client (`llm_client`: openai's client on aiohttp) and
read as `llm_step` reads it, and one committed Postgres write per step (the reply, the
tool's result). What an agent run costs
above it is the framework's; what the floor with I/O costs above the floor is the I/O's.

Registered on the bench workers next to the project's workflows (bench/_worker.py).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow

LLM_TIMEOUT = timedelta(seconds=120)


@dataclass
class FloorInput:
    iterations: int
    model: str | None = None
    """Call the LLM endpoint with this model in `bench_llm` (None: a no-op)."""
    task: str = ""
    """Sent as the user message, so the model can tell runs apart (duplicate counting)."""
    io: bool = False
    """The floor with I/O: the `_io` activities (see the module's docstring)."""
    prepare: str | None = None
    """With `io`, where the run's first write (an agent run's seeded transcript) is made:
    `local` in a local activity before the first step (an agent run's `prepare_run`),
    `step` in the first LLM step itself; None: not at all (bench/prepare_fold.py)."""


@dataclass
class FloorLlmInput:
    iteration: int
    model: str | None
    task: str
    seed: bool = False
    """Write the run's first row before the call (`FloorInput.prepare == "step"`)."""


@workflow.defn(name="BenchFloorWorkflow")
class BenchFloorWorkflow:
    @workflow.run
    async def run(self, input: FloorInput) -> int:
        llm, tool = ("bench_llm_io", "bench_tool_io") if input.io else ("bench_llm", "bench_tool")
        if input.prepare == "local":
            await workflow.execute_local_activity(
                "bench_prepare_io", input.task, start_to_close_timeout=timedelta(seconds=30)
            )
        for i in range(input.iterations):
            seed = i == 0 and input.prepare == "step"
            await workflow.execute_activity(
                llm,
                FloorLlmInput(iteration=i, model=input.model, task=input.task, seed=seed),
                start_to_close_timeout=LLM_TIMEOUT,
            )
            if i < input.iterations - 1:
                await workflow.execute_activity(
                    tool, i, start_to_close_timeout=timedelta(seconds=30)
                )
        return input.iterations


class FloorActivities:
    """`bench_llm` posts with a plain httpx2 client, the HTTP stack under the openai client
    (no openai client, no transcript, no Postgres): the cheapest way to wait on the same
    model."""

    def __init__(self, llm_base_url: str | None) -> None:
        self.llm_base_url = llm_base_url
        self._http: object | None = None

    @activity.defn(name="bench_llm")
    async def bench_llm(self, input: FloorLlmInput) -> int:
        if input.model is None:
            return input.iteration
        import httpx2  # the worker process only; the HTTP stack the openai client uses

        if self._http is None:
            self._http = httpx2.AsyncClient(
                base_url=self.llm_base_url or "",
                limits=httpx2.Limits(max_connections=None, max_keepalive_connections=None),
                timeout=LLM_TIMEOUT.total_seconds(),
            )
        assert isinstance(self._http, httpx2.AsyncClient)
        messages = [{"role": "user", "content": input.task}]
        messages += [{"role": "assistant", "content": "…"}] * input.iteration
        response = await self._http.post(
            "/chat/completions", json={"model": input.model, "messages": messages}
        )
        response.raise_for_status()
        return input.iteration

    @activity.defn(name="bench_tool")
    async def bench_tool(self, i: int) -> int:
        return i

    async def close(self) -> None:
        import httpx2

        if isinstance(self._http, httpx2.AsyncClient):
            await self._http.aclose()


FLOOR_IO_TABLE = "bench_floor_steps"


class FloorIoActivities:
    """The floor with I/O's steps: the model call through `client` (the project's
    `llm_client`), streamed as the agent runs' calls are, then one row written and committed
    on a connection from `pool` (a psycopg `AsyncConnectionPool`), as a step's record is.

    The pool opens (and its table is made) at the first step, so a worker that never runs
    the floor with I/O (`bench.scale`, `bench.ab`) holds none of its connections."""

    def __init__(self, client: Any, pool: Any) -> None:
        self.client = client
        self.pool = pool
        self._opened = False
        self._opening = asyncio.Lock()

    async def _open(self) -> None:
        async with self._opening:
            if self._opened:
                return
            await self.pool.open()
            async with self.pool.connection() as conn:
                await conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {FLOOR_IO_TABLE} "
                    "(id bigserial PRIMARY KEY, task text NOT NULL, step int NOT NULL, body text)"
                )
            self._opened = True

    async def _write(self, task: str, step: int, body: str) -> None:
        if not self._opened:
            await self._open()
        async with self.pool.connection() as conn:  # one transaction, committed on exit
            await conn.execute(
                f"INSERT INTO {FLOOR_IO_TABLE} (task, step, body) VALUES (%s, %s, %s)",
                (task, step, body),
            )

    @activity.defn(name="bench_prepare_io")
    async def bench_prepare_io(self, task: str) -> None:
        await self._write(task, -1, "seed")

    @activity.defn(name="bench_llm_io")
    async def bench_llm_io(self, input: FloorLlmInput) -> int:
        if input.seed:
            await self._write(input.task, -1, "seed")
        import openai  # the worker process only (the floor's workflow module is sandboxed)

        messages = [{"role": "user", "content": input.task}]
        messages += [{"role": "assistant", "content": "…"}] * input.iteration
        # posted and read as `llm_step` does (activities/llm_calls.py `_stream`): the body as
        # it is, the chunks as decoded JSON; openai's typed `chat.completions.create` would
        # also transform the request and build a model per chunk, CPU no agent run pays
        stream = await self.client.post(
            "/chat/completions",
            body={
                "model": input.model or "floor",
                "messages": messages,
                "stream": True,
                "stream_options": {"include_usage": True},
            },
            cast_to=object,
            stream=True,
            stream_cls=openai.AsyncStream[object],
        )
        text = []
        async with stream:
            async for chunk in stream:
                for choice in chunk.get("choices") or []:
                    text.append((choice.get("delta") or {}).get("content") or "")
        await self._write(input.task, 2 * input.iteration, "".join(text))
        return input.iteration

    @activity.defn(name="bench_tool_io")
    async def bench_tool_io(self, i: int) -> int:
        await self._write(activity.info().workflow_id or "", 2 * i + 1, str(i))
        return i

    async def close(self) -> None:
        await self.client.close()
        if self._opened:
            await self.pool.close()
