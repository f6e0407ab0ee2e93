"""What the live output's writes (and a pool checkout) cost the worker's event loop, before
and now.

Every LLM step and tool call appends events to `run_events` (activities/run_events.py): a
transaction that takes the run's lock, inserts at the next offset and NOTIFYs the watchers.
Side by side against one Postgres, interleaved trial by trial, CPU time of the event-loop
thread (Postgres's own work not counted):

- one append of one event: the five statements pipelined (before) against one query string
  with its values quoted by psycopg (now, `RunEvents.append`);
- one iteration's writes for a quick LLM step and a quick tool call: before, four appends
  (the iteration, its text, the tool's start, its end) pipelined; now, two (the iteration
  with its text, the start with its end: `Announcement`);
- one quick iteration's records with their events (an LLM step whose reply is a tool call,
  announced; the tool's start and end): each record and its events in two checkouts and
  round trips (before) against one (now, `activities.step_records.record_step`);
- 50 runs' text written at once (as 50 streaming runs' writes come due together): a
  transaction each, on as many checkouts (before) against the appends queued while one is
  written going out together (now, `RunEvents.append`);
- 50 runs' tool steps ending at once, each record with its tool's start and end: a checkout
  and a round trip each (before) against the records queued while one is written going out
  together (now, `activities.step_records.StepRecords`);
- one pool checkout with one statement (every store read and write is at least that): the
  pool checking the connection on every checkout (before) against checking only a connection
  idle for a while (now, `activities.pool.IdleChecks`);
- an LLM step's quick reply (its text in three deltas, then the step ends) streamed and
  recorded: the first text written at once and what came meanwhile when the reply ended,
  then the record (before) against the text held FIRST_TEXT_AFTER and handed to the record,
  in its round trip (now, `TextStream`): round trips per step;
- one reply streamed at a model's pace (100 chunks, 20 ms apart: 2 s) through `TextStream`:
  a write per chunk (before: no interval) against at most one per TEXT_WRITE_INTERVAL (now);
  the loop's CPU over the whole reply (the feeding and its timers included, the same in both)
  and the transactions written.

    .venv/bin/python -m bench.event_append [--quick]
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from activities.run_events import RunEvents, transaction
from activities.statements import record_row
from activities.step_records import StepRecord, StepRecords
from activities.store import Store
from activities.text_stream import TEXT_WRITE_INTERVAL, TextStream
from bench._stack import machine, open_stack, parser, print_table, run
from reactive_temporal.contracts.events import NewEvent
from reactive_temporal.contracts.llm_payloads import LlmStepResult
from reactive_temporal.contracts.run import Message, ToolCall, ToolResult
from reactive_temporal.live_output import channel_for
from reactive_temporal.sanitize import clean_value

_PIPELINED = """
INSERT INTO run_events (run_id, "offset", type, step, position, data, key)
SELECT %(run)s, coalesce(max("offset"), -1) + 1, %(type)s, %(step)s, %(position)s, %(data)s,
       %(key)s
FROM run_events WHERE run_id = %(run)s
ON CONFLICT (run_id, key) WHERE key IS NOT NULL DO NOTHING
"""


async def append_pipelined(store: Store, run_id: str, events: Sequence[NewEvent]) -> None:
    """`RunEvents.append` as it was: BEGIN, lock, inserts, NOTIFY, COMMIT in one pipeline."""
    async with store.pool.connection() as conn, conn.pipeline():
        await conn.execute("BEGIN")
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (run_id,))
        for event in events:
            await conn.execute(
                _PIPELINED,
                {
                    "run": run_id,
                    "type": event.type,
                    "step": event.step,
                    "position": event.position,
                    "data": Jsonb(clean_value(event.data, nul=True)),
                    "key": event.key,
                },
            )
        await conn.execute("SELECT pg_notify(%s, '')", (channel_for(run_id),))
        await conn.execute("COMMIT")


def iteration(seq: int) -> list[NewEvent]:
    """A quick iteration's events: the step begins, its text, a tool's start and end."""
    return [
        NewEvent(type="iteration", step=seq, data={"iteration": seq}, key=f"iteration:{seq}"),
        NewEvent(type="text", step=seq, data={"delta": "Checking the stock.", "attempt": 1}),
        NewEvent(
            type="tool_start",
            step=seq + 1,
            data={"call_id": "c", "tool": "calculator", "arguments": '{"expression": "6*7"}'},
            key=f"tool_start:{seq + 1}",
        ),
        NewEvent(
            type="tool_end",
            step=seq + 1,
            data={"call_id": "c", "tool": "calculator", "success": True, "preview": "42"},
            key=f"tool_end:{seq + 1}",
        ),
    ]


async def writes_per_step(store: Store, run_id: str) -> float:
    """Writes (round trips) per step of `run_id`: its events' and records' distinct (step,
    transaction start time) pairs, per step (the transactions of one query string, as a
    record's and its events' are, share their start time)."""
    async with store.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT count(*)::float / greatest(count(DISTINCT seq), 1) FROM ("
            " SELECT step AS seq, created_at FROM run_events WHERE run_id = %(run)s"
            " UNION SELECT seq, created_at FROM run_messages WHERE run_id = %(run)s) AS w",
            {"run": run_id},
        )
        row = await cur.fetchone()
    return float(row[0]) if row else 0.0


async def cpu_ms(step: Callable[[int], Awaitable[None]], trials: int) -> list[float]:
    samples = []
    for i in range(trials):
        started = time.thread_time()
        await step(i)
        samples.append((time.thread_time() - started) * 1000)
    return samples


class TextStreamBefore(TextStream):
    """`TextStream` as it was: the first text at once, and what is buffered when the reply
    ends written by the stream, not left for the record."""

    def __init__(self, events: RunEvents, run_id: str, step: int) -> None:
        super().__init__(events, run_id, step, attempt=1, first_after=0.0)

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        while self.text.buffer:
            pause = self.next_write_at - loop.time()
            if pause > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.ended.wait(), pause)
            self.next_write_at = loop.time() + self.write_interval
            await self.events.try_append(self.run_id, self._take_text())


async def quick_reply(store: Store, text: TextStream, seq: int, reply: Message) -> None:
    """An LLM step's reply of three deltas, streamed, then recorded with what it left."""
    for delta in ("Calling ", "the calculator", "."):
        text.add(delta)
        await asyncio.sleep(0.001)  # the next chunk off the socket
    await text.close(write=False)
    step = LlmStepResult(content="Calling the calculator.", finish_reason="tool_calls")
    events = transaction(text.run_id, text.last) if text.last else None
    await store.record_step(text.run_id, seq, reply, step, then=events)


REPLY_CHUNKS, CHUNK_GAP = 100, 0.02
CROWD = 50


async def streamed_reply(events: RunEvents, interval: float) -> tuple[float, int]:
    """Loop CPU ms and transactions for one reply streamed through `TextStream` (a run of its
    own, so its text rows are its transactions)."""
    run_id = f"bench-reply-{uuid.uuid4().hex[:8]}"
    started = time.thread_time()
    text = TextStream(events, run_id, step=1, attempt=1, write_interval=interval)
    for i in range(REPLY_CHUNKS):
        text.add(f"w{i} ")
        await asyncio.sleep(CHUNK_GAP)
    await text.close()
    cpu = (time.thread_time() - started) * 1000
    async with events.pool.connection() as conn:
        cur = await conn.execute("SELECT count(*) FROM run_events WHERE run_id = %s", (run_id,))
        row = await cur.fetchone()
    return cpu, row[0] if row else 0


async def main() -> None:
    args = parser(__doc__ or "").parse_args()
    trials = 200 if args.quick else 1000
    print(f"\n## event_append — live-output writes, event-loop CPU, {trials} trials each")
    print(f"_{machine()}_\n")
    async with open_stack() as stack:
        store: Store = stack.worker.store
        events = RunEvents(store)
        before_run, now_run = (f"bench-append-{uuid.uuid4().hex[:8]}" for _ in range(2))
        text = NewEvent(type="text", step=1, data={"delta": "a piece of the reply"})

        async def one_before(i: int) -> None:
            await append_pipelined(store, before_run, [text])

        async def one_now(i: int) -> None:
            await events.append(now_run, [text])

        async def step_before(i: int) -> None:
            for event in iteration(1000 + 2 * i):  # four transactions
                await append_pipelined(store, before_run, [event])

        async def step_now(i: int) -> None:
            first, text_, start, end = iteration(1000 + 2 * i)
            await events.append(now_run, [first, text_])  # two transactions
            await events.append(now_run, [start, end])

        call = ToolCall(id="c", name="calculator", arguments='{"expression": "6*7"}')
        reply, replied = (
            Message(role="assistant", tool_calls=[call]),
            LlmStepResult(tool_calls=[call], finish_reason="tool_calls"),
        )
        observation = Message(role="tool", content="42", tool_call_id="c", name="calculator")
        observed = ToolResult(call_id="c", name="calculator", success=True, content="42")

        async def records_before(i: int) -> None:
            seq = 1000 + 2 * i
            first, _, start, end = iteration(seq)
            await store.record_step(before_run, seq, reply, replied)
            await events.append(before_run, [first])
            await store.record_step(before_run, seq + 1, observation, observed)
            await events.append(before_run, [start, end])

        async def records_now(i: int) -> None:
            seq = 1000 + 2 * i
            first, _, start, end = iteration(seq)
            await store.record_step(
                now_run, seq, reply, replied, then=transaction(now_run, [first])
            )
            await store.record_step(
                now_run, seq + 1, observation, observed, then=transaction(now_run, [start, end])
            )

        said = Message(role="assistant", content="Calling the calculator.", tool_calls=[call])

        quick_runs = {k: f"bench-quick-{k}-{uuid.uuid4().hex[:8]}" for k in ("qb", "qn")}

        steps = itertools.count()

        async def quick_before(i: int) -> None:
            seq = next(steps)
            await quick_reply(store, TextStreamBefore(events, quick_runs["qb"], seq), seq, said)

        async def quick_now(i: int) -> None:
            seq = next(steps)
            text = TextStream(events, quick_runs["qn"], seq, attempt=1)
            await quick_reply(store, text, seq, said)

        crowd = [f"bench-crowd-{uuid.uuid4().hex[:8]}" for _ in range(CROWD)]

        async def alone(run_id: str, events: Sequence[NewEvent]) -> None:
            async with store.pool.connection() as conn:
                await conn.execute(transaction(run_id, events))

        async def crowd_before(i: int) -> None:
            await asyncio.gather(*(alone(r, [text]) for r in crowd))

        async def crowd_now(i: int) -> None:
            await asyncio.gather(*(events.append(r, [text]) for r in crowd))

        step_records = StepRecords(store)
        crowds = {
            v: [f"bench-steps-{v}-{uuid.uuid4().hex[:8]}" for _ in range(CROWD)] for v in "bn"
        }

        async def steps_before(i: int) -> None:
            async def one(r: str) -> None:
                await store.record_step(
                    r, i, observation, observed, then=transaction(r, iteration(i)[2:])
                )

            await asyncio.gather(*(one(r) for r in crowds["b"]))

        async def steps_now(i: int) -> None:
            async def one(r: str) -> None:
                row = record_row(r, i, observation, observed)
                await step_records.write(StepRecord(r, row, events=iteration(i)[2:]))

            await asyncio.gather(*(one(r) for r in crowds["n"]))

        always: AsyncConnectionPool[AsyncConnection[Any]] = AsyncConnectionPool(
            stack.database_url,
            kwargs={"autocommit": True},
            min_size=1,
            max_size=1,
            open=False,
            check=AsyncConnectionPool.check_connection,  # the pool as it was configured
        )
        await always.open(wait=True)

        async def checkout_before(i: int) -> None:
            async with always.connection() as conn:
                await conn.execute("SELECT 1")

        async def checkout_now(i: int) -> None:
            async with store.pool.connection() as conn:
                await conn.execute("SELECT 1")

        results: dict[str, list[float]] = {
            k: []
            for k in (
                *("1b", "1n", "sb", "sn", "rb", "rn", "qb", "qn"),
                *("xb", "xn", "kb", "kn", "cb", "cn"),
            )
        }
        try:
            for _ in range(2):  # interleaved halves, the first one also warms up
                results["1b"] += await cpu_ms(one_before, trials // 2)
                results["1n"] += await cpu_ms(one_now, trials // 2)
                results["sb"] += await cpu_ms(step_before, trials // 4)
                results["sn"] += await cpu_ms(step_now, trials // 4)
                results["rb"] += await cpu_ms(records_before, trials // 4)
                results["rn"] += await cpu_ms(records_now, trials // 4)
                results["qb"] += await cpu_ms(quick_before, trials // 10)
                results["qn"] += await cpu_ms(quick_now, trials // 10)
                results["xb"] += await cpu_ms(crowd_before, trials // 20)
                results["xn"] += await cpu_ms(crowd_now, trials // 20)
                results["kb"] += await cpu_ms(steps_before, trials // 20)
                results["kn"] += await cpu_ms(steps_now, trials // 20)
                results["cb"] += await cpu_ms(checkout_before, trials // 2)
                results["cn"] += await cpu_ms(checkout_now, trials // 2)
        finally:
            await always.close()
        replies: dict[str, list[tuple[float, int]]] = {"before": [], "now": []}
        for _ in range(2 if args.quick else 5):  # 2 s each
            replies["before"].append(await streamed_reply(events, 0.0))
            replies["now"].append(await streamed_reply(events, TEXT_WRITE_INTERVAL))

        quick_writes = {k: await writes_per_step(store, r) for k, r in quick_runs.items()}

    def med(key: str) -> float:
        return statistics.median(results[key])

    def reply_ms(key: str) -> float:
        return statistics.median(ms for ms, _ in replies[key])

    def reply_writes(key: str) -> int:
        return int(statistics.median(n for _, n in replies[key]))

    print_table(
        ["write", "before ms", "now ms", "now / before", "transactions before → now"],
        [
            [
                "one event",
                f"{med('1b'):.3f}",
                f"{med('1n'):.3f}",
                f"{med('1n') / med('1b'):.2f}×",
                "1 → 1",
            ],
            [
                "a quick iteration (4 events)",
                f"{med('sb'):.3f}",
                f"{med('sn'):.3f}",
                f"{med('sn') / med('sb'):.2f}×",
                "4 → 2",
            ],
            [
                "a quick iteration's records with their events",
                f"{med('rb'):.3f}",
                f"{med('rn'):.3f}",
                f"{med('rn') / med('rb'):.2f}×",
                "4 → 2",
            ],
            [
                "a quick reply streamed and recorded",
                f"{med('qb'):.3f}",
                f"{med('qn'):.3f}",
                f"{med('qn') / med('qb'):.2f}×",
                f"round trips {quick_writes['qb']:.1f} → {quick_writes['qn']:.1f}",
            ],
            [
                f"{CROWD} runs' text at once",
                f"{med('xb'):.3f}",
                f"{med('xn'):.3f}",
                f"{med('xn') / med('xb'):.2f}×",
                f"{CROWD} → 1–2",
            ],
            [
                f"{CROWD} runs' tool steps ending at once: records with their events",
                f"{med('kb'):.3f}",
                f"{med('kn'):.3f}",
                f"{med('kn') / med('kb'):.2f}×",
                f"{CROWD} → 1–2",
            ],
            [
                "a checkout and one statement",
                f"{med('cb'):.3f}",
                f"{med('cn'):.3f}",
                f"{med('cn') / med('cb'):.2f}×",
                "round trips 2 → 1",
            ],
            [
                f"a reply of {REPLY_CHUNKS} chunks over {REPLY_CHUNKS * CHUNK_GAP:g} s",
                f"{reply_ms('before'):.2f}",
                f"{reply_ms('now'):.2f}",
                f"{reply_ms('now') / reply_ms('before'):.2f}×",
                f"{reply_writes('before')} → {reply_writes('now')}",
            ],
        ],
    )


if __name__ == "__main__":
    run(main)
