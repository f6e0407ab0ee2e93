"""The product's statements on tables grown as production grows them: what each reads grows
with what it returns, not with the table.

Each test runs product code (a prune, a watcher reading a long run, a run's lessons chosen)
against a schema of its own, filled by `generate_series` with thousands of runs over two
months, captures the statements that code sends (`statements_sent`), and has Postgres
EXPLAIN each with its real parameters: a plan, not a timing, so a loaded machine cannot fail
it. Tables here are small next to production's (bench/data_scale.py measures those), but
enough that Postgres plans as it would there.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from activities.lesson_store import LessonStore
from activities.retention import BATCH_RUNS, PRUNED_TABLES, prune
from activities.session_store import PAGE_READ_ROWS, SessionStore
from activities.store import Store
from reactive_temporal.api.live_feed import BATCH
from reactive_temporal.api.watching import stream_events
from tests.support.plans import (
    Sent,
    nodes,
    plan,
    reading,
    rows_read,
    scalar,
    scans,
    scratch_store,
)

pytestmark = pytest.mark.workflow

RUNS = 2_000
"""Runs over DAYS days, a third of them the busy agent's, the rest 50 agents'."""
DAYS = 60
LONG_RUN = "run-agent-busy-000000long"
LONG_RUN_EVENTS = 5_000
BUSY = "agent-busy"
TASK = "Check the billing report for a refund spike"
PRUNE_AGE = timedelta(days=30, hours=1)
"""Half-way between two runs' starts (43 minutes apart): no run is idle for about that
long, whatever the seconds between loading and pruning."""

_LOAD = f"""
CREATE TABLE scale_runs AS
SELECT i, 'run-' || agent || '-' || substr(md5(i::text), 1, 12) AS run_id, agent AS agent_id,
       now() - interval '{DAYS} days' + i * interval '{DAYS} days' / {RUNS} AS started_at
FROM generate_series(0, {RUNS} - 1) AS i,
     LATERAL (SELECT CASE WHEN i % 3 = 0 THEN '{BUSY}' ELSE 'agent-' || i % 50 END AS agent) a;
INSERT INTO run_events (run_id, "offset", type, step, position, data, created_at)
SELECT run_id, o, 'iteration', o, 0, jsonb_build_object('iteration', o),
       started_at + o * interval '1 second'
FROM scale_runs, generate_series(0, 19) AS o ORDER BY i, o;
INSERT INTO run_events (run_id, "offset", type, step, position, data, created_at)
SELECT '{LONG_RUN}', o, 'iteration', o, 0, jsonb_build_object('iteration', o),
       now() - interval '45 days' + o * interval '1 second'
FROM generate_series(0, {LONG_RUN_EVENTS} - 1) AS o;
INSERT INTO run_messages (run_id, seq, role, content, created_at)
SELECT run_id, s, 'user', repeat('lorem ipsum ', 20), started_at + s * interval '1 second'
FROM scale_runs, generate_series(0, 9) AS s ORDER BY i, s;
INSERT INTO run_context (run_id, seq, prompt_tokens, created_at)
SELECT run_id, s, 1000, started_at + s * interval '1 second'
FROM scale_runs, generate_series(0, 4) AS s ORDER BY i, s;
INSERT INTO agent_lessons (run_id, position, agent_id, lesson, created_at, expires_at)
SELECT run_id, p, agent_id,
       'lesson ' || i || '.' || p || CASE WHEN p = 0 THEN ' check the billing report first'
                                     ELSE ' a refund needs its invoice' END,
       started_at, started_at + interval '10 days'
FROM scale_runs, generate_series(0, 2) AS p ORDER BY i, p;
ANALYZE
"""


@pytest.fixture(scope="module")
async def grown(database_url: str) -> AsyncIterator[Store]:
    """The grown tables, read only by the tests that share them."""
    async with scratch_store(database_url, _LOAD) as store:
        yield store


async def test_a_runs_lessons_are_chosen_among_its_agents_live_ones_only(
    grown: Store, statements_sent: Sent
):
    """A run with memory ranks its agent's live lessons as it starts. Through the index on
    (agent_id, created_at) it read every lesson the agent was ever taught, expired ones too,
    which nothing deletes unless an operator prunes: at six months, six times as many."""
    run_id = await scalar(grown, "SELECT run_id FROM scale_runs WHERE i = %s", RUNS // 2 - 1)
    statements_sent.clear()
    chosen = await LessonStore(grown).relevant(BUSY, TASK, limit=5, exclude_run=run_id)
    [(query, params)] = reading(statements_sent, "agent_lessons")
    assert len(chosen) == 5
    live = await scalar(
        grown, "SELECT count(*) FROM agent_lessons WHERE agent_id = %s AND expires_at > now()", BUSY
    )
    everything = await scalar(grown, "SELECT count(*) FROM agent_lessons WHERE agent_id = %s", BUSY)
    assert everything > 4 * live  # the grown table holds what production's would
    read = rows_read(await plan(grown, query, params, analyze=True), "agent_lessons")
    assert read <= live, f"read {read} lessons for the agent's {live} live ones"


async def test_a_watcher_reads_a_long_run_a_batch_at_a_time(grown: Store, statements_sent: Sent):
    """A watcher catching up on a long run reads it BATCH events a statement. Each read was
    `"offset" >= n … LIMIT BATCH`, which Postgres answered by reading every event from n to
    the run's end and sorting them: a run read from its start read N²/2·BATCH rows."""
    url = grown.pool.conninfo
    assert isinstance(url, str)
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    done.set_result(None)
    start = LONG_RUN_EVENTS // 2
    statements_sent.clear()
    offsets = [e.offset async for e in stream_events(url, LONG_RUN, until=done, from_offset=start)]
    assert offsets == list(range(start, LONG_RUN_EVENTS))  # every event, once, in order
    batches = reading(list(statements_sent), "run_events")
    assert len(batches) >= (LONG_RUN_EVENTS - start) // BATCH
    for query, params in batches:
        read = rows_read(await plan(grown, query, params, analyze=True), "run_events")
        assert read <= BATCH, f"a batch from offset {params[1]} read {read} events"


async def test_prune_deletes_a_batch_of_runs_a_statement_through_the_primary_keys(
    database_url: str, statements_sent: Sent
):
    """Prune deleted every idle run's rows of a table in one statement, after grouping the
    whole table by run (a sequential scan): at six months, 25 M rows in one transaction. Now
    each statement reads the next BATCH_RUNS runs by primary key and deletes those idle among
    them; what it leaves is exactly the runs written to since the cut-off."""
    async with scratch_store(database_url, _LOAD) as store:
        async with store.pool.connection() as conn:
            # every DELETE on run_events logs how many runs it took rows of
            await conn.execute(
                "CREATE TABLE deletes (runs INTEGER NOT NULL);"
                " CREATE FUNCTION log_deletes() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                " INSERT INTO deletes SELECT count(DISTINCT run_id) FROM gone; RETURN NULL;"
                " END $$;"
                " CREATE TRIGGER log_deletes AFTER DELETE ON run_events"
                " REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION log_deletes()"
            )
        kept_query = (
            "SELECT array_agg(run_id ORDER BY run_id) FROM (SELECT run_id FROM {} GROUP BY run_id"
            " HAVING max(created_at) >= now() - %s) AS kept"
        )
        kept = {t: await scalar(store, kept_query.format(t), PRUNE_AGE) for t in PRUNED_TABLES}
        idle = await scalar(store, "SELECT count(DISTINCT run_id) FROM run_events")
        idle -= len(kept["run_events"])
        assert idle > BATCH_RUNS and LONG_RUN not in kept["run_events"]
        statements_sent.clear()

        deleted = await prune(store, PRUNE_AGE)

        sent = list(statements_sent)
        assert deleted["run_events"] > idle * 20
        for table in PRUNED_TABLES:
            assert await scalar(store, kept_query.format(table), PRUNE_AGE) == kept[table], table
            left = await scalar(store, f"SELECT count(DISTINCT run_id) FROM {table}")
            assert left == len(kept[table]), table
        batches = await scalar(store, "SELECT array_agg(runs) FROM deletes")
        assert sum(batches) == idle and max(batches) <= BATCH_RUNS, batches
        for query, params in reading(sent, "run_events"):
            root = await plan(store, query, params, analyze=False)
            assert "Seq Scan" not in scans(root, "run_events"), scans(root, "run_events")
            assert any(n.get("Index Name") == "run_events_pkey" for n in nodes(root))


async def test_a_page_of_a_long_session_reads_about_the_page_not_the_rest_of_the_session(
    grown: Store, statements_sent: Sent
):
    """`session history` pages through a saved session a megabyte at a time: each page read
    every message from its offset to the session's end and cut it in Python, so paging
    through a session of N messages read about N²/2 rows."""
    agent, session = BUSY, f"long-{uuid.uuid4().hex[:6]}"
    messages = 5_000
    async with grown.pool.connection() as conn:
        await conn.execute(
            "INSERT INTO chat_messages (agent_id, session_id, position, role, content, sent_at)"
            " SELECT %s, %s, p, 'user', repeat('a question ', 90), now()"
            " FROM generate_series(0, %s - 1) AS p",
            (agent, session, messages),
        )
        await conn.execute("ANALYZE chat_messages")
    statements_sent.clear()
    page, first, total = await SessionStore(grown).load(
        agent, session, offset=1_000, max_bytes=100_000
    )
    assert (first, total) == (1_000, messages)
    assert 90 <= len(page) <= 110  # about 1 KB each
    read = 0
    for query, params in reading(statements_sent, "chat_messages"):
        read += rows_read(await plan(grown, query, params, analyze=True), "chat_messages")
    assert read <= len(page) + 2 * PAGE_READ_ROWS, f"read {read} messages for a page of {len(page)}"
