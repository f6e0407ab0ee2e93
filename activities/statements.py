"""How statements and their values go to Postgres: the transcript's row, a statement quoted
in for one round trip with others, a query whose answer is read later (pipelining), and the
values Postgres takes (no NUL, no lone surrogate) whatever a model or a tool wrote.

Split from `store.py`, which keeps the pool, the migrations and the transcript's reads.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from psycopg import AsyncConnection, sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from pydantic import BaseModel

from reactive_temporal.contracts.run import Message, ToolCall
from reactive_temporal.sanitize import clean_text, clean_value

UPSERT_MESSAGE = (
    "INSERT INTO run_messages"
    " (run_id, seq, role, content, tool_calls, tool_call_id, name, step_result, recorded_by)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
    " ON CONFLICT (run_id, seq) DO UPDATE SET role = EXCLUDED.role,"
    " content = EXCLUDED.content, tool_calls = EXCLUDED.tool_calls,"
    " tool_call_id = EXCLUDED.tool_call_id, name = EXCLUDED.name,"
    " step_result = EXCLUDED.step_result, recorded_by = EXCLUDED.recorded_by"
)
"""One transcript row; a row the workflow rewrites (e.g. an observation after a failed tool
activity) keeps no step result."""


def quoted(query: str, params: tuple[object, ...]) -> sql.Composed:
    """`query` with its `%s` parameters quoted in by psycopg (`sql.Literal`): a statement
    that can go in one query string with others (one round trip, one simple-protocol
    message), where a parameterized statement must go alone."""
    return sql.SQL(query.replace("%s", "{}")).format(*map(sql.Literal, params))


def record_row(
    run_id: str, seq: int, message: Message, result: BaseModel, recorded_by: str | None = None
) -> tuple[object, ...]:
    """A step's record: its transcript message with the step's whole result, and the Temporal
    run (`workflow_run_id`) whose step recorded it."""
    return (
        run_id,
        seq,
        message.role,
        pg_text(message.content),
        calls_json(message.tool_calls),
        message.tool_call_id,
        message.name,
        pg_json(result.model_dump(mode="json")),
        recorded_by,
    )


Rows = list[dict[str, Any]]
R = TypeVar("R")


async def pending_rows(
    conn: AsyncConnection[Any],
    query: str,
    params: tuple[object, ...] | Mapping[str, object],
    read: Callable[[Rows], R],
    *,
    prepare: bool | None = None,
) -> Callable[[], Awaitable[R]]:
    """`query` sent on `conn`; what it returns reads its rows (as dicts) with `read`.

    On a connection in pipeline mode, the queries sent this way go out together and their
    answers are read once the pipeline has ended: one round trip for all. (A read inside the
    pipeline would sync it, and its end syncs it again: two.) `prepare` is psycopg's: False
    for a statement whose good plan depends on its parameters (`lesson_store._RELEVANT`)."""
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(query, params, prepare=prepare)  # type: ignore[arg-type]

    async def answer() -> R:
        try:
            return read(await cur.fetchall())
        finally:
            await cur.close()

    return answer


def pg_text(text: str | None) -> str | None:
    """Text Postgres accepts: it cannot hold NUL characters nor encode lone surrogates, so a
    model or tool that emits them still gets its output stored, with U+FFFD in their place
    (retrying would only fail again). Everything else is stored exactly."""
    return clean_text(text, nul=True) if text else text


def pg_json(value: object) -> Jsonb:
    """A JSONB parameter cleaned the same way, string by string (never by rewriting the JSON
    text, which would also rewrite a literal backslash-u-0000 in someone's message)."""
    return Jsonb(clean_value(value, nul=True))


def calls_json(calls: list[ToolCall]) -> Jsonb | None:
    """A message's tool calls as stored, with what the endpoint sent with each for itself
    (`ToolCall.extra_content`, which payloads leave out)."""
    if not calls:
        return None
    return pg_json(
        [
            c.model_dump() | ({"extra_content": c.extra_content} if c.extra_content else {})
            for c in calls
        ]
    )
