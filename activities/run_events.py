"""A run's live output, written by the activities that produce it: the LLM step's text as it
streams, tool calls starting and ending, approvals. Postgres, not Temporal history: a reply
streamed in 50 chunks adds nothing to the run's history (bench/streaming.py).

Each run's events get dense offsets in commit order (a per-run transaction lock, taken by
the database's `append_run_events`, migration 10), so a watcher that has read up to offset N
never misses an event committed later below N; each commit `NOTIFY`s the run's channel
(`reactive_temporal.live_output.channel_for`). Events with a key (`tool_start:12`) are
written once, however often their activity is retried.

Live output is best effort: a write that fails is logged and skipped, never failing the step
that produced it (the transcript and the result are the durable record).

An event that announces work (an iteration begins, a tool starts) goes out with the work's
next event (its first text, the tool's end) when that comes within ANNOUNCE_AFTER seconds,
else alone once they have passed (`Announcement`): a quick step writes one transaction and
wakes its watchers once where it wrote two, and a slow one shows that it began a second in.

A streamed reply's text goes out as it comes, but at most once per TEXT_WRITE_INTERVAL
(`text_stream.TextStream`): a model streaming 50 chunks a second wrote 50 transactions and NOTIFYs a
second per run, which at a thousand runs is Postgres's and the worker's whole capacity. Its
first text waits FIRST_TEXT_AFTER seconds, so a reply that ends by then goes out with the
step's record.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb
from temporalio import activity

from activities.group_commit import GroupCommit
from activities.store import Store
from activities.text_stream import TextStream
from reactive_temporal.contracts import names
from reactive_temporal.contracts.events import NewEvent, RecordRunEventsInput
from reactive_temporal.live_output import channel_for
from reactive_temporal.sanitize import clean_value

log = logging.getLogger(__name__)

_APPEND = sql.SQL("SELECT append_run_events({run}, {channel}, {events})")
"""One run's events, in order, as one call of the database's `append_run_events` (migration
10): it takes the run's lock, appends each event at the run's next offset unless the run has
its key already, and wakes the run's watchers."""


def transaction(run_id: str, events: Sequence[NewEvent]) -> sql.Composed:
    """The statements that append `events` to the run's log and wake its watchers, as one
    query string, `BEGIN` to `COMMIT` (`transaction_of`)."""
    return transaction_of([(run_id, events)])


def transaction_of(appends: Sequence[tuple[str, Sequence[NewEvent]]]) -> sql.Composed:
    """The statements that append each run's events to its log, in order, and wake each
    run's watchers, as one query string, `BEGIN` to `COMMIT`: one `append_run_events` call
    per run, its events one JSON array, each value quoted by psycopg (`sql.Literal`).

    One round trip and one simple-protocol message. The function's statements are planned
    once a session: each event as an `INSERT … SELECT max("offset")` of its own was planned
    every time, a third of the Postgres CPU of an LLM step's record and events
    (bench/README.md). The runs are called in one order, so two writers never wait on each
    other's run locks in a cycle. A connection held per statement made the worker's pool the
    queue at 200 concurrent runs, and the pipelined form cost the worker's loop 0.20 ms of CPU
    against 0.13 ms. A step sends its last events after its record, in the same string
    (`step_records.record_step`).
    """
    by_run: dict[str, list[NewEvent]] = {}
    for run_id, events in appends:
        by_run.setdefault(run_id, []).extend(events)
    calls = [
        _APPEND.format(
            run=sql.Literal(run_id),
            channel=sql.Literal(channel_for(run_id)),
            events=sql.Literal(Jsonb(clean_value([_fields(e) for e in events], nul=True))),
        )
        for run_id, events in sorted(by_run.items())
        if events
    ]
    return sql.SQL("; ").join([sql.SQL("BEGIN"), *calls, sql.SQL("COMMIT")])


def _fields(event: NewEvent) -> dict[str, Any]:
    """An event as `append_run_events` reads it (a plain dict: no pydantic dump per event)."""
    return {
        "type": event.type,
        "step": event.step,
        "position": event.position,
        "data": event.data,
        "key": event.key,
    }


ANNOUNCE_AFTER = 1.0
"""Seconds an announcing event waits for the next event to go out with (see the module)."""

MAX_BATCH_APPENDS = 200
"""At most this many appends (one run's events each) go in one transaction."""


class RunEvents:
    """Appends to runs' event logs, on the store's pool.

    Appends made while one is being written are written together, in the next transaction
    (`GroupCommit`): a lone append goes out at once, and at 200 runs streaming at once their
    text goes out in a few transactions a second instead of a thousand, each a pool checkout
    that durable writes queued behind (bench/README.md).
    """

    def __init__(self, store: Store) -> None:
        self.pool = store.pool
        self.commit = GroupCommit(self._write, max_batch=MAX_BATCH_APPENDS)

    async def append(self, run_id: str, events: Sequence[NewEvent]) -> None:
        """Append `events` in order, in one transaction, and wake the run's watchers; return
        once written. A statement that fails skips the rest, `COMMIT` included, and the pool
        rolls the transaction back; the appends written with it are then written one by
        one, so only the failing one raises."""
        if events:
            await self.commit.submit((run_id, events))

    async def _write(self, batch: list[tuple[str, Sequence[NewEvent]]]) -> None:
        async with self.pool.connection() as conn:
            await conn.execute(transaction_of(batch))

    async def try_append(self, run_id: str, events: Sequence[NewEvent]) -> None:
        """`append`, logging instead of raising: live output never fails a step."""
        try:
            await self.append(run_id, events)
        except Exception as err:  # best effort: see the module docstring
            log.warning("live output of %s not written: %s", run_id, err)

    @contextlib.asynccontextmanager
    async def streaming(
        self,
        stream_id: str | None,
        step: int,
        *,
        time_left: Callable[[], float] | None = None,
        begins: NewEvent | None = None,
        hand_over: bool = False,
        calls_in_text: bool | Callable[[], bool] = False,
    ) -> AsyncIterator[TextStream | None]:
        """One LLM call's text stream under `stream_id` (None: nothing streams); its `add`
        takes the text deltas. Announced by `begins` (an `Announcement`: with the first text,
        or alone).

        When the call fails, writing stops; when it returns, what is left is written — or,
        with `hand_over`, left in the stream's `last` for the caller to write with its own
        (`step_records.record_step`) — once the write in flight is done, within `time_left()`
        seconds if given (best effort: in a Postgres outage the last writes wait for a
        connection and must not use up the time the caller needs for what matters).
        `calls_in_text`: the model's calls are read from its text (`_Channel.calls_in_text`),
        or what tells, asked at each write (`TextStream`).
        """
        if stream_id is None:
            yield None
            return
        prelude = self.announce(stream_id, begins) if begins is not None else None
        attempt = activity.info().attempt
        text = TextStream(self, stream_id, step, attempt, prelude, calls_in_text=calls_in_text)
        try:
            yield text
        except BaseException:
            text.cancel()
            raise
        try:
            await asyncio.wait_for(
                text.close(write=not hand_over), timeout=time_left() if time_left else None
            )
        except TimeoutError:
            text.cancel()  # out of time: nothing more is written, the announcement included

    def announce(self, run_id: str, event: NewEvent) -> Announcement:
        """`event`, written with the next event the caller writes or alone after
        ANNOUNCE_AFTER seconds, whichever comes first."""
        return Announcement(self, run_id, event, ANNOUNCE_AFTER)

    @activity.defn(name=names.RECORD_RUN_EVENTS)
    async def record_run_events(self, input: RecordRunEventsInput) -> None:
        """Events the workflow itself produces (approvals asked and decided)."""
        await self.try_append(input.run_id, input.events)


class Announcement:
    """An event announcing work, pending until the work's next write takes it (`take`) or
    ANNOUNCE_AFTER seconds pass and it is written alone."""

    def __init__(self, events: RunEvents, run_id: str, event: NewEvent, after: float) -> None:
        self.event = event
        self.pending = True
        """Not written yet, nor taken, nor cancelled."""
        self._alone = asyncio.create_task(self._write_alone(events, run_id, after))
        self._went_alone = False

    async def _write_alone(self, events: RunEvents, run_id: str, after: float) -> None:
        await asyncio.sleep(after)
        self.pending = False
        self._went_alone = True
        await events.try_append(run_id, [self.event])

    async def take(self) -> list[NewEvent]:
        """The event, for the caller's next write, when it has not gone out yet; else none
        (once its own write has committed, so the caller's events come after it)."""
        if self.pending:
            self.cancel()
            return [self.event]
        if self._went_alone:
            await self._alone  # writing or written: never raises (try_append)
        return []

    def cancel(self) -> None:
        """The work failed or was cancelled: the event is not written if still pending."""
        if self.pending:
            self.pending = False
            self._alone.cancel()
