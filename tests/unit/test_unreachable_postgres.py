"""Without a Postgres to reach: a watcher, or a store, is told at once, and nothing is kept."""

from __future__ import annotations

import asyncio
import socket

import pytest

from activities.store import Store, StoreUnavailable
from reactive_temporal.api import live_feed
from reactive_temporal.api.watching import LiveOutputUnavailable, stream_events


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_postgres_never_reached_is_said_at_once_and_nothing_is_kept():
    url = f"postgresql://nobody@127.0.0.1:{_closed_port()}/none?connect_timeout=2"
    until: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    started = asyncio.get_running_loop().time()
    with pytest.raises(LiveOutputUnavailable, match="cannot read live output from Postgres"):
        async for _ in stream_events(url, "run-x", until=until):
            pass
    assert asyncio.get_running_loop().time() - started < live_feed.LISTEN_WITHIN_SECONDS / 2
    assert not live_feed._feeds.get(asyncio.get_running_loop())


async def test_a_store_that_cannot_connect_says_so_at_once(caplog: pytest.LogCaptureFixture):
    """The worker's pool tried for 15 s, logging a warning a try (26 lines in `lessons`,
    `prune`, `migrate`) before the line that said why."""
    url = f"postgresql://nobody@127.0.0.1:{_closed_port()}/none"
    with pytest.raises(StoreUnavailable, match="cannot connect to Postgres"):
        await Store.open(url)
    assert not [r for r in caplog.records if r.name.startswith("psycopg")]
