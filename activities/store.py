"""Postgres access: one async pool, schema migrations, the run transcripts.

Every write is idempotent (keyed upserts), because Temporal may run an activity again after
a crash or a timeout: a retried step overwrites its own row instead of adding one.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import psycopg
from psycopg import AsyncConnection, sql
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

from activities.migrations import MIGRATIONS
from activities.pool import IdleChecks, warm_connections
from activities.statements import (
    UPSERT_MESSAGE,
    calls_json,
    pending_rows,
    pg_text,
    quoted,
    record_row,
)
from activities.transcript_rows import TRANSCRIPT, TRANSCRIPT_RECORDED, seq_messages
from reactive_temporal.contracts.run import Message, SeqMessage
from reactive_temporal.database_settings import Conninfo, conninfo_now
from reactive_temporal.sanitize import redact_dsn
from reactive_temporal.telemetry.metrics import DB_POOL

log = logging.getLogger(__name__)

_MIGRATION_LOCK = 0x5EAC7  # pg_advisory_xact_lock key: one migrating worker at a time


class StoreUnavailable(RuntimeError):
    """Postgres could not be reached or migrated."""


async def _connect_error(database_url: str) -> str | None:
    """Why a connection to `database_url` fails now (Postgres's own words: no such database,
    authentication failed, refused), or None when it does not."""
    try:
        conn = await psycopg.AsyncConnection.connect(database_url, connect_timeout=5)
    except Exception as err:
        return " ".join(str(err).split()) or type(err).__name__
    await conn.close()
    return None


def is_outage(err: BaseException) -> bool:
    """Postgres unreachable, restarting, out of connections, or not taking this worker's
    writes for now (a primary failed over to a standby, read-only; a role's grants revoked):
    wait and try again. The last two failed a run's step as the model's error, then retried
    its wrap-up forever."""
    return isinstance(
        err,
        psycopg.OperationalError
        | psycopg.InterfaceError
        | psycopg.errors.ReadOnlySqlTransaction
        | psycopg.errors.InsufficientPrivilege,
    )


WRITTEN_TABLES = (
    "agent_debriefs", "agent_last_runs", "agent_lessons", "chat_messages", "chat_sessions",
    "chat_usage", "run_context", "run_events", "run_messages",
)  # fmt: skip
"""The tables a worker writes to: it needs INSERT and UPDATE on each."""


class Store:
    """The worker's Postgres: a pool of connections in autocommit.

    Autocommit because nearly every write and read here is one statement, and psycopg outside
    autocommit waits for a `BEGIN` before it and a `COMMIT` after it: three round trips for
    one statement (plus the pool's check of a connection idle for a while: `IdleChecks`),
    several times per LLM step.
    A write of several statements says it is one transaction (`conn.transaction()`, or
    `BEGIN` … `COMMIT` in a pipeline as `RunEvents.append` does).
    """

    POOL_NAME = "store"
    """The `pool` label of its pool's series (reactive_temporal/telemetry/pool_metrics.py)."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConnection[Any]]) -> None:
        self.pool = pool

    @classmethod
    async def open(
        cls, database_url: Conninfo, *, max_size: int = 10, migrate: bool = True
    ) -> Store:
        """Connect, run migrations (unless `migrate=False`), and return a ready store.

        `database_url` may give the URL of the day (DATABASE_URL_FILE), asked at each connection
        the pool opens: one replacing a connection an expired role lost logs in anew.
        One connection is tried first: a Postgres that refuses it is said at once, where
        the pool tried for 15 s, logging each try (26 lines before the one that says why).
        """
        url = conninfo_now(database_url)
        if (refused := await _connect_error(url)) is not None:
            raise StoreUnavailable(f"cannot connect to Postgres at {redact_dsn(url)}: {refused}")
        checks = IdleChecks()
        pool: AsyncConnectionPool[AsyncConnection[Any]] = AsyncConnectionPool(
            database_url,
            kwargs={"autocommit": True},  # see the class docstring
            min_size=warm_connections(max_size),
            max_size=max_size,
            open=False,
            timeout=10,
            check=checks.check,  # after a Postgres restart, reconnect
            reset=checks.returned,
            name=cls.POOL_NAME,
        )
        checks.pool = pool
        try:
            await pool.open(wait=True, timeout=15)
        except Exception as err:
            await pool.close()
            # the pool says only that it timed out: one connection of our own names why
            cause = await _connect_error(url := conninfo_now(database_url)) or str(err)
            raise StoreUnavailable(
                f"cannot connect to Postgres at {redact_dsn(url)}: {cause}"
            ) from err
        store = cls(pool)
        if migrate:
            try:
                await store.migrate()
                if (problem := await store.unwritable()) is not None:
                    raise StoreUnavailable(
                        f"this worker cannot write to Postgres at {redact_dsn(url)}: {problem}"
                    )
            except BaseException:
                await pool.close()
                raise
        DB_POOL.watch(cls.POOL_NAME, pool)  # its waits and connections at /metrics
        return store

    async def close(self) -> None:
        DB_POOL.forget(self.pool)
        await self.pool.close()

    @contextlib.asynccontextmanager
    async def connection(
        self, held: AsyncConnection[Any] | None = None
    ) -> AsyncIterator[AsyncConnection[Any]]:
        """`held` when the caller already has one (several statements of a step on one
        checkout: each checkout is a round trip for the pool's check), else one from the pool."""
        if held is not None:
            yield held
            return
        async with self.pool.connection() as conn:
            yield conn

    async def migrate(self) -> None:
        """Apply the migrations this database lacks; without DDL when it lacks none.

        Workers may connect as a role that can read and write the tables but not create them
        (docker-compose.yml's `agents_worker`): when every migration is applied already they
        never need to, and when one is missing they say who must apply it.
        """
        missing = await self.missing_migrations()
        if not missing:
            return
        try:
            await self._apply_migrations()
        except psycopg.errors.InsufficientPrivilege as err:
            raise StoreUnavailable(
                f"the agents database lacks schema migrations {missing} and this role may not "
                f"apply them ({err}). Run `python starter.py migrate` with a DATABASE_URL whose "
                "role owns the schema (docker compose runs it as its `migrate` service)"
            ) from err

    async def unwritable(self) -> str | None:
        """Why this worker could not record runs here (a read-only server, a role without
        the grants), or None. Started anyway, every run failed its first step."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT current_setting('transaction_read_only') = 'on',"
                " array(SELECT t FROM unnest(%s::text[]) AS t WHERE NOT"
                " (has_table_privilege(t, 'INSERT') AND has_table_privilege(t, 'UPDATE')))",
                (list(WRITTEN_TABLES),),
            )
            row = await cur.fetchone()
        assert row is not None
        read_only, denied = row
        if read_only:
            return "the server takes no writes (a standby, or default_transaction_read_only)"
        if denied:
            return (
                f"role {await self._role()} may not insert and update in {', '.join(denied)} "
                "(GRANT them: deploy/postgres/init-roles.sh shows how)"
            )
        return None

    async def _role(self) -> str:
        async with self.pool.connection() as conn:
            cur = await conn.execute("SELECT current_user")
            row = await cur.fetchone()
        return str(row[0]) if row else "?"

    async def missing_migrations(self) -> list[int]:
        """The versions of MIGRATIONS not applied to this database yet."""
        async with self.pool.connection() as conn:
            cur = await conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL")
            row = await cur.fetchone()
            applied: set[int] = set()
            if row is not None and row[0]:
                cur = await conn.execute("SELECT version FROM schema_migrations")
                applied = {r[0] for r in await cur.fetchall()}
        return [version for version, _ in MIGRATIONS if version not in applied]

    async def _apply_migrations(self) -> None:
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
                pg_text(e.message.content),
                calls_json(e.message.tool_calls),
                e.message.tool_call_id,
                e.message.name,
            )
            for e in entries
        ]
        # pipelined, `BEGIN` and `COMMIT` its statements: one round trip or two where
        # `transaction()` took four (it syncs the pipeline as it opens and closes); a failed
        # row leaves the transaction aborted and the pool rolls it back
        async with self.pool.connection() as conn, conn.pipeline(), conn.cursor() as cur:
            await cur.execute("BEGIN")
            await cur.executemany(UPSERT_MESSAGE, [(*row, None, None) for row in rows])
            await cur.execute("COMMIT")

    async def record_step(
        self,
        run_id: str,
        seq: int,
        message: Message,
        result: BaseModel,
        *,
        then: sql.Composable | None = None,
    ) -> None:
        """A step's message at its place in the transcript, with the step's whole result, in
        one write: a retried step finds it (`recorded_step`) and returns it instead of doing
        its work (the model call, the tool) again.

        `then`: statements sent in the same round trip, after the record has committed in a
        transaction of its own (when they fail, the error is raised, the record stands)."""
        await self.record_steps([record_row(run_id, seq, message, result)], then=then)

    async def record_steps(
        self,
        rows: Sequence[tuple[object, ...]],
        *,
        also: Sequence[sql.Composable] = (),
        then: sql.Composable | None = None,
    ) -> None:
        """Steps' records (`record_row`) in one transaction, with the statements `also`, then
        the statements `then` in the same round trip (see `record_step`). One record alone is
        one parameterized statement."""
        if len(rows) == 1 and not also and then is None:
            async with self.pool.connection() as conn:
                await conn.execute(UPSERT_MESSAGE, rows[0])
            return
        records = [quoted(UPSERT_MESSAGE, row) for row in rows]
        statements = [sql.SQL("BEGIN"), *records, *also, sql.SQL("COMMIT")]
        if then is not None:
            statements.append(then)
        async with self.pool.connection() as conn:
            await conn.execute(sql.SQL("; ").join(statements))

    async def recorded_step(
        self, run_id: str, seq: int, recorded_by: str | None = None
    ) -> dict[str, Any] | None:
        """The result `record_step` kept for this step, None when it never completed; with
        `recorded_by`, only a result that Temporal run recorded (or a worker from before
        records kept their run), not one an earlier timeline of a reset run left there."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT step_result, recorded_by FROM run_messages WHERE run_id = %s AND seq = %s",
                (run_id, seq),
            )
            row = await cur.fetchone()
        if row is None or row[0] is None:
            return None
        if recorded_by is not None and row[1] is not None and row[1] != recorded_by:
            return None
        return row[0]

    async def load_messages(self, run_id: str, before_seq: int | None = None) -> list[Message]:
        """The run's transcript in order, up to (not including) `before_seq`."""
        return [e.message for e in await self.load_transcript(run_id, before_seq)]

    async def load_transcript(
        self,
        run_id: str,
        before_seq: int | None = None,
        *,
        from_seq: int = 0,
        conn: AsyncConnection[Any] | None = None,
        recorded: bool = False,
    ) -> list[SeqMessage]:
        """The run's transcript with each message's position, from `from_seq` up to (not
        including) `before_seq` (on `conn` when given; `recorded`: see `begin_transcript`)."""
        async with self.connection(conn) as c:
            reading = await self.begin_transcript(
                run_id, before_seq, from_seq, c, recorded=recorded
            )
            return await reading()

    async def begin_transcript(
        self,
        run_id: str,
        before_seq: int | None,
        from_seq: int,
        conn: AsyncConnection[Any],
        *,
        recorded: bool = False,
    ) -> Callable[[], Awaitable[list[SeqMessage]]]:
        """`load_transcript`'s query sent on `conn`; what it returns reads the answer (on a
        connection in pipeline mode, once the pipeline has ended: one round trip for all).
        With `recorded`, a model's turn whose step recorded thinking or the endpoint's state
        beside it is a `transcript_rows.ThoughtEntry`."""
        limit = before_seq if before_seq is not None else 2**31 - 1
        return await pending_rows(
            conn,
            TRANSCRIPT_RECORDED if recorded else TRANSCRIPT,
            (run_id, from_seq, limit),
            seq_messages,
        )
