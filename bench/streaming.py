"""Live output: which mechanism carries a model's streamed text to a watcher (issue 12).

One bare workflow, defined here, runs one activity that calls the scripted model with
`stream: true` over real HTTP (the openai client) and publishes each text delta by one of:

- `none`              — nothing published: the floor for history size;
- `workflow_streams`  — Temporal's `temporalio.contrib.workflow_streams` (SDK 1.35): the
                        activity publishes through signals (batched every 100 ms, the first
                        delta flushed at once), the watcher long-polls with updates;
- `pg_notify`         — a Postgres table of events with a dense per-run offset; the activity
                        inserts each delta and `NOTIFY`s, the watcher `LISTEN`s and reads
                        rows past its offset;
- `pg_poll`           — the same table, the watcher polling it every 100 ms (no NOTIFY).

Every delta carries its character offset within the step's text, so a watcher shows each
character once even when a retried attempt publishes the text again (checked below).

For each mechanism, interleaved trial by trial, an answer of 1 chunk and of 50 chunks (20 ms
apart) is streamed to a watcher that attached before the run started. Printed:
- first-text latency: the activity got the first chunk from the model → the watcher got it;
- last-text latency: the activity got the last chunk → the watcher had the whole text;
- history events and protobuf bytes of the run, 1 vs 50 chunks, and with 3 watchers;
- Temporal actions beyond the floor (signals and updates, which Temporal Cloud bills);
- a late watcher (attached after the run closed) gets the same text, and how long it took;
- a retried attempt (the stream cut after 20 of 50 chunks, then the full answer) is shown once.

    .venv/bin/python -m bench.streaming [--quick] [--trials T]
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    import openai
    import psycopg
    from temporalio.contrib.workflow_streams import WorkflowStream, WorkflowStreamClient

    from bench._stack import BenchStack, Summary, log, machine, open_stack, parser, print_table, run
    from reactive_temporal.embedded.scripted_llm import Reply

MECHANISMS = ("none", "workflow_streams", "pg_notify", "pg_poll")
STREAMING = MECHANISMS[1:]
CHUNK_DELAY = 0.02
FIRST_TOKEN_DELAY = 0.3
POLL_INTERVAL = 0.1
BATCH_INTERVAL = timedelta(milliseconds=100)
ANSWER = (
    "Streaming the answer: the invoice total is 1,284.50 EUR across 17 line items, the largest "
    "being consulting hours (612.00 EUR); two items lack a VAT code and need a look before "
    "the batch is approved."
)
TABLE = "bench_stream_events"
CHANNEL = "bench_stream"

# When the activity received the first and last chunk from the model, by workflow id (the
# worker and the watchers share this process, so one monotonic clock serves both).
FIRST_CHUNK: dict[str, float] = {}
LAST_CHUNK: dict[str, float] = {}


@dataclass
class StreamInput:
    model: str
    mechanism: str
    llm_base_url: str
    database_url: str


# -- the Postgres event log -------------------------------------------------------------------

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    run_id text NOT NULL,
    "offset" bigint NOT NULL,
    step int NOT NULL,
    attempt int NOT NULL,
    position int NOT NULL,
    kind text NOT NULL,
    data text NOT NULL,
    PRIMARY KEY (run_id, "offset")
)"""

# A per-run transaction lock makes offsets dense and committed in order, so a reader that
# has seen offset N never misses a row N' < N committed later (a bigserial would allow that
# with concurrent writers, e.g. parallel tool calls).
APPEND = f"""
WITH lock AS (SELECT pg_advisory_xact_lock(hashtext(%(run)s))),
     next AS (SELECT coalesce(max("offset"), -1) + 1 AS o FROM {TABLE}, lock WHERE run_id = %(run)s)
INSERT INTO {TABLE} (run_id, "offset", step, attempt, position, kind, data)
SELECT %(run)s, next.o, %(step)s, %(attempt)s, %(position)s, %(kind)s, %(data)s FROM next
RETURNING "offset", pg_notify('{CHANNEL}', %(run)s)"""


async def pg_append(
    conn: psycopg.AsyncConnection[Any],
    run_id: str,
    attempt: int,
    position: int,
    kind: str,
    data: str,
) -> None:
    await conn.execute(
        APPEND,
        {
            "run": run_id,
            "step": 0,
            "attempt": attempt,
            "position": position,
            "kind": kind,
            "data": data,
        },
    )


# -- the workflow and its activity ------------------------------------------------------------


class StreamPublisher:
    """Publishes through a WorkflowStreamClient: the first delta at once, then every
    BATCH_INTERVAL. Its own flusher instead of the client's `async with`: on Python 3.11 the
    client's `__aexit__` hung forever here when it cancelled its flusher just as a forced
    flush woke it (`asyncio.wait_for` swallows that cancel; the run then timed out)."""

    def __init__(self) -> None:
        self.client = WorkflowStreamClient.from_within_activity(batch_interval=BATCH_INTERVAL)
        self.topic = self.client.topic("text")
        self.wake = asyncio.Event()
        self.task = asyncio.create_task(self._flusher())

    def publish(self, item: dict[str, Any], *, now: bool) -> None:
        self.topic.publish(item)
        if now:
            self.wake.set()

    async def _flusher(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(BATCH_INTERVAL.total_seconds()):
                    await self.wake.wait()
            self.wake.clear()
            await self.client.flush()

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        await self.client.flush()


@activity.defn(name="bench_stream_llm")
async def bench_stream_llm(input: StreamInput) -> str:
    """One streamed LLM call; each delta published by `input.mechanism`."""
    info = activity.info()
    run_id = info.workflow_id or ""
    llm = openai.AsyncOpenAI(base_url=input.llm_base_url, api_key="bench", max_retries=0)
    conn = (
        await psycopg.AsyncConnection.connect(input.database_url, autocommit=True)
        if input.mechanism.startswith("pg_")
        else None
    )
    publisher = StreamPublisher() if input.mechanism == "workflow_streams" else None
    text = ""
    try:
        stream = await llm.chat.completions.create(
            model=input.model,
            messages=[{"role": "user", "content": "Summarize the invoice batch."}],
            stream=True,
            stream_options={"include_usage": True},
        )
        async for chunk in stream:
            delta = chunk.choices[0].delta.content if chunk.choices else None
            if not delta:
                continue
            now = time.perf_counter()
            FIRST_CHUNK.setdefault(run_id, now)
            LAST_CHUNK[run_id] = now
            position = len(text)
            text += delta
            item = {"attempt": info.attempt, "position": position, "delta": delta}
            if publisher is not None:
                publisher.publish(item, now=position == 0)
            elif conn is not None:
                await pg_append(conn, run_id, info.attempt, position, "text", delta)
        if conn is not None:
            await pg_append(conn, run_id, info.attempt, len(text), "done", "")
        return text
    finally:
        if publisher is not None:
            await publisher.close()
        if conn is not None:
            await conn.close()
        await llm.close()


@workflow.defn(name="BenchStreamWorkflow")
class BenchStreamWorkflow:
    """A run of one streamed LLM call; hosts a WorkflowStream whatever the mechanism
    (registering its handlers adds nothing to history)."""

    @workflow.init
    def __init__(self, input: StreamInput) -> None:
        self.stream = WorkflowStream()

    @workflow.run
    async def run(self, input: StreamInput) -> str:
        return await workflow.execute_activity(
            "bench_stream_llm",
            input,
            result_type=str,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(milliseconds=100), maximum_attempts=3
            ),
        )


# -- watchers ----------------------------------------------------------------------------------


@dataclass
class Watched:
    text: str = ""
    first_at: float | None = None
    done_at: float | None = None
    deltas: int = 0
    shown: int = 0
    """Characters of the step shown so far: a retried attempt's deltas below it are skipped."""
    naive: str = ""
    """Every delta appended as it came, ignoring positions (what a watcher without offsets
    would show)."""

    def take(self, position: int, delta: str) -> None:
        now = time.perf_counter()
        self.first_at = self.first_at or now
        self.deltas += 1
        self.naive += delta
        fresh = delta[max(0, self.shown - position) :] if position + len(delta) > self.shown else ""
        self.text += fresh
        self.shown = max(self.shown, position + len(delta))


async def watch_workflow_streams(stack: BenchStack, run_id: str, want: int) -> Watched:
    seen = Watched()
    client = WorkflowStreamClient.create(stack.client, run_id)
    async for item in client.subscribe(["text"], from_offset=0, result_type=dict):
        seen.take(int(item.data["position"]), str(item.data["delta"]))
        if seen.shown >= want and seen.done_at is None:
            seen.done_at = time.perf_counter()
    return seen


async def _pg_rows(
    conn: psycopg.AsyncConnection[Any], run_id: str, after: int
) -> list[tuple[int, int, str, str]]:
    cur = await conn.execute(
        f'SELECT "offset", position, kind, data FROM {TABLE} '
        f'WHERE run_id = %s AND "offset" > %s ORDER BY "offset"',
        (run_id, after),
    )
    return await cur.fetchall()


async def watch_postgres(
    stack: BenchStack, run_id: str, want: int, *, notify: bool, started: asyncio.Event | None
) -> Watched:
    """Read every event of the run from offset 0, then new ones as they come, until `done`."""
    seen = Watched()
    async with await psycopg.AsyncConnection.connect(stack.database_url, autocommit=True) as conn:
        if notify:
            await conn.execute(f"LISTEN {CHANNEL}")
        if started is not None:
            started.set()
        after = -1
        while True:
            for offset, position, kind, data in await _pg_rows(conn, run_id, after):
                after = offset
                if kind == "done":
                    if seen.shown >= want:
                        seen.done_at = seen.done_at or time.perf_counter()
                        return seen
                    continue
                seen.take(position, data)
                if seen.shown >= want and seen.done_at is None:
                    seen.done_at = time.perf_counter()
            if notify:
                # Wake on this run's NOTIFY, or re-read after a second in case one was missed.
                async for note in conn.notifies(timeout=1.0):
                    if note.payload == run_id:
                        break
            else:
                await asyncio.sleep(POLL_INTERVAL)


async def watch(
    stack: BenchStack, mechanism: str, run_id: str, want: int, started: asyncio.Event | None
) -> Watched:
    if mechanism == "workflow_streams":
        if started is not None:
            started.set()
        return await watch_workflow_streams(stack, run_id, want)
    return await watch_postgres(
        stack, run_id, want, notify=mechanism == "pg_notify", started=started
    )


# -- one trial -------------------------------------------------------------------------------


@dataclass
class Trial:
    mechanism: str
    chunks: int
    watchers: int
    first_latency: float | None
    last_latency: float | None
    events: int
    proto_bytes: int
    json_bytes: int
    actions: int
    """Signals received plus updates accepted (each a Temporal Cloud action)."""
    text_ok: bool
    naive_ok: bool


def _history_figures(history: Any) -> tuple[int, int, int, int]:
    events = list(history.events)
    actions = sum(
        1
        for e in events
        if e.event_type
        in (
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
        )
    )
    return (
        len(events),
        sum(e.ByteSize() for e in events),
        len(history.to_json().encode()),
        actions,
    )


async def trial(
    stack: BenchStack, mechanism: str, chunks: int, *, watchers: int = 1, steps: list[Reply]
) -> Trial:
    model = stack.llm.script(stack.unique("stream"), steps)
    run_id = stack.unique(f"bench-stream-{mechanism}")
    want = len(ANSWER)
    handle = await stack.client.start_workflow(
        BenchStreamWorkflow.run,
        StreamInput(model, mechanism, stack.llm.base_url, stack.database_url),
        id=run_id,
        task_queue=stack.task_queue,
    )
    # Watchers attach right after the start (a workflow stream needs the workflow to exist);
    # the model takes FIRST_TOKEN_DELAY to answer, so they are listening before it does.
    tasks: list[asyncio.Task[Watched]] = []
    if mechanism != "none":
        for _ in range(watchers):
            ready = asyncio.Event()
            tasks.append(asyncio.create_task(watch(stack, mechanism, run_id, want, ready)))
            await ready.wait()
    text = await handle.result()
    seen = [await asyncio.wait_for(t, timeout=60) for t in tasks]
    events, proto, json_bytes, actions = _history_figures(await handle.fetch_history())
    first = seen[0] if seen else None
    return Trial(
        mechanism=mechanism,
        chunks=chunks,
        watchers=watchers,
        first_latency=(first.first_at - FIRST_CHUNK[run_id]) if first and first.first_at else None,
        last_latency=(first.done_at - LAST_CHUNK[run_id]) if first and first.done_at else None,
        events=events,
        proto_bytes=proto,
        json_bytes=json_bytes,
        actions=actions,
        text_ok=text == ANSWER and all(s.text == ANSWER for s in seen),
        naive_ok=all(s.naive == ANSWER for s in seen),
    )


async def late_watch(stack: BenchStack, mechanism: str) -> tuple[bool, float]:
    """Stream a 50-chunk answer with no watcher; once the run closed, attach one."""
    model = stack.llm.script(stack.unique("late"), [Reply(ANSWER, chunks=50)])
    run_id = stack.unique(f"bench-late-{mechanism}")
    await stack.client.execute_workflow(
        BenchStreamWorkflow.run,
        StreamInput(model, mechanism, stack.llm.base_url, stack.database_url),
        id=run_id,
        task_queue=stack.task_queue,
    )
    started = time.perf_counter()
    seen = await asyncio.wait_for(watch(stack, mechanism, run_id, len(ANSWER), None), 60)
    return seen.text == ANSWER, time.perf_counter() - started


# -- reporting -------------------------------------------------------------------------------


@dataclass
class Collected:
    trials: dict[tuple[str, int, int], list[Trial]] = field(
        default_factory=lambda: defaultdict(list)
    )

    def of(self, mechanism: str, chunks: int, watchers: int = 1) -> list[Trial]:
        return self.trials[(mechanism, chunks, watchers)]


def _median(values: list[int]) -> int:
    return int(Summary.of(values).p50) if values else 0


def _ms(values: list[float | None]) -> str:
    present = [v for v in values if v is not None]
    if not present:
        return "—"
    s = Summary.of(present)
    return f"{s.p50 * 1000:.1f} (p95 {s.p95 * 1000:.1f})"


def report(collected: Collected, late: dict[str, list[tuple[bool, float]]], retry: dict) -> None:
    floor = {c: _median([t.events for t in collected.of("none", c)]) for c in (1, 50)}
    floor_bytes = {c: _median([t.proto_bytes for t in collected.of("none", c)]) for c in (1, 50)}
    rows = []
    for mechanism in MECHANISMS:
        for chunks in (1, 50):
            trials = collected.of(mechanism, chunks)
            events = _median([t.events for t in trials])
            proto = _median([t.proto_bytes for t in trials])
            rows.append(
                [
                    mechanism,
                    chunks,
                    _ms([t.first_latency for t in trials]) if mechanism != "none" else "—",
                    _ms([t.last_latency for t in trials]) if mechanism != "none" else "—",
                    f"{events} (+{events - floor[chunks]})",
                    f"{proto:,} (+{proto - floor_bytes[chunks]:,})",
                    f"{_median([t.json_bytes for t in trials]):,}",
                    _median([t.actions for t in trials]),
                    "yes" if all(t.text_ok for t in trials) else "NO",
                ]
            )
    print("\n### One streamed answer, one watcher attached before the run\n")
    print_table(
        [
            "mechanism",
            "chunks",
            "first-text latency, ms p50 (p95)",
            "last-text latency, ms",
            "history events (vs floor)",
            "history protobuf bytes (vs floor)",
            "history JSON bytes",
            "signals + updates",
            "watcher text == answer",
        ],
        rows,
    )
    rows = []
    for mechanism in STREAMING:
        one = collected.of(mechanism, 50, 1)
        three = collected.of(mechanism, 50, 3)
        rows.append(
            [
                mechanism,
                f"{_median([t.events for t in one])} / {_median([t.events for t in three])}",
                f"{_median([t.proto_bytes for t in one]):,} / "
                f"{_median([t.proto_bytes for t in three]):,}",
                f"{_median([t.actions for t in one])} / {_median([t.actions for t in three])}",
                "yes" if all(t.text_ok for t in three) else "NO",
            ]
        )
    print("\n### 50 chunks: one watcher vs three watchers\n")
    print_table(
        [
            "mechanism",
            "history events 1 / 3 watchers",
            "protobuf bytes 1 / 3",
            "signals + updates 1 / 3",
            "every watcher's text == answer",
        ],
        rows,
    )
    rows = []
    for mechanism in STREAMING:
        results = late[mechanism]
        retried = retry[mechanism]
        rows.append(
            [
                mechanism,
                "yes" if all(ok for ok, _ in results) else "NO",
                _ms([seconds for _, seconds in results]),
                "yes" if all(t.text_ok for t in retried) else "NO",
                "yes" if all(t.naive_ok for t in retried) else "no: shown twice",
                f"{_median([t.events for t in retried])}",
            ]
        )
    print("\n### Late watcher, and a retried attempt\n")
    print_table(
        [
            "mechanism",
            "late watcher gets the whole text",
            "late watcher: attach → whole text, ms",
            "retried attempt shown once (offsets)",
            "… without offsets",
            "history events with the retry (50 + 20 chunks)",
        ],
        rows,
    )


async def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--trials", type=int, default=None, help="trials per case (default 8; quick 3)")
    args = p.parse_args()
    trials = args.trials or (3 if args.quick else 8)
    print(f"# bench.streaming\n\n{machine()}\n")
    collected = Collected()
    late: dict[str, list[tuple[bool, float]]] = defaultdict(list)
    retry: dict[str, list[Trial]] = defaultdict(list)
    async with open_stack(workflows=[BenchStreamWorkflow], activities=[bench_stream_llm]) as stack:
        async with await psycopg.AsyncConnection.connect(
            stack.database_url, autocommit=True
        ) as conn:
            await conn.execute(SCHEMA)
        for mechanism in MECHANISMS:  # warm-up: connections, sandbox, first workflow task
            await trial(stack, mechanism, 1, steps=[Reply(ANSWER, chunks=1)])
        for n in range(trials):
            log(f"trial {n + 1}/{trials}")
            for mechanism in MECHANISMS:
                for chunks in (1, 50):
                    steps = [
                        Reply(
                            ANSWER, chunks=chunks, chunk_delay=CHUNK_DELAY, delay=FIRST_TOKEN_DELAY
                        )
                    ]
                    collected.of(mechanism, chunks).append(
                        await trial(stack, mechanism, chunks, steps=steps)
                    )
            for mechanism in STREAMING:
                steps = [Reply(ANSWER, chunks=50, chunk_delay=CHUNK_DELAY, delay=FIRST_TOKEN_DELAY)]
                collected.of(mechanism, 50, 3).append(
                    await trial(stack, mechanism, 50, watchers=3, steps=steps)
                )
                late[mechanism].append(await late_watch(stack, mechanism))
                cut = Reply(
                    ANSWER,
                    chunks=50,
                    chunk_delay=CHUNK_DELAY,
                    delay=FIRST_TOKEN_DELAY,
                    drop_after_chunks=20,
                )
                retry[mechanism].append(await trial(stack, mechanism, 50, steps=[cut, steps[0]]))
    report(collected, late, retry)


if __name__ == "__main__":
    run(main)
