"""Postgres access: one async pool, schema migrations, the run transcripts.

Every write is idempotent (keyed upserts), because Temporal may run an activity again after
a crash or a timeout: a retried step overwrites its own row instead of adding one.
"""

from __future__ import annotations

import logging
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from reactive_temporal.contracts import Message, SeqMessage, ToolCall

log = logging.getLogger(__name__)

MIGRATIONS: list[tuple[int, str]] = [
    (
        1,
        """
        CREATE TABLE IF NOT EXISTS run_messages (
            run_id       TEXT        NOT NULL,
            seq          INTEGER     NOT NULL,
            role         TEXT        NOT NULL,
            content      TEXT,
            tool_calls   JSONB,
            tool_call_id TEXT,
            name         TEXT,
            created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
            PRIMARY KEY (run_id, seq)
        )
        """,
    ),
]
_MIGRATION_LOCK = 0x5EAC7  # pg_advisory_xact_lock key: one migrating worker at a time


class StoreUnavailable(RuntimeError):
    """Postgres could not be reached or migrated."""


class Store:
    def __init__(self, pool: AsyncConnectionPool[AsyncConnection[Any]]) -> None:
        self.pool = pool

    @classmethod
    async def open(cls, database_url: str, *, max_size: int = 10) -> Store:
        """Connect, run migrations, and return a ready store."""
        pool: AsyncConnectionPool[AsyncConnection[Any]] = AsyncConnectionPool(
            database_url, min_size=1, max_size=max_size, open=False, timeout=10
        )
        try:
            await pool.open(wait=True, timeout=15)
        except Exception as err:
            await pool.close()
            raise StoreUnavailable(
                f"cannot connect to Postgres at {_redact(database_url)}: {err}"
            ) from err
        store = cls(pool)
        await store.migrate()
        return store

    async def close(self) -> None:
        await self.pool.close()

    async def migrate(self) -> None:
        async with self.pool.connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            cur = await conn.execute("SELECT version FROM schema_migrations")
            applied = {row[0] for row in await cur.fetchall()}
            for version, sql in MIGRATIONS:
                if version not in applied:
                    await conn.execute(sql)  # type: ignore[arg-type]
                    await conn.execute(
                        "INSERT INTO schema_migrations (version) VALUES (%s)", (version,)
                    )
                    log.info("applied schema migration %s", version)

    async def put_messages(self, run_id: str, entries: list[SeqMessage]) -> None:
        if not entries:
            return
        rows = [
            (
                run_id,
                e.seq,
                e.message.role,
                e.message.content,
                Jsonb([c.model_dump() for c in e.message.tool_calls])
                if e.message.tool_calls
                else None,
                e.message.tool_call_id,
                e.message.name,
            )
            for e in entries
        ]
        async with self.pool.connection() as conn, conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO run_messages"
                " (run_id, seq, role, content, tool_calls, tool_call_id, name)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (run_id, seq) DO UPDATE SET role = EXCLUDED.role,"
                " content = EXCLUDED.content, tool_calls = EXCLUDED.tool_calls,"
                " tool_call_id = EXCLUDED.tool_call_id, name = EXCLUDED.name",
                rows,
            )

    async def load_messages(self, run_id: str, before_seq: int | None = None) -> list[Message]:
        """The run's transcript in order, up to (not including) `before_seq`."""
        limit = before_seq if before_seq is not None else 2**31 - 1
        async with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                "SELECT role, content, tool_calls, tool_call_id, name FROM run_messages"
                " WHERE run_id = %s AND seq < %s ORDER BY seq",
                (run_id, limit),
            )
            rows = await cur.fetchall()
        return [
            Message(
                role=r["role"],
                content=r["content"],
                tool_calls=[ToolCall(**c) for c in (r["tool_calls"] or [])],
                tool_call_id=r["tool_call_id"],
                name=r["name"],
            )
            for r in rows
        ]

    async def count_messages(self, run_id: str) -> int:
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT count(*) FROM run_messages WHERE run_id = %s", (run_id,)
            )
            row = await cur.fetchone()
        return int(row[0]) if row else 0


def to_openai(message: Message) -> dict[str, Any]:
    """The chat-completions wire shape of a transcript message."""
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    return out


def _redact(url: str) -> str:
    """A connection string without its password, safe to print."""
    if "://" in url and "@" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        user = creds.split(":", 1)[0]
        return f"{scheme}://{user}:***@{host}" if ":" in creds else url
    return "(connection string hidden)" if "password" in url else url
