"""A chat turn's write of its session's row: what each turn costs the `chat_sessions` table."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from activities.session_store import SessionStore
from reactive_temporal.contracts.entity import ChatMessage
from tests.support.plans import one_connection, scratch_store

pytestmark = pytest.mark.workflow


async def test_a_turn_rewrites_its_sessions_row_in_place(database_url: str):
    """Each turn sets its session's updated_at. The index on (agent_id, updated_at), which no
    statement read, made every such update a new entry in both of the table's indexes; the
    table keeps its primary key alone, and a turn's update is a heap-only (HOT) one."""
    async with scratch_store(database_url, "SELECT 1") as store:
        async with store.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT array_agg(indexname::text ORDER BY indexname) FROM pg_indexes"
                " WHERE schemaname = current_schema() AND tablename = 'chat_sessions'"
            )
            row = await cur.fetchone()
            assert row is not None and row[0] == ["chat_sessions_pkey"]
            sessions = SessionStore(one_connection(conn))
            session = f"s-{uuid.uuid4().hex[:8]}"
            for turn in range(6):  # each its own transaction, as turns are: now() moves
                said = ChatMessage(role="user", content=f"turn {turn}", timestamp=datetime.now(UTC))
                await sessions.append("agent-chatty", session, turn, [said])
            await conn.execute("SELECT pg_stat_force_next_flush()")
            await conn.execute("SELECT 1")  # the backend's counts are flushed as it idles
            cur = await conn.execute(
                "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables"
                " WHERE schemaname = current_schema() AND relname = 'chat_sessions'"
            )
            counts = await cur.fetchone()
    assert counts is not None
    updates, hot = counts
    assert updates == 5 and hot == updates, counts
