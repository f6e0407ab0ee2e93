"""A run's lessons chosen, and expired ones purged, on agents with thousands of lessons: what
each statement reads grows with what it returns (a window, a batch), not with the agent's
lessons, and the lessons chosen are the ones chosen before whenever the window holds every
match.

As tests/workflow/test_query_plans.py does, each test runs product code against a schema of
its own filled by `generate_series`, and has Postgres EXPLAIN the statements the code sent;
one also reads the plans Postgres ran (auto_explain), since a statement a worker sends over
and over is prepared and may then be planned once for all its parameters.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import psycopg
import pytest

from activities.lesson_store import PURGE_BATCH, RANKED_LESSONS, LessonStore
from activities.retention import prune
from activities.store import Store
from tests.support.plans import (
    Sent,
    executed_plans,
    nodes,
    one_connection,
    plan,
    reading,
    rows_read,
    scalar,
    scans,
    scratch_store,
)

pytestmark = pytest.mark.workflow


AGENTS = 302
"""MANY, FEW and 300 agents with a few lessons each: a plan made for any agent expects few."""
MANY = "agent-many"
"""A lesson-rich agent: two lessons every 12 minutes for 60 days, half of them live."""
FEW = "agent-few"
"""Two lessons every 3 hours for 180 days: 2,880 lessons, 480 live (the window holds them),
some of which never expire, some copies of earlier ones."""
VOCABULARY = (
    "billing invoice refund payment report summary deploy rollback schema index query latency"
    " timeout retry error trace alert incident outage endpoint token budget prompt context"
    " search fetch branch commit merge review test flaky build docker cluster memory disk"
    " network certificate proxy cache vacuum backup replica quota webhook cron queue kafka"
).split()
COMMON_TASK = "Check the billing report for a refund spike"
TASKS = [
    COMMON_TASK,
    "Why did the payment webhook time out after the deploy?",
    "kafka queue replica quota",  # the rarest words
    "Summarize the incident: outage, alert, rollback, retry, error trace, latency",
    "the and of",  # stop words only
    "nothing here matches",
]

_TEXT = """(SELECT string_agg(({words}::text[])[1 + floor(power((hashint4({seed} * 31 + k)
    & 2147483647) / 2147483647.0, 2) * {n})::int], ' ')
    FROM generate_series(1, 4 + (hashint4({seed}) & 7)) AS k)"""
"""4 to 11 words of the vocabulary for `seed`, the first words the commonest (repeated words
rank higher: ranks vary)."""

_LOAD = """
INSERT INTO agent_lessons (run_id, position, agent_id, lesson, created_at, expires_at)
SELECT 'run-' || a.agent || '-' || i, p, a.agent,
       CASE WHEN i %% 9 = 0 AND i >= 90 THEN {copy} ELSE {text} END,
       now() - i * a.every,
       CASE WHEN a.agent = '{few}' AND i %% 97 = 0 AND p = 0 THEN NULL
            ELSE now() - i * a.every + interval '30 days' END
FROM (VALUES ('{many}', interval '12 minutes', 7200), ('{few}', interval '3 hours', 1440)
      UNION ALL SELECT 'agent-' || q, interval '3 days', 20 FROM generate_series(1, 300) AS q)
     AS a(agent, every, runs),
     generate_series(0, a.runs - 1) AS i, generate_series(0, 1) AS p
ORDER BY a.agent, i DESC, p
""".format(
    copy=_TEXT.format(words="%(words)s", seed="((i - 90) * 2 + p)", n=len(VOCABULARY)),
    text=_TEXT.format(words="%(words)s", seed="(i * 2 + p)", n=len(VOCABULARY)),
    few=FEW,
    many=MANY,
)

OLD_RELEVANT = (
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
"""`LessonStore.relevant`'s statement before the window: every live match ranked."""

LIVE_MATCHES = (
    "SELECT count(*) FROM agent_lessons WHERE agent_id = %s"
    " AND (expires_at IS NULL OR expires_at > now())"
    " AND search @@ replace(plainto_tsquery('english', %s)::text, ' & ', ' | ')::tsquery"
)


@asynccontextmanager
async def loaded(database_url: str) -> AsyncIterator[Store]:
    """A scratch schema holding `_LOAD`'s lessons, analyzed."""
    async with scratch_store(database_url, "SELECT 1") as store:
        async with store.pool.connection() as conn:
            await conn.execute(_LOAD, {"words": VOCABULARY})
            await conn.execute("ANALYZE agent_lessons")
        yield store


@pytest.fixture(scope="module")
async def lessons(database_url: str) -> AsyncIterator[Store]:
    """The lessons, read only by the tests that share them."""
    async with loaded(database_url) as store:
        yield store


async def test_the_lessons_chosen_are_the_same_while_the_window_holds_every_match(
    lessons: Store,
):
    """Ranking every live match read them all; ranking the newest RANKED_LESSONS chooses the
    same lessons for an agent with no more matches than that, among thousands of its lessons
    (expired ones, copies of a text, lessons that never expire, another agent's)."""
    assert await scalar(lessons, "SELECT count(*) FROM agent_lessons WHERE agent_id = %s", FEW) > (
        5 * RANKED_LESSONS
    )
    assert await scalar(lessons, LIVE_MATCHES, FEW, COMMON_TASK) > RANKED_LESSONS * 3 // 5
    exclude = f"run-{FEW}-3"  # a live run's
    store = LessonStore(lessons)
    compared = 0
    for task in TASKS:
        assert await scalar(lessons, LIVE_MATCHES, FEW, task) <= RANKED_LESSONS
        for limit in (1, 5, 40):
            async with lessons.pool.connection() as conn:
                cur = await conn.execute(OLD_RELEVANT, (task, FEW, exclude, limit))
                before = [(r[0], r[1], r[2]) for r in await cur.fetchall()]
            chosen = await store.relevant(FEW, task, limit=limit, exclude_run=exclude)
            assert [(n.text, n.run_id, n.created_at) for n in chosen] == before, (task, limit)
            compared += len(before)
    assert compared > 100  # most tasks match


async def test_a_runs_lessons_read_about_the_window_on_an_agent_with_thousands_live(
    lessons: Store, statements_sent: Sent
):
    """The busiest agent's run read every live lesson of it matching the task to rank them:
    thousands at each run's start, as many as the TTL keeps."""
    live = await scalar(lessons, LIVE_MATCHES, MANY, COMMON_TASK)
    assert live > 5 * RANKED_LESSONS
    statements_sent.clear()
    chosen = await LessonStore(lessons).relevant(MANY, COMMON_TASK, limit=5)
    assert len(chosen) == 5
    [(query, params)] = reading(statements_sent, "agent_lessons")
    read = rows_read(await plan(lessons, query, params, analyze=True), "agent_lessons")
    assert read <= 2 * RANKED_LESSONS, f"read {read} lessons of the agent's {live} live matches"


async def test_a_runs_lessons_read_about_the_window_when_sent_again_and_again(lessons: Store):
    """A worker sends the statement at every run's start, on the pool's few connections:
    psycopg prepares it after 5 executions, and after 5 as a prepared statement Postgres may
    plan it once for every task and agent. That plan, blind to the task's words and expecting
    an agent to have few lessons, read all of the agent's live ones (or every agent's lessons
    matching, through the GIN index). The plans Postgres ran, twelve times on one
    connection, each read about the window."""
    url = lessons.pool.conninfo
    assert isinstance(url, str)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        async with executed_plans(conn) as ran:
            for _ in range(12):
                await LessonStore(one_connection(conn)).relevant(MANY, COMMON_TASK, limit=5)
    reads = [rows_read(p, "agent_lessons") for p in ran]
    assert len(reads) == 12
    assert max(reads) <= 2 * RANKED_LESSONS, reads


async def test_expired_lessons_go_a_batch_a_statement_found_through_an_index(
    database_url: str, statements_sent: Sent
):
    """The purge (before each `lessons` listing, and in `prune`) deleted every expired lesson
    in one statement after reading the whole table: now a listing deletes one batch, found
    through the index on expires_at, and prune all of them, a batch a transaction."""
    async with loaded(database_url) as store:
        async with store.pool.connection() as conn:
            # every DELETE on agent_lessons logs how many rows it deleted
            await conn.execute(
                "CREATE TABLE deletes (n INTEGER NOT NULL);"
                " CREATE FUNCTION log_deletes() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                " INSERT INTO deletes SELECT count(*) FROM gone; RETURN NULL; END $$;"
                " CREATE TRIGGER log_deletes AFTER DELETE ON agent_lessons"
                " REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION log_deletes()"
            )
        expired_query = "SELECT count(*) FROM agent_lessons WHERE expires_at <= now()"
        live_query = "SELECT array_agg(id ORDER BY id) FROM agent_lessons WHERE expires_at IS NULL"
        live_query += " OR expires_at > now()"
        expired, live = await scalar(store, expired_query), await scalar(store, live_query)
        assert expired > 5 * PURGE_BATCH
        statements_sent.clear()

        listed = await LessonStore(store).listed(FEW, limit=20)

        assert len(listed) == 20
        assert await scalar(store, expired_query) == expired - PURGE_BATCH
        [(purge, params)] = [
            (q, p) for q, p in reading(statements_sent, "agent_lessons") if "DELETE" in str(q)
        ]
        root = await plan(store, purge, params, analyze=True)
        assert "Seq Scan" not in scans(root, "agent_lessons"), scans(root, "agent_lessons")
        assert any(n.get("Index Name") == "idx_lessons_expires" for n in nodes(root))
        assert rows_read(root, "agent_lessons") <= 2 * PURGE_BATCH

        deleted = await prune(store, timedelta(days=30))

        assert deleted["agent_lessons"] == expired - PURGE_BATCH
        assert await scalar(store, expired_query) == 0
        assert await scalar(store, live_query) == live
        batches = await scalar(store, "SELECT array_agg(n) FROM deletes")
        assert sum(batches) == expired and max(batches) <= PURGE_BATCH, batches
