"""GroupCommit: writes that come while one is in flight go out together in the next; a failed
batch costs only its bad item, or every item when Postgres is away. No Postgres needed: the
write is a function that records what it was given."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from activities.group_commit import GroupCommit


class Writes:
    """A write that takes a moment, refuses `bad` items, and can be told Postgres is away."""

    def __init__(self, bad: frozenset[str] = frozenset()) -> None:
        self.batches: list[list[str]] = []
        self.bad = bad
        self.outage = False
        self.began = asyncio.Event()

    async def __call__(self, batch: list[str]) -> None:
        self.batches.append(list(batch))
        self.began.set()
        await asyncio.sleep(0.01)
        if self.outage:
            raise psycopg.OperationalError("connection refused")
        if self.bad & set(batch):
            raise ValueError(f"refused: {sorted(self.bad & set(batch))}")


async def in_flight(writes: Writes) -> None:
    """Until a write has begun."""
    await writes.began.wait()


async def submitted(
    commit: GroupCommit[str], writes: Writes, items: str | list[str]
) -> list[object]:
    """The first item submitted alone, the rest while its write is in flight."""
    first = asyncio.ensure_future(commit.submit(items[0]))
    await in_flight(writes)
    rest = [commit.submit(item) for item in items[1:]]
    return await asyncio.gather(first, *rest, return_exceptions=True)


async def test_a_lone_write_goes_out_at_once_and_the_rest_come_together():
    writes = Writes()
    commit = GroupCommit(writes, max_batch=3)
    assert await submitted(commit, writes, "abcdef") == [None] * 6
    assert writes.batches == [["a"], ["b", "c", "d"], ["e", "f"]]


async def test_a_bad_item_fails_only_its_own_submit():
    writes = Writes(bad=frozenset({"c"}))
    commit = GroupCommit(writes, max_batch=10)
    outcomes = await submitted(commit, writes, "abcd")
    assert outcomes[:2] == [None, None] and outcomes[3] is None
    assert isinstance(outcomes[2], ValueError)
    assert writes.batches == [["a"], ["b", "c", "d"], ["b"], ["c"], ["d"]]


async def test_an_outage_fails_the_whole_batch_at_once():
    """Postgres away: every item's caller waits it out its own way; writing them again one
    by one would only meet the outage once per item."""
    writes = Writes()
    commit = GroupCommit(writes, max_batch=10)
    writes.outage = True
    outcomes = await submitted(commit, writes, "abc")
    assert all(isinstance(o, psycopg.OperationalError) for o in outcomes)
    assert writes.batches == [["a"], ["b", "c"]]
    writes.outage = False
    await commit.submit("d")  # the writer starts again for what comes next
    assert writes.batches[-1] == ["d"]


async def test_when_the_writer_is_cancelled_its_waiters_are_too():
    writes = Writes()
    commit = GroupCommit(writes, max_batch=10)
    writing = asyncio.ensure_future(commit.submit("a"))
    await in_flight(writes)
    queued = asyncio.ensure_future(commit.submit("b"))  # waits for the write in flight
    await asyncio.sleep(0)
    assert commit.writing is not None
    commit.writing.cancel()
    for waiting in (writing, queued):
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(waiting, timeout=5)


async def test_a_writer_cancelled_before_it_began_cancels_its_waiters():
    writes = Writes()
    commit = GroupCommit(writes, max_batch=10)
    waiting = asyncio.ensure_future(commit.submit("a"))
    await asyncio.sleep(0)  # the writer is created, not yet begun
    assert commit.writing is not None and not writes.batches
    commit.writing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(waiting, timeout=5)


async def test_a_batch_stays_within_its_size_and_a_big_item_goes_alone():
    """Records of long replies: a batch holds items up to `max_size` in all; an item bigger
    than that is written alone, never held back."""
    writes = Writes()
    commit = GroupCommit(writes, max_batch=10, size=len, max_size=4)
    assert await submitted(commit, writes, ["a", "bb", "cc", "dddddd", "e"]) == [None] * 5
    assert writes.batches == [["a"], ["bb", "cc"], ["dddddd"], ["e"]]
