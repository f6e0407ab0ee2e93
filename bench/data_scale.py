"""Which of the product's statements slow down as six months of production fill the tables,
before and after the changes of 2026-12-04's afternoon (migrations 14 and 15: a run's lessons
ranked within a window and planned for their words, the batched purge of expired lessons,
the chat sessions' unused index dropped). The live feed's and prune's old statements, of the
morning, stay in "before" too.

One scratch database (on DATABASE_URL's server, named after its database + `_scale_<hex>`;
else an embedded Postgres), dropped at the end. It is migrated as it was before (migrations
up to BEFORE_MIGRATION) and filled by `bench/_scale_data.py` (N runs over 180 days: 20
messages, 60 events, 10 context rows, a debrief and 2 lessons each; a busy agent with 30 %
of them; a run with N events). Then:

1. the product's statements, as its own code sends them (the calls below, run once in a
   transaction rolled back, each statement they send recorded with its parameters: the busy
   agent, a run of its in the middle), each EXPLAIN ANALYZEd (TIMING OFF) REPEAT times in a
   transaction rolled back: the median execution time, how the plan reads its tables, the
   rows it read from them and the buffers it touched;
2. the migrations since applied (their time printed), and (1) again, with the statements the
   code sends now (the live feed's and prune's old ones are inlined here, as they were);
3. each statement a worker or the API sends per run, step or turn, AGAIN (15) times on one
   connection through the product's own calls (`bench/_scale_again.py`), with the skewed
   parameters (the busy agent, its big session, the long run), and 10 times with a quiet
   agent's then 5 with the skewed ones: the plans Postgres ran (auto_explain) for
   executions 1–5 and 11–15, where psycopg has prepared it and Postgres may use a plan made
   for any parameters (a step's and a wrap-up's writes there stay: a few rows);
4. prune: the old statement per table in one transaction (rolled back), then `prune` as it
   is now, for real.

    .venv/bin/python -m bench.data_scale [--runs N] [--quick]
"""

from __future__ import annotations

import contextlib
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast
from unittest import mock
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import AsyncConnection, sql

import activities.store as store_module
from activities.debrief_store import DebriefStore
from activities.lesson_store import LessonStore
from activities.llm_context import ContextRecords
from activities.migrations import MIGRATIONS
from activities.retention import PRUNED_TABLES, prune
from activities.session_store import SessionStore
from activities.store import Store
from bench._scale_again import (
    again_calls,
    all_again,
    cases,
    heap_rows_read,
    plan_nodes,
    print_again,
    scan_names,
)
from bench._scale_before import PRUNE_AGE, lessons_before, lessons_sent_again, prune_before
from bench._scale_data import BUSY_AGENT, LONG_RUN, TASK, Scale, drop_helpers, load
from bench._stack import _start_postgres, log, machine, parser, print_table, run
from reactive_temporal.api.live_feed import BATCH, BATCH_QUERY
from reactive_temporal.contracts.entity import ChatMessage
from reactive_temporal.session_window import WINDOW_BYTES, WINDOW_MESSAGES

BEFORE_MIGRATION = 13
"""The schema before this work: migrations up to this one."""
REPEAT = 5

BATCH_QUERY_BEFORE = (
    'SELECT "offset", type, step, position, data, created_at FROM run_events'
    ' WHERE run_id = %s AND "offset" >= %s ORDER BY "offset" LIMIT %s'
)
"""`LiveFeed.batch`'s statement as it was."""


@dataclass(frozen=True)
class Params:
    run: str
    """A run of the busy agent's, in the middle of the six months."""
    run_length: int
    agent: str
    session: str
    """A session of the busy agent's."""


Sent = list[tuple[Any, Any]]


@contextlib.contextmanager
def recording() -> Iterator[Sent]:
    """Every statement sent through a psycopg cursor meanwhile, with its parameters."""
    sent: Sent = []
    execute = psycopg.AsyncCursor.execute

    async def record(
        self: psycopg.AsyncCursor[Any], query: Any, params: Any = None, **kw: Any
    ) -> Any:
        sent.append((query, params))
        return await execute(self, query, params, **kw)

    with mock.patch.object(psycopg.AsyncCursor, "execute", record):
        yield sent


class _OneConnection:
    """A pool of one connection, in the transaction the bench rolls back."""

    def __init__(self, conn: AsyncConnection[Any]) -> None:
        self.conn = conn

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        yield self.conn


Call = Callable[[Store, Params], Awaitable[object]]


def _said() -> ChatMessage:
    return ChatMessage(role="user", content="and then?", timestamp=datetime.now(UTC))


CALLS: list[tuple[str, Call]] = [
    ("llm_step: the run's transcript", lambda s, p: s.load_transcript(p.run, p.run_length)),
    ("llm_step: a retried step's record", lambda s, p: s.recorded_step(p.run, 7)),
    ("llm_step: context plan, last count", lambda s, p: ContextRecords(s).load(p.run, 12)),
    ("run seed: last debrief (72 h)", lambda s, p: DebriefStore(s).latest(p.agent, 72)),
    (
        "run seed: relevant lessons",
        lambda s, p: LessonStore(s).relevant(p.agent, TASK, limit=5, exclude_run=p.run),
    ),
    ("chat: the agent's last run", lambda s, p: DebriefStore(s).last_run(p.agent)),
    (
        "chat: a session's window",
        lambda s, p: SessionStore(s).load(
            p.agent, p.session, window=(WINDOW_MESSAGES, WINDOW_BYTES)
        ),
    ),
    (
        "session history: a page",
        lambda s, p: SessionStore(s).load(p.agent, p.session, offset=0, max_bytes=1_000_000),
    ),
    ("debrief: a run's", lambda s, p: DebriefStore(s).get(p.run)),
    (
        "chat: a turn's write",
        lambda s, p: SessionStore(s).append(p.agent, p.session, 10, [_said()]),
    ),
    ("lessons --agent", lambda s, p: LessonStore(s).listed(p.agent, limit=200)),
    ("lessons (every agent)", lambda s, p: LessonStore(s).listed(None, limit=200)),
]


async def product_statements(
    conn: AsyncConnection[Any], params: Params
) -> list[tuple[str, Any, Any]]:
    """(label, query, parameters) of each statement the calls send, recorded on `conn` in a
    transaction rolled back (a listing of lessons deletes the expired ones first)."""
    store = Store(cast(Any, _OneConnection(conn)))
    statements: list[tuple[str, Any, Any]] = []
    try:
        for label, call in CALLS:
            with recording() as sent:
                await call(store, params)
            for i, (query, args) in enumerate(sent):
                statements.append(
                    (f"{label}{f' ({i + 1}/{len(sent)})' if len(sent) > 1 else ''}", query, args)
                )
    finally:
        await conn.rollback()
    return statements


@dataclass(frozen=True)
class Measured:
    ms: float
    plan: str
    rows_read: int
    buffers: int

    def cells(self) -> list[str]:
        return [f"{self.ms:.2f}", self.plan, f"{self.rows_read:,}", f"{self.buffers:,}"]


def _shape(root: dict[str, Any]) -> tuple[str, int]:
    """How the plan reads tables (each scan, its index; a sort of many rows), and the rows
    its scans read from tables' heaps (`heap_rows_read`)."""
    parts: list[str] = []
    for n in plan_nodes(root):
        if (name := scan_names(n)) is not None:
            parts.append(name)
        if n["Node Type"] == "Sort" and n.get("Actual Rows", 0) * n.get("Actual Loops", 1) > 1000:
            parts.append(f"Sort of {n['Actual Rows'] * n['Actual Loops']:,}")
    return ", ".join(dict.fromkeys(parts)) or root["Node Type"], heap_rows_read(root)


async def measure(conn: AsyncConnection[Any], query: Any, params: Any) -> Measured:
    """EXPLAIN ANALYZE (TIMING OFF) `query` REPEAT times after a warm-up, each in a
    transaction rolled back: the median execution time and the last plan's shape."""
    text = query.as_string(conn) if isinstance(query, sql.Composable) else query
    if isinstance(text, bytes):
        text = text.decode()
    times: list[float] = []
    plan: dict[str, Any] = {}
    for _ in range(REPEAT + 1):
        async with conn.transaction(force_rollback=True):
            cur = await conn.execute(
                f"EXPLAIN (ANALYZE, TIMING OFF, BUFFERS, FORMAT JSON) {text}", params
            )
            row = await cur.fetchone()
        assert row is not None
        plan = row[0][0]
        times.append(plan["Execution Time"])
    root = plan["Plan"]
    shape, rows = _shape(root)
    buffers = root.get("Shared Hit Blocks", 0) + root.get("Shared Read Blocks", 0)
    return Measured(statistics.median(times[1:]), shape, rows, buffers)


async def prune_now(store: Store) -> tuple[dict[str, int], float, list[float]]:
    """`prune` as it is, for real: rows deleted, seconds, and each statement's seconds."""
    took: list[float] = []
    execute = psycopg.AsyncCursor.execute

    async def timed(
        self: psycopg.AsyncCursor[Any], query: Any, params: Any = None, **kw: Any
    ) -> Any:
        started = time.perf_counter()
        try:
            return await execute(self, query, params, **kw)
        finally:
            took.append(time.perf_counter() - started)

    start = time.perf_counter()
    with mock.patch.object(psycopg.AsyncCursor, "execute", timed):
        deleted = await prune(store, PRUNE_AGE)
    return deleted, time.perf_counter() - start, took


@contextlib.asynccontextmanager
async def scratch_database() -> AsyncIterator[str]:
    """A new database on DATABASE_URL's server (or an embedded one), dropped after."""
    import os

    base = os.environ.get("DATABASE_URL")
    postgres = None
    if base is None:
        postgres = _start_postgres(Path(tempfile.mkdtemp(prefix="rt-bench-pg-")))
        base = str(postgres.get_uri())
    parts = urlsplit(base)
    name = f"{parts.path.lstrip('/') or 'postgres'}_scale_{uuid.uuid4().hex[:6]}"
    async with await psycopg.AsyncConnection.connect(base, autocommit=True) as conn:
        await conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        async with await psycopg.AsyncConnection.connect(base, autocommit=True) as conn:
            await conn.execute(
                sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name))
            )
        if postgres is not None:
            postgres.cleanup()


async def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--runs", type=int, default=50_000, help="runs to load (default 50,000)")
    args = p.parse_args()
    runs = 10_000 if args.quick and args.runs == 50_000 else args.runs
    scale = Scale.of(runs)
    print(f"\n## data_scale — the product's statements at {runs:,} runs")
    print(f"_{machine()}_\n")
    async with scratch_database() as url:
        before = [m for m in MIGRATIONS if m[0] <= BEFORE_MIGRATION]
        with mock.patch.object(store_module, "MIGRATIONS", before):
            store = await Store.open(url, max_size=2)
        try:
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                log(f"loading {runs:,} runs")
                took = await load(conn, scale)
                log(f"loaded in {sum(took.values()):.0f} s")
                await print_sizes(conn)
                params = await parameters(conn)
                await drop_helpers(conn)
                figures = await measure_all(url, params, "before", scale.long_run_events)
                start = time.perf_counter()
                await store.migrate()
                migrated = time.perf_counter() - start
                await conn.execute("ANALYZE agent_lessons")
                after = await measure_all(url, params, "after", scale.long_run_events)
                print(
                    f"\nMigrations {BEFORE_MIGRATION + 1}–{MIGRATIONS[-1][0]} applied in"
                    f" {migrated:.2f} s.\n"
                )
                print_figures(figures, after)
                await lessons_sent_again(url, params.agent, params.run)
                skewed, typical = await cases(conn, params.run, params.agent)
                print_again(await all_again(url, again_calls(CALLS), skewed, typical))
                await catch_up(conn, scale.long_run_events)
                log("prune, as it was (rolled back)")
                old, old_s = await prune_before(conn)
                await conn.execute("VACUUM ANALYZE run_events, run_messages, run_context")
            log("prune, as it is")
            new, new_s, statements = await prune_now(store)
        finally:
            await store.close()
    print(f"\n### prune --older-than {PRUNE_AGE.days}\n")
    print_table(
        ["", "rows deleted", "statements (a transaction each)", "seconds", "longest statement"],
        [
            ["before: a statement a table, one transaction",
             ", ".join(f"{t} {old[t]:,}" for t in (*PRUNED_TABLES, "agent_lessons")), "1",
             f"{old_s:.1f}",
             f"{old_s:.1f} s (all of it)"],
            ["after: batches of runs, a transaction each",
             ", ".join(f"{t} {new[t]:,}" for t in (*PRUNED_TABLES, "agent_lessons")),
             f"{len(statements):,}",
             f"{new_s:.1f}", f"{max(statements):.2f} s"],
        ],
    )  # fmt: skip


async def parameters(conn: AsyncConnection[Any]) -> Params:
    cur = await conn.execute(
        "SELECT r.run_id, (SELECT count(*) FROM run_messages m WHERE m.run_id = r.run_id)"
        " FROM scale_runs r WHERE i = (SELECT max(i) / 2 FROM scale_runs) / 10 * 10"
    )
    row = await cur.fetchone()
    assert row is not None
    cur = await conn.execute(
        "SELECT session_id FROM scale_sessions WHERE agent_id = %s ORDER BY j LIMIT 1 OFFSET"
        " (SELECT count(*) / 2 FROM scale_sessions WHERE agent_id = %s)",
        (BUSY_AGENT, BUSY_AGENT),
    )
    session = await cur.fetchone()
    assert session is not None
    return Params(run=row[0], run_length=int(row[1]), agent=BUSY_AGENT, session=session[0])


async def print_sizes(conn: AsyncConnection[Any]) -> None:
    cur = await conn.execute(
        "SELECT relname, n_live_tup, pg_size_pretty(pg_total_relation_size(relid))"
        " FROM pg_stat_user_tables WHERE relname NOT LIKE 'scale_%' ORDER BY relname"
    )
    rows = await cur.fetchall()
    print_table(["table", "rows", "size with indexes"], [[r[0], f"{r[1]:,}", r[2]] for r in rows])


Figures = list[tuple[str, Measured]]


async def measure_all(url: str, params: Params, when: str, long_run: int) -> Figures:
    log(f"measuring the product's statements ({when})")
    async with await psycopg.AsyncConnection.connect(url) as recorder:
        with lessons_before() if when == "before" else contextlib.nullcontext():
            statements = await product_statements(recorder, params)
    figures: Figures = []
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for label, query, args in statements:
            figures.append((label, await measure(conn, query, args)))
        for offset, label in ((0, "from its start"), (long_run // 2, "from its middle")):
            query, args = (
                (BATCH_QUERY_BEFORE, (LONG_RUN, offset, BATCH)) if when == "before"
                else (BATCH_QUERY, (LONG_RUN, offset, offset + BATCH, BATCH))
            )  # fmt: skip
            figures.append(
                (f"watch: a batch of the long run, {label}", await measure(conn, query, args))
            )
        query, args = (
            (BATCH_QUERY_BEFORE, (params.run, 0, BATCH)) if when == "before"
            else (BATCH_QUERY, (params.run, 0, BATCH, BATCH))
        )  # fmt: skip
        figures.append(("watch: a run's events", await measure(conn, query, args)))
    return figures


def print_figures(before: Figures, after: Figures) -> None:
    """Each statement's median ms and plan, before and after (the same statements in the
    same order: the calls send the same ones whatever the schema)."""
    assert [label for label, _ in before] == [label for label, _ in after]

    def how(m: Measured) -> str:
        return f"{m.plan} · {m.rows_read:,} rows read · {m.buffers:,} buffers"

    print_table(
        ["statement (where)", "before, ms", "after, ms", "before: plan", "after: plan"],
        [
            [label, f"{b.ms:.2f}", f"{a.ms:.2f}", how(b), how(a)]
            for (label, b), (_, a) in zip(before, after, strict=True)
        ],
    )


async def catch_up(conn: AsyncConnection[Any], events: int) -> None:
    """A watcher reading the long run from its start, a batch at a time: every statement it
    sends, as it was and as it is (wall time, on one connection)."""
    print(f"\n### A watcher reading the long run ({events:,} events) from its start\n")
    rows = []
    for label, query, bound in (
        ("before: `offset >= n … LIMIT 500`", BATCH_QUERY_BEFORE, lambda n: (BATCH,)),
        ("after: `offset` in [n, n + 500) … LIMIT 500", BATCH_QUERY, lambda n: (n + BATCH, BATCH)),
    ):
        start, offset, statements = time.perf_counter(), 0, 0
        while True:
            cur = await conn.execute(query, (LONG_RUN, offset, *bound(offset)))
            got = await cur.fetchall()
            statements += 1
            if got:
                offset = got[-1][0] + 1
            if len(got) < BATCH:
                break
        rows.append([label, f"{statements:,}", f"{offset:,}", f"{time.perf_counter() - start:.2f}"])
    print_table(["statement", "reads", "events", "seconds"], rows)


if __name__ == "__main__":
    run(main)
