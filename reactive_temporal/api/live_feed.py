"""One process's watchers of live output share their Postgres connections.

A watcher used to hold a connection of its own for as long as it watched: a web app showing
120 runs' progress used up Postgres's `max_connections` (100 by default), and the workers
sharing that Postgres could no longer record their runs. Now a process holds, per database
and event loop, one connection LISTENing on every channel its watchers follow (woken by the
NOTIFY each commit of a run's events sends) and a pool of at most READERS connections for
the reads; both close when the last watcher leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from reactive_temporal.database_settings import Conninfo, conninfo_now
from reactive_temporal.live_output import channel_for

logger = logging.getLogger(__name__)

READERS = 4
"""Connections a process reads live output on at most, however many watch."""
READ_WAIT_SECONDS = 10.0
"""How long a read waits for one of them (or for Postgres, when it is away) before failing."""
POLL_SECONDS = 0.2
"""How often the listening connection takes new channels to LISTEN on: a new watcher's
channel is listened to within this (it reads what is stored first either way)."""
LISTEN_WITHIN_SECONDS = 10.0
"""A watcher whose channel is not listened to by then reads on its periodic wake-ups only."""
RELISTEN_SECONDS = (0.5, 5.0)
"""First and longest wait before the listening connection is made again after a drop."""
BATCH = 500
BATCH_QUERY = (
    'SELECT "offset", type, step, position, data, created_at FROM run_events'
    ' WHERE run_id = %s AND "offset" >= %s AND "offset" < %s ORDER BY "offset" LIMIT %s'
)
"""A run's next BATCH events from `first`: those at offsets [first, first + BATCH), offsets
being dense (`activities/run_events.py`), and at most BATCH of them.

Postgres estimates a run's rows from every run's offsets. With `"offset" >= first … LIMIT
BATCH` alone, it answered a batch from the middle of a long run by reading every event from
`first` to the run's end and sorting them (25,000 rows for 500 at 3 M events: a watcher
catching up on a run of N events read about N²/1,000). With the range alone, it planned the
first batch of a long run, whose offsets it thought every run has, as a parallel scan of
48,000 rows (8 ms for 0.2). With both, it reads the batch in key order (bench/data_scale.py).
"""
LIVE_FEED_NAME = "reactive-temporal live output"
"""The feed's connections' `application_name` (pg_stat_activity shows whose they are)."""

_feeds: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Conninfo, LiveFeed]] = (
    weakref.WeakKeyDictionary()
)


@dataclass
class _Channel:
    wakes: set[asyncio.Event] = field(default_factory=set)
    listening: bool = False


class LiveFeed:
    """The shared connections of this event loop's watchers of one database."""

    def __init__(self, database_url: Conninfo) -> None:
        """Nothing is opened until the first watcher comes (`watching`).

        `database_url` may give the URL of the moment (DATABASE_URL_FILE:
        `database_settings.UrlFile`), asked at each connection made.
        """
        self.database_url = database_url
        self._channels: dict[str, _Channel] = {}
        self._state = asyncio.Condition()
        self._failure: psycopg.Error | None = None
        self._listened_once = False
        self._listener: asyncio.Task[None] | None = None
        self._pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] | None = None

    @staticmethod
    def shared(database_url: Conninfo) -> LiveFeed:
        """This event loop's feed for `database_url` (made on first use)."""
        feeds = _feeds.setdefault(asyncio.get_running_loop(), {})
        if (feed := feeds.get(database_url)) is None:
            feed = feeds[database_url] = LiveFeed(database_url)
        return feed

    @property
    def connections(self) -> int:
        """Connections this feed holds open now (tests count them)."""
        listening = self._listener is not None and not self._listener.done()
        pooled = self._pool.get_stats().get("pool_size", 0) if self._pool is not None else 0
        return int(listening) + pooled

    @contextlib.asynccontextmanager
    async def watching(self, stream_id: str) -> AsyncIterator[asyncio.Event]:
        """An event set whenever `stream_id`'s channel is notified (and after a reconnect).

        Raises:
            psycopg.OperationalError: Postgres cannot be reached to listen.
        """
        name = channel_for(stream_id)
        wake = asyncio.Event()
        channel = self._channels.setdefault(name, _Channel())
        channel.wakes.add(wake)
        try:
            await self._start()
            async with self._state:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        self._state.wait_for(lambda: channel.listening or bool(self._failure)),
                        LISTEN_WITHIN_SECONDS,
                    )
            if not self._listened_once and self._failure is not None:
                raise self._failure  # Postgres was never reached (once it was, the reads tell)
            yield wake
        finally:
            channel.wakes.discard(wake)
            if not channel.wakes:
                self._channels.pop(name, None)
            if not self._channels:
                await self._close()

    async def batch(self, stream_id: str, offset: int) -> list[dict[str, Any]]:
        """Up to BATCH stored events of `stream_id` from `offset` on (`BATCH_QUERY`)."""
        assert self._pool is not None, "read only while watching"
        async with self._pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(BATCH_QUERY, (stream_id, offset, offset + BATCH, BATCH))
            return await cur.fetchall()

    async def _start(self) -> None:
        if self._listener is None:
            self._listener = asyncio.create_task(self._listen(), name="live-output-listener")
        if self._pool is None:
            self._pool = pool = AsyncConnectionPool(
                self.database_url,
                min_size=1,
                max_size=READERS,
                timeout=READ_WAIT_SECONDS,
                kwargs={"autocommit": True, "application_name": LIVE_FEED_NAME},
                check=AsyncConnectionPool.check_connection,
                open=False,
                name="live-output",
            )
            await pool.open(wait=False)

    async def _close(self) -> None:
        """The last watcher left: let go of every connection (a new watcher makes them again)."""
        feeds = _feeds.get(asyncio.get_running_loop(), {})
        if feeds.get(self.database_url) is self:
            del feeds[self.database_url]
        listener, self._listener = self._listener, None
        pool, self._pool = self._pool, None
        if listener is not None:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
        if pool is not None:
            await pool.close()

    async def _listen(self) -> None:
        """Keep one connection LISTENing on every watched channel, waking their watchers."""
        wait, longest = RELISTEN_SECONDS
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    conninfo_now(self.database_url),
                    autocommit=True,
                    application_name=LIVE_FEED_NAME,
                ) as conn:
                    listened: set[str] = set()
                    while True:
                        await self._follow_channels(conn, listened)
                        wait = RELISTEN_SECONDS[0]
                        async for notice in conn.notifies(timeout=POLL_SECONDS):
                            if (channel := self._channels.get(notice.channel)) is not None:
                                for wake in channel.wakes:
                                    wake.set()
            except psycopg.Error as err:
                logger.warning(
                    "live output: not listening (%s); connecting again in %.1f s", err, wait
                )
                async with self._state:
                    self._failure = err
                    for channel in self._channels.values():
                        channel.listening = False
                    self._state.notify_all()
            await asyncio.sleep(wait)
            wait = min(wait * 2, longest)

    async def _follow_channels(
        self, conn: psycopg.AsyncConnection[Any], listened: set[str]
    ) -> None:
        """LISTEN on channels newly watched, UNLISTEN those no longer; say which are in effect."""
        wanted = set(self._channels)
        for name in sorted(wanted - listened):
            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(name)))
            listened.add(name)
        for name in sorted(listened - wanted):
            await conn.execute(sql.SQL("UNLISTEN {}").format(sql.Identifier(name)))
            listened.discard(name)
        newly = [c for n, c in self._channels.items() if n in listened and not c.listening]
        if newly or self._failure is not None or not self._listened_once:
            async with self._state:
                self._failure, self._listened_once = None, True
                for channel in newly:
                    channel.listening = True
                    for wake in channel.wakes:
                        wake.set()  # a notice may have come before the LISTEN: read again
                self._state.notify_all()
