"""How the worker's Postgres pool hands out connections and how many it keeps open."""

from __future__ import annotations

import contextlib
import time
import weakref
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

CHECK_AFTER_IDLE = 1.0
"""Seconds a pooled connection may sit idle and still be handed out without a check."""


class IdleChecks:
    """The pool's check of a connection it hands out, for connections idle for a while only.

    The check (`check_connection`, an empty statement) is what finds a connection a Postgres
    restart broke; it costs a round trip and ~0.4 ms of the worker's loop, several times per
    LLM step (7% of a busy bench worker's CPU). A connection returned less than
    CHECK_AFTER_IDLE seconds ago is handed out unchecked: one a restart broke since fails its
    statement as an outage (which `until_stored` and Temporal's retries wait out), and the
    pool discards it.

    A check that fails has the pool check every idle connection at once (`sweep`): a restart
    broke them all, and the pool found them one checkout at a time, each after a longer
    pause (1, 2, 4, 8 s): a worker stalled 20-40 s after Postgres was back.
    """

    def __init__(self) -> None:
        self.returned_at: weakref.WeakKeyDictionary[AsyncConnection[Any], float] = (
            weakref.WeakKeyDictionary()
        )
        self.pool: AsyncConnectionPool[AsyncConnection[Any]] | None = None
        """The pool to sweep (set once it is made)."""
        self._swept_at = 0.0

    async def returned(self, conn: AsyncConnection[Any]) -> None:
        self.returned_at[conn] = time.monotonic()

    async def check(self, conn: AsyncConnection[Any]) -> None:
        at = self.returned_at.get(conn)
        if at is not None and time.monotonic() - at < CHECK_AFTER_IDLE:
            return
        try:
            await AsyncConnectionPool.check_connection(conn)
        except Exception:
            await self.sweep()
            raise

    async def sweep(self) -> None:
        """Check the pool's idle connections, discarding the broken ones (once a second at
        most, however many checkouts find one)."""
        if self.pool is None or time.monotonic() - self._swept_at < SWEEP_EVERY:
            return
        self._swept_at = time.monotonic()
        with contextlib.suppress(Exception):  # a pool closing: nothing left to sweep
            await self.pool.check()


SWEEP_EVERY = 1.0
"""Seconds between two sweeps of a pool's idle connections."""


WARM_SHARE = 3
"""A pool keeps a WARM_SHARE-th of its connections open (`warm_connections`)."""


def warm_connections(max_size: int) -> int:
    """How many connections a pool of `max_size` opens at once and keeps when idle.

    psycopg_pool grows one connection at a time, each a connect and an authentication: runs
    starting in a burst queued for the pool while it grew. At 1,000 runs on the worker's
    default pool (50) the pool reached 13–15 connections: with a quarter of it (12) opened up
    front, 0–24 requests per bench waited a few ms in the first burst, with a third (16) none
    did (bench/README.md; 17 and 62 waited with one connection up front). It is what an idle
    worker holds of a Postgres shared with others (the rest closes when idle).
    """
    return max(1, max_size // WARM_SHARE)
