"""Which of Postgres's errors are outages, missing schema, or data it will never take:
told apart on the errors a real Postgres raises (activities/pg_refusals.py). Only the last
fail a store activity for good; the first two are retried."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from activities.pg_refusals import (
    RACE_ATTEMPTS,
    REFUSAL_MAX_CHARS,
    Refusal,
    classify,
    refusal_message,
)

pytestmark = pytest.mark.workflow


async def raised(conn: psycopg.AsyncConnection[Any], query: str, *params: object) -> psycopg.Error:
    """What Postgres raises for `query` (rolled back after, so the next one runs)."""
    try:
        await conn.execute(query, params or None)  # type: ignore[arg-type]
    except psycopg.Error as err:
        await conn.rollback()
        return err
    raise AssertionError(f"{query!r} was not refused")


async def test_each_refusal_of_a_real_postgres_is_told_apart(database_url: str):
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        await conn.execute(
            "CREATE TEMP TABLE probe (n INTEGER NOT NULL UNIQUE, s VARCHAR(3)"
            " CONSTRAINT probe_s_not_x CHECK (s <> 'x'))"
        )
        await conn.execute("INSERT INTO probe VALUES (1, 'a')")
        await conn.commit()
        data = {
            "22P02 invalid text representation": await raised(conn, "SELECT 'one'::int"),
            "22003 out of range": await raised(conn, "INSERT INTO probe VALUES (%s, 'a')", 2**40),
            "22001 string too long": await raised(conn, "INSERT INTO probe VALUES (2, 'abcd')"),
            "22P05 untranslatable": await raised(conn, "SELECT convert_to('€', 'LATIN1')"),
            "23502 not null": await raised(conn, "INSERT INTO probe VALUES (NULL, 'a')"),
            "23514 check": await raised(conn, "INSERT INTO probe VALUES (3, 'x')"),
            "NUL, refused by psycopg": await raised(conn, "SELECT %s::text", "a\x00b"),
        }
        unique_violation = await raised(conn, "INSERT INTO probe VALUES (1, 'b')")
        schema = {
            "42P01 undefined table": await raised(conn, "SELECT * FROM no_such_table"),
            "42703 undefined column": await raised(conn, "SELECT no_such_column FROM probe"),
            "42883 undefined function": await raised(conn, "SELECT no_such_function()"),
        }
        await conn.execute("SET TRANSACTION READ ONLY")
        read_only = await raised(conn, "CREATE TABLE refused_on_a_standby (n int)")
    with pytest.raises(psycopg.OperationalError) as unreachable:
        await psycopg.AsyncConnection.connect(
            "postgresql://postgres@127.0.0.1:1/none", connect_timeout=2
        )

    for what, err in data.items():
        assert classify(err, attempt=1) is Refusal.DATA, what
    for what, err in schema.items():
        assert classify(err) is Refusal.SCHEMA, what
    assert classify(read_only) is Refusal.OUTAGE
    assert classify(unreachable.value) is Refusal.OUTAGE
    # a unique violation may be a lost race: retried at first, refused from RACE_ATTEMPTS on
    assert classify(unique_violation, attempt=1) is None
    assert classify(unique_violation, attempt=RACE_ATTEMPTS - 1) is None
    assert classify(unique_violation, attempt=RACE_ATTEMPTS) is Refusal.DATA
    # raised from a refusal (GroupCommit's caller, an error wrapping it): still the refusal
    try:
        raise RuntimeError("writing the record failed") from data["23514 check"]
    except RuntimeError as wrapped:
        assert classify(wrapped) is Refusal.DATA
    assert classify(ValueError("not Postgres's")) is None
    assert classify(TimeoutError()) is None

    check = refusal_message(data["23514 check"], "record_messages")
    assert check == (
        "Postgres refused the data of record_messages (table probe, constraint probe_s_not_x): "
        'new row for relation "probe" violates check constraint "probe_s_not_x" '
        "[SQLSTATE 23514]"
    )
    nul = refusal_message(data["NUL, refused by psycopg"], "save_session")
    assert nul.startswith("Postgres refused the data of save_session: ") and "NUL" in nul
    assert nul.endswith("[SQLSTATE none, refused by psycopg before sending]")


async def test_a_refusal_quoting_a_huge_value_is_clipped(database_url: str):
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        err = await raised(conn, "SELECT %s::int", "x" * 50_000)
    message = refusal_message(err, "llm_step")
    assert len(message) == REFUSAL_MAX_CHARS
    assert message.startswith("Postgres refused the data of llm_step: invalid input syntax")
    assert message.endswith("[SQLSTATE 22P02]")
