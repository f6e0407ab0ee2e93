"""The agent's lessons in Postgres: chosen by relevance for a run, listed and deleted by an
operator.

A lesson comes from a run's debrief (`DebriefStore.save` writes them with their expiry);
here they are read. Relevance is Postgres full-text search (no new service): the task's
words, stemmed, any of them matching, ranked by `ts_rank`, newest first among equals,
among the agent's newest `RANKED_LESSONS` live lessons that match (it says why).
Expired lessons are never chosen nor listed; they are purged a batch at a time when lessons
are listed, and all of them by `prune` (`PURGE_BATCH`). A lesson is read without credentials
(`activities/memory_redaction.py`): one stored before they were kept out reaches no prompt
and no listing with its key.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import dict_row

from activities.memory_redaction import redacted
from activities.statements import Rows, pending_rows
from activities.store import Store
from reactive_temporal.contracts.debrief import StoredLesson
from reactive_temporal.memory import LessonNote, relevance_query_text

_LIVE = "(expires_at IS NULL OR expires_at > now())"
_COLUMNS = "id, agent_id, lesson, run_id, created_at, expires_at"

RANKED_LESSONS = 500
"""A run's lessons are the most relevant among at most this many of its agent's live lessons
that match the task, the newest (latest to expire): every match when the agent has no more.

Ranking by `ts_rank` has no index (a GIN index finds matches, not the best ones), so ranking
every match read all the agent's live matches at each run's start: the busiest agent's
30 days of lessons, 4,000 rows at six months (bench/data_scale.py). A bound on the rows read
is a bound on the candidates; recency is the one order an index gives them in. So an agent
with more matches than this has its older ones passed over, however relevant: the bench's
busiest agent at 20,000 runs (1,600 matches) was given 3 of the 5 it was given before.
Copies of a text each count in the window, as rows."""

_RELEVANT = (
    # the task's stemmed words, any of them. NOT MATERIALIZED: a CTE read twice is computed
    # apart, and the planner, blind to the words, planned for few matches (a bitmap of every
    # live match, then a sort) where common words match most lessons and walking the newest
    # until the window is full reads about the window
    "WITH q AS NOT MATERIALIZED (SELECT NULLIF(replace(plainto_tsquery('english', %(task)s)"
    "::text, ' & ', ' | '), '')::tsquery AS words),"
    # the newest RANKED_LESSONS matches: lessons that never expire, then the live ones by
    # expiry (agent_id, expires_at), so the walk stops at the window and never reaches the
    # expired ones; two ranges, because an index range cannot be "NULL or later than now"
    " candidates AS ((SELECT lesson, run_id, created_at, position, search, words"
    " FROM agent_lessons, q WHERE agent_id = %(agent)s AND expires_at IS NULL"
    " AND run_id <> %(exclude)s AND words IS NOT NULL AND search @@ words"
    " ORDER BY created_at DESC, position LIMIT %(window)s)"
    " UNION ALL (SELECT lesson, run_id, created_at, position, search, words"
    " FROM agent_lessons, q WHERE agent_id = %(agent)s AND expires_at > now()"
    " AND run_id <> %(exclude)s AND words IS NOT NULL AND search @@ words"
    " ORDER BY expires_at DESC, created_at DESC, position LIMIT %(window)s)"
    " LIMIT %(window)s),"
    # each text once (its newest copy) before the limit: a lesson many runs learned filled
    # the limit with copies of itself and hid every other
    " matched AS (SELECT DISTINCT ON (lesson) lesson, run_id, created_at, position,"
    " ts_rank(search, words) AS rank FROM candidates ORDER BY lesson, created_at DESC, position)"
    " SELECT lesson, run_id, created_at FROM matched"
    " ORDER BY rank DESC, created_at DESC, position LIMIT %(limit)s"
)

PURGE_BATCH = 1_000
"""Expired lessons deleted by one statement, in a transaction of its own.

The purge was one statement over the whole table (a sequential scan, every expired lesson
deleted in one transaction): at six months, 83,000 of 100,000 lessons, 50 ms and their locks
and WAL in one go before an operator's `lessons` listing (bench/data_scale.py). A listing
now purges one batch, `prune` all of them a batch at a time; the index on expires_at
(migration 14) finds a batch without reading the live ones."""

_PURGE = (
    "DELETE FROM agent_lessons WHERE id = ANY(ARRAY(SELECT id FROM agent_lessons"
    " WHERE coalesce(expires_at, 'infinity') <= now()"
    f" ORDER BY coalesce(expires_at, 'infinity') LIMIT {PURGE_BATCH:d}))"
)
"""The first PURGE_BATCH expired lessons, deleted by id (`NOT {_LIVE}`: NULL never expires).
By the expression migration 14 indexes: an index on expires_at itself drew `_RELEVANT` to
walk every agent's live lessons by expiry for one agent's (all three agents' at 2,000 runs,
tests/workflow/test_query_plans.py). The batch is in the text, not a parameter, so the plan
psycopg prepares for a statement sent often knows it."""


class LessonStore:
    def __init__(self, store: Store) -> None:
        self.pool = store.pool

    async def relevant(
        self, agent_id: str, task: str, *, limit: int, exclude_run: str | None = None
    ) -> list[LessonNote]:
        """The agent's live lessons that share words with the task, most relevant first."""
        async with self.pool.connection() as conn:
            reading = await self.begin_relevant(
                conn, agent_id, task, limit=limit, exclude_run=exclude_run
            )
            return await reading()

    async def begin_relevant(
        self,
        conn: AsyncConnection[Any],
        agent_id: str,
        task: str,
        *,
        limit: int,
        exclude_run: str | None = None,
    ) -> Callable[[], Awaitable[list[LessonNote]]]:
        """`relevant`'s query sent on `conn`; what it returns reads the answer
        (`pending_rows`: on a pipelined connection, with the other queries sent in it)."""
        return await pending_rows(
            conn,
            _RELEVANT,
            {
                "task": relevance_query_text(task),
                "agent": agent_id,
                "exclude": exclude_run or "",
                "window": RANKED_LESSONS,
                "limit": limit,
            },
            _notes,
            # never prepared: psycopg prepares a statement after 5 executions on a
            # connection, and Postgres may plan a prepared one, after 5 executions, once for
            # any words, agent and window (a generic plan). Blind to the words, that plan
            # read every live lesson of the agent, or more: at 20,000 runs the busy agent's
            # run read 9,700 lessons in 22 ms from a worker's 11th run on a connection, where
            # the plan for its words read 2,000 in 3 ms (the statement before the window) or
            # 600 in 1.4 (this one). Planned each time, it costs a plan each time: 0.3 ms.
            prepare=False,
        )

    async def listed(
        self, agent_id: str | None = None, *, limit: int | None = None
    ) -> list[StoredLesson]:
        """Live lessons, newest first (the latest `limit`); every agent's when `agent_id` is
        None. Unlimited, 200,000 of them were read into 172 MB."""
        await self.purge_expired(batches=1)
        where, params = (f"WHERE {_LIVE}", ()) if agent_id is None else (
            f"WHERE agent_id = %s AND {_LIVE}", (agent_id,)
        )  # fmt: skip
        async with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                f"SELECT {_COLUMNS} FROM agent_lessons {where}"  # type: ignore[arg-type]
                " ORDER BY created_at DESC, position LIMIT %s",
                (*params, limit),
            )
            return [_stored(r) for r in await cur.fetchall()]

    async def delete(self, ids: Sequence[int]) -> list[StoredLesson]:
        """Delete these lessons; returns the ones that existed."""
        return await self._delete("WHERE id = ANY(%s)", (list(ids),))

    async def delete_all(self, agent_id: str) -> list[StoredLesson]:
        """Delete every lesson of one agent."""
        return await self._delete("WHERE agent_id = %s", (agent_id,))

    async def purge_expired(self, *, batches: int | None = None) -> int:
        """Delete expired lessons, `PURGE_BATCH` a statement, each its own transaction, the
        first expired first: at most `batches` statements (until none are left when None).
        Returns how many were deleted."""
        deleted = 0
        async with self.pool.connection() as conn:
            for _ in itertools.count() if batches is None else range(batches):
                cur = await conn.execute(_PURGE)
                deleted += cur.rowcount
                if cur.rowcount < PURGE_BATCH:
                    break
        return deleted

    async def _delete(self, where: str, params: tuple[Any, ...]) -> list[StoredLesson]:
        async with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                f"DELETE FROM agent_lessons {where} RETURNING {_COLUMNS}",  # type: ignore[arg-type]
                params,
            )
            deleted = [_stored(r) for r in await cur.fetchall()]
        return sorted(deleted, key=lambda lesson: lesson.id)


def _notes(rows: Rows) -> list[LessonNote]:
    return [LessonNote(_lesson(r), r["run_id"], r["created_at"]) for r in rows]


def _stored(row: dict[str, Any]) -> StoredLesson:
    return StoredLesson.model_validate({**row, "lesson": _lesson(row)})


def _lesson(row: dict[str, Any]) -> str:
    """The row's lesson without credentials."""
    return redacted(str(row["lesson"]), where="lessons", owner=f"run {row['run_id']}")
