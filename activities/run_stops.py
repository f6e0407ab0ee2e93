"""A run's calls in flight stop when the run ends, not at their next heartbeat.

A run cancelled, past its deadline or answered by an operator while a model call or a tool
runs asks Temporal to cancel that activity, and returns at once. The activity learns of it
only from a heartbeat's reply: the first 10 s into the call, then one per 24 s
(`activities/heartbeat.py`). Meanwhile a model goes on streaming an answer nobody will read
and bills it, and a tool goes on fetching. So the run's wrap-up (`notify_agent`, a local
activity on the worker that runs the run's workflow task) stops them itself:

- the calls of its run on that worker at once, through this process's board (`RUN_STOPS`);
- when the run abandoned calls (the workflow knows: `NotifyAgentInput.calls_in_flight`), every
  other worker's too, with one Postgres NOTIFY on `CHANNEL` that each worker LISTENs to
  (`StopListener`). A worker that is not listening (Postgres restarting) falls back to the
  heartbeat, as before.

A stopped call is cancelled where it awaits (its model connection closed, its tool's
coroutine cancelled), then waits `STOP_GRACE_SECONDS` before failing with a benign,
non-retryable `RunStopped`. The wait is for the run: its last workflow task is completing
while the call stops, and an activity's failure arriving during that task would make
Temporal refuse the run's completion and ask for one more task. Temporal's own cancel,
arriving meanwhile, ends the call as it always did; when that cancel says the run is gone
(a terminated run's calls learn so at their heartbeat), the call ends as a benign `RunGone`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

from psycopg import AsyncConnection
from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from reactive_temporal.database_settings import Conninfo, conninfo_now

CHANNEL = "reactive_temporal_run_stops"
"""The Postgres channel a run's wrap-up NOTIFYs with its Temporal run id as the payload."""

STOP_GRACE_SECONDS = 2.0
"""How long a stopped call waits, its model connection already closed, before it fails:
time for its run to close first (see the module docstring)."""

APPLICATION_NAME = "reactive-temporal run stops"
"""The listener's connection as `pg_stat_activity` shows it."""

REMEMBERED_STOPS = 4096
"""Stopped runs remembered per worker, so a call of one that starts late stops too."""

RECONNECT_SECONDS = (1.0, 30.0)
"""The listener's first and longest wait before connecting again after losing Postgres."""

PROBE_PREFIX = "probe:"
"""A listener's NOTIFY to itself (never a run id): each connection checks that it hears."""
HEARD_WITHIN_SECONDS = 10.0
"""How long a listener waits for its own NOTIFY before it says that it hears none."""

logger = logging.getLogger(__name__)


class RunStops:
    """This worker's calls in flight, by their run's Temporal run id, and the runs stopped."""

    def __init__(self, remember: int = REMEMBERED_STOPS) -> None:
        self._calls: dict[str, set[asyncio.Task[Any]]] = {}
        self._stopped: OrderedDict[str, None] = OrderedDict()
        self._remember = remember

    def stop(self, run_key: str) -> int:
        """Stop the run's calls on this worker, and any that start later; how many ran."""
        self._stopped[run_key] = None
        self._stopped.move_to_end(run_key)
        while len(self._stopped) > self._remember:
            self._stopped.popitem(last=False)
        calls = self._calls.pop(run_key, set())  # each call stopped once (notices repeat)
        for task in calls:
            task.cancel(f"run {run_key} stopped")
        return len(calls)

    def stopped(self, run_key: str) -> bool:
        return run_key in self._stopped

    def in_flight(self, run_key: str) -> int:
        return len(self._calls.get(run_key, ()))

    @contextlib.asynccontextmanager
    async def stoppable(self) -> AsyncIterator[None]:
        """Run the block as a call of the activity's run: stopped with it (`RunStopped` after
        the grace), or cancelled by Temporal as any activity is."""
        info = activity.info()
        run_key = info.workflow_run_id
        task = asyncio.current_task()
        if not run_key or task is None:  # not a workflow's activity
            yield
            return
        if self.stopped(run_key):
            await self._stopped_call(info)
        calls = self._calls.setdefault(run_key, set())
        calls.add(task)
        try:
            yield
        except asyncio.CancelledError:
            if activity.is_cancelled():  # Temporal's cancel: the run's request, a worker stopping
                details = activity.cancellation_details()
                if details is not None and details.not_found:
                    # a heartbeat found the call gone: its run terminated (or closed without
                    # stopping it), or this attempt timed out and another took over; Temporal
                    # takes no completion from it
                    raise _ended(
                        info,
                        "RunGone",
                        "Temporal no longer has this call (its run ended, or "
                        "the attempt was timed out)",
                    ) from None
                raise
            if not self.stopped(run_key):
                raise
            task.uncancel()
            await self._stopped_call(info)
        finally:
            calls.discard(task)
            if not calls and self._calls.get(run_key) is calls:
                del self._calls[run_key]

    @staticmethod
    async def _stopped_call(info: activity.Info) -> None:
        await asyncio.sleep(STOP_GRACE_SECONDS)
        raise _ended(info, "RunStopped", "the run ended while it was in flight")


def _ended(info: activity.Info, kind: str, why: str) -> ApplicationError:
    """A call that ended because its run did: benign (the SDK logs it at debug level, not as
    a failed activity with its traceback at warning level) and never tried again."""
    return ApplicationError(
        f"{info.activity_type} of run {info.workflow_id} stopped: {why}",
        type=kind,
        non_retryable=True,
        category=ApplicationErrorCategory.BENIGN,
    )


RUN_STOPS = RunStops()
"""The process's board: every worker in a process shares it (a Temporal run id is unique)."""


async def announce_stop(conn: AsyncConnection[Any], run_key: str) -> None:
    """Tell every listening worker that the run ended (in `conn`'s transaction or pipeline);
    a listener also sends itself a probe this way."""
    await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, run_key))


def _deaf() -> None:
    logger.warning(
        "this worker's LISTEN on %s did not hear its own NOTIFY within %.0f s: a run's calls "
        "on this worker stop at their next heartbeat, not when the run ends. Behind a pooler "
        "in transaction mode (PgBouncer's pool_mode=transaction) LISTEN hears nothing: point "
        "DATABASE_URL at Postgres or at a session-mode pool",
        CHANNEL,
        HEARD_WITHIN_SECONDS,
    )


class StopListener:
    """A worker's one connection LISTENing on `CHANNEL`, stopping what each notice names."""

    def __init__(self, conninfo: Conninfo, stops: RunStops = RUN_STOPS) -> None:
        self.conninfo = conninfo
        """The URL, or what gives the one of the day at each reconnect (DATABASE_URL_FILE)."""
        self.stops = stops
        self.listening = asyncio.Event()
        """Set while the LISTEN is in effect (tests wait for it)."""
        self.heard_itself = asyncio.Event()
        """Set once the connection heard its own NOTIFY: notices do reach this worker."""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> StopListener:
        self._task = asyncio.create_task(self._listen(), name="run-stop-listener")
        return self

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _listen(self) -> None:
        wait, longest = RECONNECT_SECONDS
        while True:
            try:
                async with await AsyncConnection.connect(
                    conninfo_now(self.conninfo), autocommit=True, application_name=APPLICATION_NAME
                ) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self.listening.set()
                    wait = RECONNECT_SECONDS[0]
                    probe = f"{PROBE_PREFIX}{uuid.uuid4().hex}"
                    deaf = asyncio.get_running_loop().call_later(HEARD_WITHIN_SECONDS, _deaf)
                    try:
                        await announce_stop(conn, probe)  # to itself; never a run's id
                        async for notice in conn.notifies():
                            if notice.payload == probe:
                                deaf.cancel()
                                self.heard_itself.set()
                            elif not notice.payload.startswith(PROBE_PREFIX):
                                self.stops.stop(notice.payload)
                    finally:
                        deaf.cancel()
            except Exception as err:  # Postgres went away: the heartbeat covers until it is back
                logger.warning(
                    "not listening for stopped runs (%s); connecting again in %.0f s", err, wait
                )
            self.listening.clear()
            await asyncio.sleep(wait)
            wait = min(wait * 2, longest)
