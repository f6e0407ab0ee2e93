"""The agent's lessons in Postgres: chosen by relevance for a run, listed and deleted by an
operator.

A lesson comes from a run's debrief (`DebriefStore.save` writes them with their expiry);
here they are read. Relevance is Postgres full-text search (no new service): the task's
words, stemmed, any of them matching, ranked by `ts_rank`, newest first among equals.
Expired lessons are never chosen nor listed, and are purged when lessons are listed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import dict_row

from activities.store import Rows, Store, pending_rows
from reactive_temporal.contracts.debrief import StoredLesson
from reactive_temporal.memory import LessonNote, relevance_query_text

_LIVE = "(expires_at IS NULL OR expires_at > now())"
_COLUMNS = "id, agent_id, lesson, run_id, created_at, expires_at"


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
            # each text once (its newest copy) before the limit: a lesson many runs learned
            # filled the limit with copies of itself and hid every other
            "WITH q AS (SELECT NULLIF(replace(plainto_tsquery('english', %s)::text,"
            " ' & ', ' | '), '') AS words),"
            " matched AS (SELECT DISTINCT ON (lesson) lesson, run_id, created_at, position,"
            " ts_rank(search, q.words::tsquery) AS rank FROM agent_lessons, q"
            f" WHERE agent_id = %s AND {_LIVE} AND run_id <> %s"
            " AND q.words IS NOT NULL AND search @@ q.words::tsquery"
            " ORDER BY lesson, created_at DESC, position)"
            " SELECT lesson, run_id, created_at FROM matched"
            " ORDER BY rank DESC, created_at DESC, position LIMIT %s",
            (relevance_query_text(task), agent_id, exclude_run or "", limit),
            _notes,
        )

    async def listed(
        self, agent_id: str | None = None, *, limit: int | None = None
    ) -> list[StoredLesson]:
        """Live lessons, newest first (the latest `limit`); every agent's when `agent_id` is
        None. Unlimited, 200,000 of them were read into 172 MB."""
        await self.purge_expired()
        where, params = (f"WHERE {_LIVE}", ()) if agent_id is None else (
            f"WHERE agent_id = %s AND {_LIVE}", (agent_id,)
        )  # fmt: skip
        async with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                f"SELECT {_COLUMNS} FROM agent_lessons {where}"  # type: ignore[arg-type]
                " ORDER BY created_at DESC, position LIMIT %s",
                (*params, limit),
            )
            return [StoredLesson.model_validate(r) for r in await cur.fetchall()]

    async def delete(self, ids: Sequence[int]) -> list[StoredLesson]:
        """Delete these lessons; returns the ones that existed."""
        return await self._delete("WHERE id = ANY(%s)", (list(ids),))

    async def delete_all(self, agent_id: str) -> list[StoredLesson]:
        """Delete every lesson of one agent."""
        return await self._delete("WHERE agent_id = %s", (agent_id,))

    async def purge_expired(self) -> int:
        async with self.pool.connection() as conn:
            cur = await conn.execute(f"DELETE FROM agent_lessons WHERE NOT {_LIVE}")
            return cur.rowcount

    async def _delete(self, where: str, params: tuple[Any, ...]) -> list[StoredLesson]:
        async with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                f"DELETE FROM agent_lessons {where} RETURNING {_COLUMNS}",  # type: ignore[arg-type]
                params,
            )
            deleted = [StoredLesson.model_validate(r) for r in await cur.fetchall()]
        return sorted(deleted, key=lambda lesson: lesson.id)


def _notes(rows: Rows) -> list[LessonNote]:
    return [LessonNote(r["lesson"], r["run_id"], r["created_at"]) for r in rows]
