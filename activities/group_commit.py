"""Writes that arrive while one is being written go out together, in the next (a group commit).

On a busy worker every write holds a pool connection for its round trip, and that round trip
waits for the event loop as much as for Postgres: at a thousand runs, their writes queued for
the pool's connections (bench/README.md). Written together, a burst of writes costs one
checkout and one round trip. A lone write still goes out at once, and no write waits for a
timer: only for the write in flight, which it would have queued behind anyway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from activities.store import is_outage

T = TypeVar("T")


class GroupCommit(Generic[T]):
    """Items written by `write(batch)`, together when they come together; each `submit`
    returns once its own item is written, or raises what failed it.

    When a batch fails, Postgres being away fails every item in it (each caller waits the
    outage out its own way); anything else, the items are written again one by one, so one
    bad item costs only itself. `write` must leave nothing of a batch that failed (one
    transaction), or be safe to repeat for what it wrote.
    """

    def __init__(
        self,
        write: Callable[[list[T]], Awaitable[None]],
        *,
        max_batch: int,
        size: Callable[[T], int] | None = None,
        max_size: int = 0,
    ) -> None:
        """`max_batch` items at most in one write, and with `size`, items of at most
        `max_size` in all (an item bigger than that goes alone)."""
        self.write = write
        self.max_batch = max_batch
        self.size = size
        self.max_size = max_size
        self.queued: list[tuple[T, asyncio.Future[None]]] = []
        self.writing: asyncio.Task[None] | None = None

    async def submit(self, item: T) -> None:
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self.queued.append((item, done))
        if self.writing is None or self.writing.done() or self.writing.get_loop() is not loop:
            self.writing = asyncio.create_task(self._write_queued())
            self.writing.add_done_callback(self._stopped)
        await done

    def _stopped(self, writing: asyncio.Task[None]) -> None:
        """The writer was cancelled (the worker stops): what it had not taken yet is not
        written either, and its waiters are told so."""
        if writing.cancelled():
            queued, self.queued = self.queued, []
            for _, done in queued:
                done.cancel()

    async def _write_queued(self) -> None:
        while self.queued:
            batch = self._next_batch()
            try:
                await self._write(batch)
            except Exception as err:
                if len(batch) == 1 or is_outage(err):
                    for entry in batch:
                        _fail(entry, err)
                    continue
                for entry in batch:  # one bad item must not cost the others theirs
                    try:
                        await self._write([entry])
                    except Exception as its_own:
                        _fail(entry, its_own)
            except BaseException:  # the writer itself was cancelled (the worker stops)
                for _, done in batch:
                    done.cancel()
                raise

    def _next_batch(self) -> list[tuple[T, asyncio.Future[None]]]:
        taken = min(len(self.queued), self.max_batch)
        if self.size is not None:
            total = 0
            for i, (item, _) in enumerate(self.queued[:taken]):
                total += self.size(item)
                if total > self.max_size and i > 0:
                    taken = i
                    break
        batch = self.queued[:taken]
        del self.queued[:taken]
        return batch

    async def _write(self, batch: list[tuple[T, asyncio.Future[None]]]) -> None:
        await self.write([item for item, _ in batch])
        for _, done in batch:
            if not done.done():
                done.set_result(None)


def _fail(entry: tuple[object, asyncio.Future[None]], err: Exception) -> None:
    if not entry[1].done():
        entry[1].set_exception(err)
