"""What the database keeps of runs long over, pruned on an operator's word (`starter.py prune`).

Nothing else deletes it: every run's live output (`run_events`, its streamed text and tool
calls) and its transcript (`run_messages`, `run_context`) stay for good otherwise, and grow
with every run. A run is pruned whole, table by table, once nothing of it was written there
for `older_than`, so a run still going, however long, keeps everything. Debriefs, the
lessons still live and chat sessions stay: they are what agents and people read later.
Expired lessons go too (they are never read again).

A pruned run can no longer be watched from the start, nor rerun (`rerun` resets it to a
failed step, which reads its transcript back).
"""

from __future__ import annotations

from datetime import timedelta

from psycopg import sql

from activities.lesson_store import LessonStore
from activities.store import Store

PRUNED_TABLES = ("run_events", "run_messages", "run_context")
MIN_AGE = timedelta(days=1)
"""Runs idle for less than this are never pruned (a slip of the finger keeps today's runs)."""


async def prune(store: Store, older_than: timedelta) -> dict[str, int]:
    """Delete the rows of runs idle in each table for `older_than`, and expired lessons;
    returns the rows deleted by table."""
    if older_than < MIN_AGE:
        raise ValueError(f"older_than must be at least {MIN_AGE.days} day, not {older_than}")
    deleted: dict[str, int] = {}
    async with store.pool.connection() as conn:
        for table in PRUNED_TABLES:
            cur = await conn.execute(
                sql.SQL(
                    "DELETE FROM {table} WHERE run_id IN (SELECT run_id FROM {table}"
                    " GROUP BY run_id HAVING max(created_at) < now() - %s)"
                ).format(table=sql.Identifier(table)),
                (older_than,),
            )
            deleted[table] = cur.rowcount
    deleted["agent_lessons"] = await LessonStore(store).purge_expired()
    return deleted
