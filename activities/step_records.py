"""Steps that do their work at most once, and wait out Postgres outages as outages.

Temporal runs an activity again when an attempt fails or times out. For the run's two
costly steps — the model call (`llm_step`) and the tool call (`run_tool`) — that would mean a
second billed model call or a tool's side effect twice. So each records its result with its
transcript message, in one write, as soon as the result exists (`Store.record_step`), and an
attempt after the first looks for that record before doing anything (`recorded`): a step
whose work completed returns the recorded result instead of doing it again.

Postgres being unreachable is not the model's or the tool's failure: `until_stored` retries
a store operation inside the attempt (the activity keeps heartbeating meanwhile), with the
result held in memory, until it lands or the attempt's time is nearly spent; only then does
the attempt fail, as `StoreUnavailable`, naming Postgres.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from psycopg import sql
from pydantic import BaseModel
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities import run_events
from activities.group_commit import GroupCommit
from activities.statements import record_row
from activities.store import Store, is_outage
from reactive_temporal.contracts.events import NewEvent
from reactive_temporal.contracts.run import Message

log = logging.getLogger(__name__)

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

STORE_UNAVAILABLE = "StoreUnavailable"
"""The type of the failure an attempt ends with when Postgres stayed unreachable."""
FIRST_WAIT = 0.25
"""Seconds before the first retry of a store operation; doubled up to MAX_WAIT."""
MAX_WAIT = 5.0
DEADLINE_MARGIN = timedelta(seconds=3)
"""Stop retrying this long before the attempt's start-to-close timeout, and fail cleanly."""
MIN_TRY_SECONDS = 0.5
"""A try that starts with less time than this left still gets this long."""
MIN_TRYING = timedelta(seconds=5)
"""Always retry at least this long (a worker clock ahead of the server's must not turn a
blip into a failed attempt)."""


def _deadline() -> datetime:
    info = activity.info()
    timeout = info.start_to_close_timeout or timedelta(seconds=60)
    now = datetime.now(UTC)
    started = info.started_time
    if started.tzinfo is None:
        started = started.replace(tzinfo=UTC)
    return max(started + timeout - DEADLINE_MARGIN, now + MIN_TRYING)


def seconds_to_spare() -> float:
    """Seconds the attempt can spend on best-effort writes and still leave `until_stored`
    its own time (MIN_TRYING) before the attempt's deadline; at least MIN_TRY_SECONDS."""
    left = _deadline() - datetime.now(UTC) - MIN_TRYING
    return max(left.total_seconds(), MIN_TRY_SECONDS)


async def until_stored(operation: Callable[[], Awaitable[T]], *, what: str) -> T:
    """`operation()` (a Postgres read or write), retried while Postgres is unreachable until
    shortly before the attempt's deadline; then a retryable `StoreUnavailable` failure."""
    deadline = _deadline()
    wait = FIRST_WAIT
    while True:
        # Each try is bounded by the deadline too: waiting for a pool connection alone can
        # take longer than what is left, and an attempt that overran its start-to-close
        # timeout would fail as a timeout, its cause (Postgres) lost.
        left = (deadline - datetime.now(UTC)).total_seconds()
        try:
            return await asyncio.wait_for(operation(), timeout=max(left, MIN_TRY_SECONDS))
        except Exception as err:
            if not (is_outage(err) or isinstance(err, TimeoutError)):
                raise
            left = (deadline - datetime.now(UTC)).total_seconds()
            if left <= 0:
                raise ApplicationError(
                    f"Postgres unavailable while {what}: {err}",
                    type=STORE_UNAVAILABLE,
                ) from err
            activity.logger.warning("Postgres unavailable while %s (%s); retrying", what, err)
            await asyncio.sleep(min(wait, left))
            wait = min(wait * 2, MAX_WAIT)


async def recorded(store: Store, run_id: str, seq: int, kind: type[M]) -> M | None:
    """The result an earlier attempt of this step recorded; None on a first attempt or when
    none did. A reset run's steps start again at attempt 1 and do their work again; a retried
    one takes only a record of its own Temporal run: the row at its position may hold what
    the run's timeline before the reset recorded there (another reply, or a tool's result)."""
    info = activity.info()
    if info.attempt <= 1:
        return None
    kept = await until_stored(
        lambda: store.recorded_step(run_id, seq, recorded_by=info.workflow_run_id),
        what="looking for an earlier attempt's result",
    )
    if kept is None:
        return None
    activity.logger.info("%s #%d: returning what an earlier attempt recorded", run_id, seq)
    return kind.model_validate(kept)


MAX_BATCH_RECORDS = 100
"""At most this many steps' records go in one transaction,"""
MAX_BATCH_CHARS = 4_000_000
"""and at most about this many characters of them (a reply may be 1.5 MB, and its record
holds it twice): one query string stays a few megabytes however many replies are long."""


@dataclass(frozen=True)
class StepRecord:
    """One step's record (`statements.record_row`), with what goes in its round trip: statements
    in its transaction (`also`) and live-output events after it."""

    run_id: str
    row: tuple[object, ...]
    also: sql.Composable | None = None
    events: Sequence[NewEvent] = ()
    chars: int = 0
    """About how many characters the record holds (`MAX_BATCH_CHARS`)."""


class StepRecords:
    """The steps' records, written together when they come together (`GroupCommit`).

    At a thousand runs, runs' steps end in bursts, and each step's record was a pool
    checkout and a round trip of its own: the pool's connections were the queue. Records
    that come while one is being written share the next transaction, their events the
    transaction after it, in the same round trip. Each step returns once its own record has
    committed, as before.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.commit = GroupCommit(
            self._write,
            max_batch=MAX_BATCH_RECORDS,
            size=lambda record: record.chars,
            max_size=MAX_BATCH_CHARS,
        )

    async def write(self, record: StepRecord) -> None:
        await self.commit.submit(record)

    async def _write(self, batch: list[StepRecord]) -> None:
        appends = [(r.run_id, r.events) for r in batch if r.events]
        await self.store.record_steps(
            [r.row for r in batch],
            also=[r.also for r in batch if r.also is not None],
            then=run_events.transaction_of(appends) if appends else None,
        )


async def record_step(
    records: StepRecords,
    run_id: str,
    seq: int,
    message: Message,
    result: BaseModel,
    *,
    events: Sequence[NewEvent] = (),
    also: sql.Composable | None = None,
    what: str,
) -> None:
    """The step's record, written through outages (`until_stored`), with the step's last
    live-output `events` in the same round trip (the record commits first, in a transaction
    of its own, then the events in theirs) and `also`, best-effort statements for the
    record's transaction; with other steps' records when they come together (`StepRecords`).

    A step wrote its record and its events in two checkouts and two round trips before (about
    a tenth of a quick tool step's loop time, bench/README.md). The record stays the durable
    part, the rest best effort: when the write with them fails, the record is written again
    alone — an upsert of the same row, whether or not it had landed — and then the events
    once more on their own (a watcher saw a tool start and never end, after an outage): an
    event with a key is written once however often it is sent, and text is shown once by its
    position (`TextFold`).
    """
    row = record_row(run_id, seq, message, result, recorded_by=activity.info().workflow_run_id)
    chars = 2 * (len(message.content or "") + sum(len(c.arguments) for c in message.tool_calls))
    for beside in ("thinking", "turn_state"):  # what a `ThoughtStep` holds besides
        chars += len(getattr(result, beside, None) or "")
    extras = bool(events) or also is not None
    written_with_record = False

    async def write() -> None:
        nonlocal extras, written_with_record
        if extras:
            extras = False  # at most once: a retry writes the record alone
            try:
                await records.write(StepRecord(run_id, row, also, events, chars))
                written_with_record = True
                return
            except Exception as err:
                log.warning(
                    "%s #%d: the record with its live output failed (%s); the record goes "
                    "again alone, then its live output",
                    run_id,
                    seq,
                    err,
                )
                if is_outage(err):
                    raise  # until_stored waits it out, then writes the record alone
        await records.write(StepRecord(run_id, row, chars=chars))

    await until_stored(write, what=what)
    if events and not written_with_record:
        try:
            async with records.store.pool.connection() as conn:
                await conn.execute(run_events.transaction(run_id, events))
        except Exception as err:  # best effort: the transcript has the step whole
            log.warning("%s #%d: its live output is dropped (%s)", run_id, seq, err)
