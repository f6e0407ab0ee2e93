"""Follow a run's live output from any process: `watch`, `agent.events()`, `run_stream()`.

The events are read from the workers' Postgres (`run_events`, written by the activities as
the run goes), woken by the run's NOTIFY channel: from offset 0 (or where a reconnecting
watcher stopped), then each new event as it is committed. When the run closes, what is left
is read and a last `finished` event carries its result (or its status, when it ended
without one: terminated, failed), made from Temporal, not stored.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import psycopg
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError

from reactive_temporal.api.live_feed import BATCH, LiveFeed
from reactive_temporal.api.results import UNREACHABLE_PATIENCE_SECONDS, result_of
from reactive_temporal.api.runs import require_run
from reactive_temporal.api.unserved import while_served
from reactive_temporal.contracts.events import RunEvent
from reactive_temporal.contracts.result import AgentResult
from reactive_temporal.database_settings import Conninfo
from reactive_temporal.live_output import Shown, TextFold
from workflows.agent_run import AgentRunWorkflow

WAKE_SECONDS = 1.0
"""Re-read at least this often, in case a notification was missed (a reconnect)."""
RECONNECTS = 5
"""Reads failed in a row, once one succeeded, before a watcher gives up (about 15 s of
Postgres unreachable, more while reads wait for a connection: a restart or a failover is
shorter)."""
RECONNECT_DELAY_SECONDS = 1.0


class LiveOutputUnavailable(ValueError):
    """This process cannot read runs' live output (no Postgres, or it refused)."""


def _events(run_id: str, row: dict[str, Any], fold: TextFold) -> list[RunEvent]:
    """A stored row as watchers see it.

    Nothing for a text delta that shows nothing new yet; its thinking and its answer apart for
    one that shows both.
    """
    data: dict[str, Any] = row["data"]
    if row["type"] == "text":
        shown = fold.take(
            row["step"],
            int(data.get("attempt", 1)),
            row["position"],
            str(data.get("delta", "")),
            thinking=data.get("thinking") is True,
            calls_in_text=data.get("calls_in_text") is True,
            calls_only=data.get("calls_only") is True,
        )
        return [_text(run_id, row, piece) for piece in shown]
    fields = (
        "iteration", "call_id", "tool", "arguments", "success", "duration_ms", "preview",
        "status", "by", "reason",
    )  # fmt: skip
    picked = {k: data[k] for k in fields if data.get(k) is not None}
    return [RunEvent(**_base(run_id, row), **picked)]


def _base(run_id: str, row: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": row["type"],
        "run_id": run_id,
        "offset": row["offset"],
        "at": row["created_at"],
        "step": row["step"],
    }


def _text(run_id: str, row: dict[str, Any], piece: Shown) -> RunEvent:
    """A piece of a step's reply, as a `text` event of the row it came from."""
    return RunEvent(
        **{**_base(run_id, row), "type": "text"},
        delta=piece.text,
        thinking=True if piece.thinking else None,
        restart=True if piece.restart else None,
    )


def _settled(
    run_id: str, fold: TextFold, last_text: dict[int, dict[str, Any]], besides: int | None = None
) -> list[RunEvent]:
    """The last pieces of the replies that have ended (`TextFold.settle`).

    An event of another step, or the stream's end, shows they have; each piece is an event
    of its step's last text row.
    """
    return [_text(run_id, last_text[step], piece) for step, piece in fold.settle(besides=besides)]


async def _outcome(
    client: Client, run_id: str, unreachable_for: float
) -> tuple[str, AgentResult | None]:
    """Wait for the run to close: its status and its result (None without one)."""
    handle = client.get_workflow_handle_for(AgentRunWorkflow.run, run_id)
    try:
        return "completed", await result_of(handle, unreachable_for=unreachable_for)
    except WorkflowFailureError:
        status = (await handle.describe()).status
        return (status.name.lower() if status else "closed"), None


async def follow_events(
    client: Client,
    database_url: Conninfo | None,
    run_id: str,
    *,
    from_offset: int = 0,
    unreachable_for: float = UNREACHABLE_PATIENCE_SECONDS,
    until_unserved: bool = False,
) -> AsyncIterator[RunEvent]:
    """The run's events from `from_offset` on, then each new one, ending with `finished`.

    The wait for its end outlasts a Temporal server out of reach for `unreachable_for` s.
    With `until_unserved`, it ends once the server shows no worker can move the run on (a
    watcher waited for good, printing nothing, while the run could not move).

    Raises:
        ValueError: no such run.
        LiveOutputUnavailable: no Postgres to read from, or it cannot be reached.
        RunUnserved: with `until_unserved`, no worker can move the run on now.
    """
    _require_readable(database_url, from_offset)
    running = (await require_run(client, run_id)).status == WorkflowExecutionStatus.RUNNING
    ending = _outcome(client, run_id, unreachable_for)
    resume = from_offset
    if until_unserved and running:
        ending = while_served(
            client,
            run_id,
            ending,
            lambda why: (
                f"run {run_id!r} cannot go on now: {why}. Watch it again once a worker "
                f"runs it, from offset {resume} (what was shown ends there)"
            ),
        )
    outcome = asyncio.ensure_future(ending)
    try:
        async for event in stream_events(
            database_url or "", run_id, until=outcome, from_offset=from_offset
        ):
            resume = event.offset + 1 if event.offset is not None else resume
            yield event
        status, result = outcome.result()
        yield RunEvent(type="finished", run_id=run_id, status=status, result=result)
    finally:
        outcome.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await outcome


async def stream_events(
    database_url: Conninfo,
    stream_id: str,
    *,
    until: asyncio.Future[Any],
    from_offset: int = 0,
) -> AsyncIterator[RunEvent]:
    """The events stored under `stream_id` (a run, or a chat turn's stream) as committed.

    From `from_offset` on, until `until` is done (and what was committed before it is read).
    The process's watchers share their connections (`LiveFeed`). A read Postgres fails (a
    restart, a failover) is made again, from the offset after the last event given, up to
    RECONNECTS times in a row.

    Raises:
        LiveOutputUnavailable: no Postgres to read from, or it cannot be reached.
    """
    _require_readable(database_url, from_offset)
    if "\x00" in stream_id:
        raise ValueError("a stream id cannot hold a NUL character")
    fold = TextFold()
    last_text: dict[int, dict[str, Any]] = {}
    offset = from_offset
    lost = 0
    read_once = False
    feed = LiveFeed.shared(database_url)
    try:
        async with feed.watching(stream_id) as wake:
            while True:
                try:
                    wake.clear()  # before reading: a notice during the read wakes the next wait
                    done = until.done()  # decided before reading: rows committed earlier are read
                    while True:  # a batch at a time, each given before the next is read
                        rows = await feed.batch(stream_id, offset)
                        read_once, lost = True, 0
                        for row in rows:
                            offset = row["offset"] + 1
                            for event in _read(stream_id, row, fold, last_text):
                                yield event
                        if len(rows) < BATCH:
                            break
                    if done:
                        for event in _settled(stream_id, fold, last_text):
                            yield event
                        return
                    await _wait(wake, until)
                except psycopg.OperationalError:
                    lost += 1
                    if not read_once or lost > RECONNECTS:
                        raise
                    await asyncio.sleep(RECONNECT_DELAY_SECONDS * lost)
    except psycopg.Error as err:
        raise LiveOutputUnavailable(f"cannot read live output from Postgres: {err}") from err


def _read(
    run_id: str, row: dict[str, Any], fold: TextFold, last_text: dict[int, dict[str, Any]]
) -> list[RunEvent]:
    """The events a row shows, after what it shows of earlier steps' replies.

    An event of another step means those replies have ended.
    """
    settled = _settled(run_id, fold, last_text, besides=row["step"])
    if row["type"] == "text":
        last_text[row["step"]] = row
    return [*settled, *_events(run_id, row, fold)]


def _require_readable(database_url: Conninfo | None, from_offset: int) -> None:
    if not database_url:
        raise LiveOutputUnavailable(
            "live output is read from the workers' Postgres: set DATABASE_URL "
            "(the embedded stack and `starter.py dev` provide it)"
        )
    if from_offset < 0:
        raise ValueError(f"from_offset must be 0 or more, not {from_offset}")


async def _wait(wake: asyncio.Event, outcome: asyncio.Future[Any]) -> None:
    """Until the run's channel is notified, the run closes, or WAKE_SECONDS pass."""
    notified = asyncio.ensure_future(wake.wait())
    try:
        await asyncio.wait({notified, outcome}, timeout=WAKE_SECONDS, return_when="FIRST_COMPLETED")
    finally:
        notified.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await notified
