"""The lesson statements as they were before 2026-12-04's afternoon (`bench.data_scale`'s
"before"), and a run's lessons read as a worker reads them: again and again on a connection.

Before: a run's lessons ranked every live match of its agent, in a statement psycopg
prepared (so, from a connection's 11th run, planned by Postgres once for any words); the
purge of expired lessons was one statement over the whole table.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import timedelta
from typing import Any, cast
from unittest import mock

from psycopg import AsyncConnection, sql

from activities.lesson_store import LessonStore, _notes
from activities.retention import PRUNED_TABLES
from activities.statements import pending_rows
from activities.store import Store
from bench._scale_data import TASK
from bench._stack import print_table
from reactive_temporal.memory import LessonNote, relevance_query_text

RELEVANT_BEFORE = (
    "WITH q AS (SELECT NULLIF(replace(plainto_tsquery('english', %s)::text,"
    " ' & ', ' | '), '') AS words),"
    " matched AS (SELECT DISTINCT ON (lesson) lesson, run_id, created_at, position,"
    " ts_rank(search, q.words::tsquery) AS rank FROM agent_lessons, q"
    " WHERE agent_id = %s AND (expires_at IS NULL OR expires_at > now()) AND run_id <> %s"
    " AND q.words IS NOT NULL AND search @@ q.words::tsquery"
    " ORDER BY lesson, created_at DESC, position)"
    " SELECT lesson, run_id, created_at FROM matched"
    " ORDER BY rank DESC, created_at DESC, position LIMIT %s"
)
PRUNE_AGE = timedelta(days=30)
PRUNE_BEFORE = (
    "DELETE FROM {table} WHERE run_id IN (SELECT run_id FROM {table}"
    " GROUP BY run_id HAVING max(created_at) < now() - %s)"
)
"""`prune`'s statement per table as it was."""
PURGE_BEFORE = "DELETE FROM agent_lessons WHERE NOT (expires_at IS NULL OR expires_at > now())"


async def _begin_relevant_before(
    self: LessonStore,
    conn: AsyncConnection[Any],
    agent_id: str,
    task: str,
    *,
    limit: int,
    exclude_run: str | None = None,
) -> Callable[[], Awaitable[list[LessonNote]]]:
    params = (relevance_query_text(task), agent_id, exclude_run or "", limit)
    return await pending_rows(conn, RELEVANT_BEFORE, params, _notes)


async def _purge_before(self: LessonStore, *, batches: int | None = None) -> int:
    async with self.pool.connection() as conn:
        cur = await conn.execute(PURGE_BEFORE)
        return cur.rowcount


@contextlib.contextmanager
def lessons_before() -> Iterator[None]:
    """LessonStore sending the statements it sent before."""
    with (
        mock.patch.object(LessonStore, "begin_relevant", _begin_relevant_before),
        mock.patch.object(LessonStore, "purge_expired", _purge_before),
    ):
        yield


class _OneConnection:
    def __init__(self, conn: AsyncConnection[Any]) -> None:
        self.conn = conn

    @contextlib.asynccontextmanager
    async def connection(self) -> Any:
        yield self.conn


async def lessons_again(
    url: str, agent: str, task: str, exclude_run: str, *, before: bool, times: int = 20
) -> tuple[float, float, list[LessonNote]]:
    """`LessonStore.relevant` `times` times on one connection (as a worker's pooled one sends
    it at each run's start): the median ms of the first half and of the second, and the
    lessons chosen."""
    took: list[float] = []
    chosen: list[LessonNote] = []
    with lessons_before() if before else contextlib.nullcontext():
        async with await AsyncConnection.connect(url, autocommit=True) as conn:
            lessons = LessonStore(Store(cast(Any, _OneConnection(conn))))
            for _ in range(times):
                start = time.perf_counter()
                chosen = await lessons.relevant(agent, task, limit=5, exclude_run=exclude_run)
                took.append((time.perf_counter() - start) * 1000)
    half = times // 2
    return statistics.median(took[:half]), statistics.median(took[half:]), chosen


async def prune_before(conn: AsyncConnection[Any]) -> tuple[dict[str, int], float]:
    """The old prune, one statement a table, in one transaction rolled back."""
    deleted: dict[str, int] = {}
    start = time.perf_counter()
    async with conn.transaction(force_rollback=True):
        for table in PRUNED_TABLES:
            cur = await conn.execute(
                sql.SQL(PRUNE_BEFORE).format(table=sql.Identifier(table)), (PRUNE_AGE,)
            )
            deleted[table] = cur.rowcount
        deleted["agent_lessons"] = (await conn.execute(PURGE_BEFORE)).rowcount
    return deleted, time.perf_counter() - start


async def lessons_sent_again(url: str, agent: str, run: str) -> None:
    """A run's lessons as a worker reads them, 20 times on one connection (psycopg prepares a
    statement after 5, and Postgres may plan a prepared one for any parameters after 5 more),
    before (the old statement on the schema as it is) and after; and the lessons chosen."""
    rows = []
    chosen = {}
    for when in ("before", "after"):
        first, last, chosen[when] = await lessons_again(
            url, agent, TASK, run, before=when == "before"
        )
        rows.append([when, f"{first:.2f}", f"{last:.2f}"])
    same = len({n.run_id for n in chosen["before"]} & {n.run_id for n in chosen["after"]})
    print("\n### A run's lessons, 20 runs' reads on one connection (ms, wall, on the client)\n")
    print_table(["", "reads 1-10, median", "reads 11-20, median"], rows)
    print(f"\nLessons chosen: {same} of {len(chosen['before'])} the same before and after.")
