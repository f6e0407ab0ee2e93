"""What agents remember of their runs, in Postgres: a debrief per run, the lessons learned,
and each agent's last finished run (what chat quotes of it, read by the agent entity).

Credentials are kept out of all of it, as it is written and as it is read (rows written
before that too): `activities/memory_redaction.py`."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection, AsyncCursor
from pydantic import ValidationError

from activities.memory_redaction import redacted, redacted_run
from activities.statements import Rows, pending_rows, pg_json, pg_text
from activities.store import Store
from reactive_temporal.contracts.debrief import AgentDebrief, DebriefInput
from reactive_temporal.contracts.entity import RunFinished
from reactive_temporal.memory import LESSON_TTL_DAYS

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoredDebrief:
    run_id: str
    agent_id: str
    debrief: AgentDebrief
    age_hours: float


class DebriefStore:
    """The `agent_debriefs` rows (one per run), the `agent_lessons` experience store, and each
    agent's last finished run (`agent_last_runs`: what chat quotes of it)."""

    def __init__(self, store: Store, *, lesson_ttl_days: float = LESSON_TTL_DAYS) -> None:
        self.pool = store.pool
        self.lesson_ttl_days = lesson_ttl_days

    @contextlib.asynccontextmanager
    async def pipelined(
        self, held: AsyncConnection[Any] | None = None
    ) -> AsyncIterator[AsyncConnection[Any]]:
        """`held`, or a connection in pipeline mode: its statements go out together, in a
        round trip, as the block ends (a read inside would cost one more). A run's wrap-up
        writes its debrief and keeps its last run on one: one statement a round trip, it was seven,
        each holding the connection as long as the busy worker took to come back to it (at
        200 runs ending at once, a pool's worth)."""
        if held is not None:
            yield held
            return
        async with self.pool.connection() as conn, conn.pipeline():
            yield conn

    async def save(
        self,
        input: DebriefInput,
        debrief: AgentDebrief,
        *,
        conn: AsyncConnection[Any] | None = None,
    ) -> None:
        """Upsert the run's debrief and replace its lessons (which expire after the TTL), in
        one transaction, pipelined (on `conn` when given: a `pipelined()` one).

        `BEGIN` and `COMMIT` are statements of the pipeline: psycopg's `transaction()` syncs
        the pipeline as it opens and closes (four round trips for two statements). A failed
        statement leaves the transaction aborted; the pool rolls it back.

        The debrief is kept without credentials: its errors quote tool output, and an LLM may
        have written a key it read into a finding or a lesson (`memory_redaction`)."""
        debrief = redacted(debrief, where="debrief", owner=f"run {input.run_id}")
        m = debrief.metrics
        ttl = self.lesson_ttl_days * 86_400
        as_json = pg_json(debrief.model_dump(mode="json"))  # the row's, and the last run's
        async with self.pipelined(conn) as conn:
            await conn.execute("BEGIN")
            await conn.execute(
                "INSERT INTO agent_debriefs (run_id, agent_id, task_prompt, terminated_by, output,"
                " output_format, outcome, synthesized, debrief_json, debrief_markdown, tokens_used,"
                " duration_ms, iterations)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                # A rerun (a reset run) writes its own debrief over the first one's: every
                # column but the key and created_at is the new run's.
                " ON CONFLICT (run_id) DO UPDATE SET updated_at = now(),"
                " agent_id = EXCLUDED.agent_id, task_prompt = EXCLUDED.task_prompt,"
                " terminated_by = EXCLUDED.terminated_by, output = EXCLUDED.output,"
                " output_format = EXCLUDED.output_format,"
                " outcome = EXCLUDED.outcome, synthesized = EXCLUDED.synthesized,"
                " debrief_json = EXCLUDED.debrief_json,"
                " debrief_markdown = EXCLUDED.debrief_markdown,"
                " tokens_used = EXCLUDED.tokens_used, duration_ms = EXCLUDED.duration_ms,"
                " iterations = EXCLUDED.iterations",
                (
                    input.run_id, input.agent_id, pg_text(input.task), input.terminated_by,
                    pg_text(input.final_output) or "", input.output_format, debrief.outcome,
                    debrief.synthesized, as_json,
                    pg_text(debrief.markdown),
                    m.tokens, m.duration_ms, m.iterations,
                ),
            )  # fmt: skip
            # The agent's last run, when it is this one, quotes the debrief written last (the
            # rich one replaces the instant one there too).
            await conn.execute(
                "UPDATE agent_last_runs SET updated_at = now(),"
                " run = jsonb_set(run, '{debrief}', %s) WHERE agent_id = %s AND run_id = %s",
                (as_json, input.agent_id, input.run_id),
            )
            await conn.execute("DELETE FROM agent_lessons WHERE run_id = %s", (input.run_id,))
            async with conn.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO agent_lessons (run_id, position, agent_id, lesson, expires_at)"
                    " VALUES (%s, %s, %s, %s, now() + make_interval(secs => %s))",
                    [
                        (input.run_id, i, input.agent_id, pg_text(lesson), ttl)
                        for i, lesson in enumerate(debrief.lessons_learned)
                    ],
                )
            await conn.execute("COMMIT")

    async def keep_last_run(self, run: RunFinished) -> bool:
        """Keep `run` as its agent's last run, unless a run that started later is kept already
        (an older run finishing late never replaces a newer one's context). Whether it was."""
        async with self.pool.connection() as conn:
            cur = await self.keep_last_run_on(conn, run)
            return await cur.fetchone() is not None

    async def keep_last_run_on(
        self, conn: AsyncConnection[Any], run: RunFinished
    ) -> AsyncCursor[Any]:
        """`keep_last_run`'s statement sent on `conn` (a `pipelined()` one goes out with the
        rest, as the block ends); its cursor has a row when the run was kept. Its debrief and
        observations (tool output chat quotes) are kept without credentials."""
        run = redacted_run(run, where="last_run")
        return await conn.execute(
            "INSERT INTO agent_last_runs (agent_id, run_id, started_at, run)"
            " VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (agent_id) DO UPDATE SET run_id = EXCLUDED.run_id,"
            " started_at = EXCLUDED.started_at, run = EXCLUDED.run, updated_at = now()"
            " WHERE agent_last_runs.started_at <= EXCLUDED.started_at RETURNING 1",
            (
                run.agent.agent_id, run.run_id, run.started_at,
                pg_json(run.model_dump(mode="json")),
            ),
        )  # fmt: skip

    async def last_run(self, agent_id: str) -> RunFinished | None:
        """The agent's last finished run as it kept itself; None before any did."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT run FROM agent_last_runs WHERE agent_id = %s", (agent_id,)
            )
            row = await cur.fetchone()
        if row is None:
            return None
        try:
            run = RunFinished.model_validate(row[0])
        except ValidationError as err:  # chat goes on without it rather than failing every turn
            log.warning(
                "agent %s: its last run's row does not read as a run, ignored: %s", agent_id, err
            )
            return None
        return redacted_run(run, where="last_run")  # kept before credentials were kept out

    async def get(self, run_id: str) -> StoredDebrief | None:
        async with self.pool.connection() as conn:
            reading = await pending_rows(conn, _SELECT + "WHERE run_id = %s", (run_id,), _first)
            return await reading()

    async def latest(self, agent_id: str, max_age_hours: float) -> StoredDebrief | None:
        async with self.pool.connection() as conn:
            reading = await self.begin_latest(conn, agent_id, max_age_hours)
            return await reading()

    async def begin_latest(
        self, conn: AsyncConnection[Any], agent_id: str, max_age_hours: float
    ) -> Callable[[], Awaitable[StoredDebrief | None]]:
        """`latest`'s query sent on `conn`; what it returns reads the answer (`pending_rows`:
        on a pipelined connection, with the other queries sent in it)."""
        return await pending_rows(
            conn,
            _SELECT + "WHERE agent_id = %s AND created_at > now() - make_interval(secs => %s)"
            " ORDER BY created_at DESC LIMIT 1",
            (agent_id, max_age_hours * 3600),
            _first,
        )


_SELECT = (
    "SELECT run_id, agent_id, debrief_json,"
    " extract(epoch FROM now() - created_at) / 3600 AS age_hours FROM agent_debriefs "
)


def _first(rows: Rows) -> StoredDebrief | None:
    return next(iter(_stored(rows)), None)


def _stored(rows: Rows) -> list[StoredDebrief]:
    """The rows' debriefs, without credentials (a row written before they were kept out
    reaches the next run's notes as well)."""
    return [
        StoredDebrief(
            run_id=r["run_id"],
            agent_id=r["agent_id"],
            debrief=redacted(
                AgentDebrief.model_validate(r["debrief_json"]),
                where="earlier_debrief",
                owner=f"run {r['run_id']}",
            ),
            age_hours=float(r["age_hours"]),
        )
        for r in rows
    ]
