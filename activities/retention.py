"""What the database keeps of runs long over, pruned on an operator's word (`starter.py prune`).

Nothing else deletes it: every run's live output (`run_events`, its streamed text and tool
calls) and its transcript (`run_messages`, `run_context`) stay for good otherwise, and grow
with every run. A run is pruned whole, table by table, once nothing of it was written there
for `older_than`, so a run still writing, however long, keeps everything; and a run still
going that writes nothing meanwhile (parked for days on an approval) is kept whole by its
caller's `keep` (its transcript deleted under it, the run's next step would read none of it:
`reactive_temporal.api.control.runs_still_going` asks Temporal which are going). Debriefs,
the lessons still live and chat sessions stay: they are what agents and people read later.
Expired lessons go too (they are never read again). Runs go a batch at a time, each batch
its own transaction (`PRUNE_BATCH`), and expired lessons too (`lesson_store.PURGE_BATCH`): a
prune interrupted keeps what it deleted.

A pruned run can no longer be watched from the start, nor rerun (`rerun` resets it to a
failed step, which reads its transcript back).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import timedelta

from psycopg import sql

from activities.lesson_store import LessonStore
from activities.store import Store

PRUNED_TABLES = ("run_events", "run_messages", "run_context")
MIN_AGE = timedelta(days=1)
"""Runs idle for less than this are never pruned (a slip of the finger keeps today's runs)."""

BATCH_RUNS = 500
"""Runs looked at by one statement, which deletes the rows of those among them idle long
enough, in a transaction of its own."""

PRUNE_BATCH = """
WITH batch AS (
    SELECT run_id, max(created_at) AS last_written FROM {table}
    WHERE run_id > %(after)s GROUP BY run_id ORDER BY run_id LIMIT %(runs)s
), gone AS (
    DELETE FROM {table}
    WHERE run_id = ANY(ARRAY(
        SELECT run_id FROM batch
        WHERE last_written < %(cutoff)s AND NOT run_id = ANY(%(keep)s::text[])
    ))
    RETURNING 1
)
SELECT (SELECT max(run_id) FROM batch), (SELECT count(*) FROM gone)
"""
"""The next BATCH_RUNS runs of a table after `after`, in its primary key's order, and the
rows of those written last before `cutoff` deleted: one bounded transaction. The DELETE gets
its runs as an array, so it looks each up by primary key (an `IN (SELECT …)` was planned as a
scan of the whole table where a batch was a large part of it).

It was one statement per table: a scan of the whole table grouped by run, then every idle
run's rows deleted in one transaction (at six months, 25 M of 30 M `run_events` rows in one
transaction, its WAL and its locks with it; bench/data_scale.py). The walk in key order
reads the whole table still, once per prune, but a batch at a time, each committed before
the next; no index on `created_at` serves it instead, because each index on these tables is
paid by every step of every run (the hot path), and prune is an operator's rare command.
A run with many rows makes its batch as large as it is: runs are what a batch counts.
Run ids are never empty, so the walk starts after ''."""


async def prune(
    store: Store,
    older_than: timedelta,
    *,
    keep: Collection[str] = (),
    batch_runs: int = BATCH_RUNS,
) -> dict[str, int]:
    """Delete the rows of runs idle in each table for `older_than`, but those of the runs in
    `keep` (still going), `batch_runs` runs looked at a statement (each its own transaction:
    an interrupted prune keeps what it deleted), and expired lessons; returns the rows
    deleted by table."""
    if older_than < MIN_AGE:
        raise ValueError(f"older_than must be at least {MIN_AGE.days} day, not {older_than}")
    deleted: dict[str, int] = {}
    async with store.pool.connection() as conn:
        cur = await conn.execute("SELECT now() - %s", (older_than,))
        row = await cur.fetchone()
        assert row is not None
        cutoff = row[0]  # one instant for every batch of every table
        for table in PRUNED_TABLES:
            statement = sql.SQL(PRUNE_BATCH).format(table=sql.Identifier(table))
            deleted[table], after = 0, ""
            while True:
                cur = await conn.execute(
                    statement,
                    {"after": after, "runs": batch_runs, "cutoff": cutoff, "keep": list(keep)},
                )
                row = await cur.fetchone()
                assert row is not None
                last, gone = row
                if last is None:
                    break
                deleted[table] += gone
                after = last
    deleted["agent_lessons"] = await LessonStore(store).purge_expired()
    return deleted
