"""Query plans for the plan tests: a scratch schema of grown tables, the statements product
code sends, and the plans Postgres makes of them (EXPLAIN) or ran (auto_explain)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any, cast

import psycopg
import pytest
from psycopg import AsyncConnection, sql
from psycopg.conninfo import make_conninfo

from activities.store import Store


@asynccontextmanager
async def scratch_store(database_url: str, load: str) -> AsyncIterator[Store]:
    """A Store on a schema of its own (migrated by `Store.open`, as a worker does), filled
    with `load`'s rows (analyzed, when `load` ends so); dropped after."""
    schema = f"plans_{uuid.uuid4().hex[:8]}"
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    url = make_conninfo(database_url, options=f"-c search_path={schema}")
    try:
        store = await Store.open(url, max_size=2)
        try:
            async with store.pool.connection() as conn:
                await conn.execute(load)
            yield store
        finally:
            await store.close()
    finally:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            await conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


Sent = list[tuple[Any, Any]]


def record_statements(monkeypatch: pytest.MonkeyPatch) -> Sent:
    """Every statement product code sends from now on, with its parameters (psycopg's
    connections send theirs through a cursor too), until `monkeypatch` is undone."""
    sent: Sent = []
    execute = psycopg.AsyncCursor.execute

    async def recording(
        self: psycopg.AsyncCursor[Any], query: Any, params: Any = None, **kw: Any
    ) -> Any:
        sent.append((query, params))
        return await execute(self, query, params, **kw)

    monkeypatch.setattr(psycopg.AsyncCursor, "execute", recording)
    return sent


def reading(sent: Sent, table: str) -> Sent:
    """The statements that name `table`."""
    return [(q, p) for q, p in sent if table in (q if isinstance(q, str) else repr(q))]


async def plan(store: Store, query: Any, params: Any, *, analyze: bool) -> dict[str, Any]:
    """Postgres's plan of `query` (run, then rolled back, with `analyze`)."""
    async with store.pool.connection() as conn:
        text = query.as_string(conn) if isinstance(query, sql.Composable) else query
        options = "ANALYZE, FORMAT JSON" if analyze else "FORMAT JSON"
        async with conn.transaction(force_rollback=True):
            cur = await conn.execute(f"EXPLAIN ({options}) {text}", params)
            row = await cur.fetchone()
    assert row is not None
    return row[0][0]["Plan"]


def nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from nodes(child)


def scans(node: dict[str, Any], table: str) -> list[str]:
    """How each scan of `table` in the plan reads it: its node type, and its index."""
    return [
        f"{n['Node Type']} {n.get('Index Name', '')}".strip()
        for n in nodes(node)
        if n.get("Relation Name") == table
    ]


def rows_read(node: dict[str, Any], table: str) -> int:
    """The rows an analyzed plan read from `table`'s heap: those its scans returned and
    those they read and filtered out, over every loop."""
    return round(
        sum(
            (
                n["Actual Rows"]
                + n.get("Rows Removed by Filter", 0)
                + n.get("Rows Removed by Index Recheck", 0)
            )
            * n["Actual Loops"]
            for n in nodes(node)
            if n.get("Relation Name") == table
        )
    )


async def scalar(store: Store, query: str, *params: object) -> Any:
    async with store.pool.connection() as conn:
        cur = await conn.execute(query, params)
        row = await cur.fetchone()
    assert row is not None
    return row[0]


class _OneConnection:
    """A pool of one connection, already open."""

    def __init__(self, conn: AsyncConnection[Any]) -> None:
        self.conn = conn

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        yield self.conn


def one_connection(conn: AsyncConnection[Any]) -> Store:
    """A Store whose every statement goes out on `conn` (as a worker's pooled ones do)."""
    return Store(cast(Any, _OneConnection(conn)))


@asynccontextmanager
async def executed_plans(conn: AsyncConnection[Any]) -> AsyncIterator[list[dict[str, Any]]]:
    """The plan of each statement `conn` runs meanwhile, as Postgres ran it (auto_explain,
    analyzed, sent to the client as a notice)."""
    ran: list[dict[str, Any]] = []

    def on_notice(diag: psycopg.errors.Diagnostic) -> None:
        text = diag.message_primary or ""
        if "plan:" in text:
            ran.append(json.loads(text.split("plan:", 1)[1])["Plan"])

    try:
        await conn.execute("LOAD 'auto_explain'")
    except psycopg.errors.InsufficientPrivilege as err:
        pytest.skip(f"auto_explain needs a superuser here: {err}")
    for setting, value in (
        ("log_min_duration", "0"), ("log_analyze", "on"), ("log_timing", "off"),
        ("log_format", "json"), ("log_level", "notice"),
    ):  # fmt: skip
        await conn.execute(f"SET auto_explain.{setting} = {value}")
    conn.add_notice_handler(on_notice)
    try:
        yield ran
    finally:
        conn.remove_notice_handler(on_notice)
        await conn.execute("SET auto_explain.log_min_duration = -1")
