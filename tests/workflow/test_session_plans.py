"""A chat turn's reads of its session, as a worker sends them again and again on one pooled
connection: what each reads stays about the window, however long the session, from the
11th turn on too.

psycopg prepares a statement after 5 executions on a connection, and Postgres may plan a
prepared one once for any parameters after 5 more (a generic plan). A plan EXPLAINed once
with real parameters (tests/workflow/test_query_plans.py) cannot show that plan: these read
the plans Postgres ran (auto_explain), as tests/workflow/test_lesson_plans.py does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import psycopg
import pytest

from activities.session_store import SessionStore
from activities.store import Store
from reactive_temporal.session_window import WINDOW_BYTES, WINDOW_MESSAGES
from tests.support.plans import executed_plans, one_connection, rows_read, scratch_store

pytestmark = pytest.mark.workflow

BUSY = "agent-busy"
BIG = "sess-big"
BIG_MESSAGES = 3_000
"""A session that went on for months, among 2,000 sessions of 10 messages (200 agents')."""

_LOAD = f"""
INSERT INTO chat_sessions (agent_id, session_id, messages)
SELECT 'agent-' || j % 200, 'sess-' || j, '[]'::jsonb FROM generate_series(0, 1999) AS j
UNION ALL SELECT '{BUSY}', '{BIG}', '[]';
INSERT INTO chat_messages (agent_id, session_id, position, role, content, sent_at)
SELECT 'agent-' || j % 200, 'sess-' || j, m, 'user', repeat('what happened? ', 5), now()
FROM generate_series(0, 1999) AS j, generate_series(0, 9) AS m
UNION ALL
SELECT '{BUSY}', '{BIG}', m, 'user', repeat('what happened? ', 5), now()
FROM generate_series(0, {BIG_MESSAGES} - 1) AS m;
ANALYZE
"""


@pytest.fixture(scope="module")
async def sessions(database_url: str) -> AsyncIterator[Store]:
    async with scratch_store(database_url, _LOAD) as store:
        yield store


@pytest.mark.parametrize(
    "turns",
    [[(BUSY, BIG)] * 15, [("agent-7", "sess-7")] * 10 + [(BUSY, BIG)] * 5],
    ids=["the-big-session-throughout", "after-ten-turns-of-a-small-one"],
)
async def test_a_turns_session_reads_stay_about_the_window_when_sent_again_and_again(
    sessions: Store, turns: list[tuple[str, str]]
):
    """Each chat turn reads its session's total, then its window. The total was
    `max(position)`, whose generic plan (for a session Postgres knew nothing of, expecting a
    message or two) aggregated every message of the session: from a worker's 11th turn on a
    connection, all 3,000 here, where the plan for the session read one. Which plan Postgres
    keeps depends on the sessions it planned for first: a worker's connection serves many."""
    url = sessions.pool.conninfo
    assert isinstance(url, str)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        store = SessionStore(one_connection(conn))
        async with executed_plans(conn) as ran:
            for agent, session in turns:
                window, first, total = await store.load(
                    agent, session, window=(WINDOW_MESSAGES, WINDOW_BYTES)
                )
                assert first + len(window) == total == (BIG_MESSAGES if session == BIG else 10)
    reads = [rows_read(p, "chat_messages") for p in ran]
    assert len(reads) == 2 * len(turns)  # the total and the window, each turn
    assert max(reads) <= 2 * WINDOW_MESSAGES, reads
