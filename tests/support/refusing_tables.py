"""A table that refuses some rows for a while: data Postgres will never take, made on purpose.

A CHECK constraint added `NOT VALID` (no existing row is checked) and dropped afterwards, so
the test's own rows are refused and every other row goes in as usual.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator

import psycopg
from psycopg import sql


@contextlib.asynccontextmanager
async def refusing(database_url: str, table: str, column: str, marker: str) -> AsyncIterator[str]:
    """A CHECK constraint on `table` that refuses new rows whose `column` contains `marker`,
    for the block; yields its name."""
    name = f"refuse_{uuid.uuid4().hex[:10]}"
    ident = sql.Identifier
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            sql.SQL(
                "ALTER TABLE {table} ADD CONSTRAINT {name}"
                " CHECK (position({marker} in coalesce({column}::text, '')) = 0) NOT VALID"
            ).format(
                table=ident(table),
                name=ident(name),
                marker=sql.Literal(marker),
                column=ident(column),
            )  # fmt: skip
        )
        try:
            yield name
        finally:
            await conn.execute(
                sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}").format(ident(table), ident(name))
            )
