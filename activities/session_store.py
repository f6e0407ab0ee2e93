"""Chat sessions in Postgres, one row per message, written as each turn happens."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import dict_row

from activities.statements import pg_text
from activities.store import Store
from reactive_temporal.contracts.entity import ChatMessage
from reactive_temporal.session_window import trim_window

PAGE_READ_ROWS = 200
"""A page of a session's history is read this many messages at a time."""

_TOTAL = (
    "SELECT coalesce((SELECT position FROM chat_messages WHERE agent_id = %s"
    " AND session_id = %s ORDER BY position DESC LIMIT 1) + 1, 0) AS n"
)
"""A session's total: positions are dense from 0 (a turn is written at the session's total),
so the last one tells it, read from the end of the primary key (count(*) read every message).

The last position by `ORDER BY … DESC LIMIT 1`, not `max(position)`: psycopg prepares a
statement after 5 executions on a connection, and Postgres may then plan it once for any
session (a generic plan). Planned for a session it knew nothing of, expecting a message or
two (agent and session estimated apart), `max()` became an aggregate over the whole session:
a chat turn on a session of 5,000 messages read all of them from a worker's 11th turn on a
connection, where the plan for the session read one (bench/data_scale.py). Ordered and
limited, every plan of it reads one row."""


class SessionStore:
    """Chat sessions: one row per message (`chat_messages`), written as each turn happens, so
    a session of any length is read back whole or a page at a time; `chat_sessions` keeps
    one row per session (when it was created and last written)."""

    def __init__(self, store: Store) -> None:
        self.pool = store.pool

    async def save(self, agent_id: str, session_id: str, messages: list[ChatMessage]) -> None:
        """The whole session, replacing what was saved."""
        async with self.pool.connection() as conn, conn.transaction():
            await conn.execute(
                "DELETE FROM chat_messages WHERE agent_id = %s AND session_id = %s",
                (agent_id, session_id),
            )
            await self._write(conn, agent_id, session_id, 0, messages)

    async def append(
        self, agent_id: str, session_id: str, first_position: int, messages: list[ChatMessage]
    ) -> None:
        """Messages at their positions (idempotent: a retried write rewrites the same rows)."""
        async with self.pool.connection() as conn, conn.transaction():
            await self._write(conn, agent_id, session_id, first_position, messages)

    async def _write(
        self,
        conn: AsyncConnection[Any],
        agent_id: str,
        session_id: str,
        first_position: int,
        messages: list[ChatMessage],
    ) -> None:
        await conn.execute(
            "INSERT INTO chat_sessions (agent_id, session_id, messages) VALUES (%s, %s, '[]')"
            " ON CONFLICT (agent_id, session_id) DO UPDATE SET updated_at = now()",
            (agent_id, session_id),
        )
        async with conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO chat_messages (agent_id, session_id, position, role, content,"
                " sent_at) VALUES (%s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (agent_id, session_id, position) DO UPDATE SET"
                " role = EXCLUDED.role, content = EXCLUDED.content, sent_at = EXCLUDED.sent_at",
                [
                    (agent_id, session_id, first_position + i, m.role, pg_text(m.content),
                     m.timestamp)
                    for i, m in enumerate(messages)
                ],
            )  # fmt: skip

    async def load(
        self,
        agent_id: str,
        session_id: str,
        *,
        offset: int = 0,
        max_bytes: int | None = None,
        window: tuple[int, int] | None = None,
    ) -> tuple[list[ChatMessage], int, int]:
        """(messages, the first one's position, the session's total). From `offset`, at most
        `max_bytes` of content (always one message at least); or with `window` (messages,
        bytes) the latest messages within it."""
        async with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(_TOTAL, (agent_id, session_id))
            row = await cur.fetchone()
            total = int(row["n"]) if row else 0
            if window is not None:
                offset, max_bytes = max(0, total - window[0]), None
            rows: list[dict[str, Any]] = []
            size, position = 0, offset
            # a page is read PAGE_READ_ROWS rows at a time until it is full: read whole from
            # its offset to the session's end, paging through a long session read O(N²) rows
            while True:
                await cur.execute(
                    # sized as JSON, as the page travels: a control character is six bytes
                    "SELECT position, role, content, sent_at,"
                    " octet_length(to_json(content)::text) AS size"
                    " FROM chat_messages WHERE agent_id = %s AND session_id = %s"
                    " AND position >= %s ORDER BY position LIMIT %s",
                    (agent_id, session_id, position, PAGE_READ_ROWS if max_bytes else None),
                )
                batch = await cur.fetchall()
                for r in batch:
                    size += r["size"]
                    if max_bytes is not None and size > max_bytes and rows:
                        break
                    rows.append(r)
                else:
                    if max_bytes is not None and len(batch) == PAGE_READ_ROWS:
                        position = batch[-1]["position"] + 1
                        continue
                break
        messages = [
            ChatMessage(role=r["role"], content=r["content"], timestamp=r["sent_at"]) for r in rows
        ]
        if window is not None:
            kept = trim_window(messages, window[0], window[1])
            return kept, total - len(kept), total
        return messages, offset, total
