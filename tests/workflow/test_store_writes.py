"""The store's writes are all or nothing, and leave their pooled connection ready: the pool's
connections are in autocommit (one round trip a statement), so a write of several statements
is atomic only because it says so. Real Postgres."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import psycopg
import pytest
from openai.types.chat import ChatCompletion
from psycopg import pq, sql
from psycopg.conninfo import make_conninfo

import activities.pool as pool_module
import activities.store as store_module
from activities import run_events
from activities.debrief_store import DebriefStore
from activities.llm_usage import MAX_TOKENS_PER_CALL, usage_of
from activities.request_messages import to_openai
from activities.retention import PRUNED_TABLES, prune
from activities.run_events import RunEvents
from activities.step_records import StepRecords, record_step
from activities.store import Store, StoreUnavailable, is_outage
from reactive_temporal.contracts.debrief import AgentDebrief, DebriefInput, DebriefMetrics
from reactive_temporal.contracts.events import NewEvent
from reactive_temporal.contracts.run import Message, SeqMessage, ToolCall
from tests.conftest import wait_for
from tests.support.steps import attempt, transactions_of

pytestmark = pytest.mark.workflow

TOO_BIG = 2**40
"""Not an INTEGER: Postgres refuses the row."""


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    store = await Store.open(database_url, max_size=1)  # every call gets the same connection
    try:
        yield store
    finally:
        await store.close()


def conninfo_with(database_url: str, **changes: str) -> str:
    return make_conninfo(database_url, **changes)


async def events_of(store: Store, run_id: str) -> list[tuple[int, str, int]]:
    async with store.pool.connection() as conn:
        cur = await conn.execute(
            'SELECT "offset", type, step FROM run_events WHERE run_id = %s ORDER BY "offset"',
            (run_id,),
        )
        return [tuple(r) for r in await cur.fetchall()]  # type: ignore[misc]


async def idle(store: Store) -> bool:
    async with store.pool.connection() as conn:
        return conn.info.transaction_status == pq.TransactionStatus.IDLE


async def test_an_append_that_fails_part_way_writes_none_of_its_events(store: Store):
    events = RunEvents(store)
    run_id = f"run-append-{uuid.uuid4().hex[:8]}"
    with pytest.raises(psycopg.errors.NumericValueOutOfRange):
        await events.append(
            run_id,
            [
                NewEvent(type="iteration", step=2, data={"iteration": 1}, key="iteration:2"),
                NewEvent(type="text", step=TOO_BIG, data={"delta": "lost"}),
            ],
        )
    assert await events_of(store, run_id) == []
    assert await idle(store)  # the failed transaction did not stay open on the connection
    await events.append(
        run_id,
        [
            NewEvent(type="iteration", step=2, data={"iteration": 1}, key="iteration:2"),
            NewEvent(type="text", step=2, data={"delta": "kept"}),
        ],
    )
    assert await events_of(store, run_id) == [(0, "iteration", 2), (1, "text", 2)]
    assert await idle(store)


async def test_appends_made_while_one_is_written_go_out_together(store: Store):
    """Many runs streaming at once write their text in a few transactions, not one each
    (each was a pool checkout and a round trip), every run's events at its own offsets."""
    events = RunEvents(store)
    runs = [f"run-batch-{uuid.uuid4().hex[:8]}" for _ in range(20)]
    await asyncio.gather(
        *(
            events.append(run_id, [NewEvent(type="text", step=1, data={"delta": f"hi {i}"})])
            for i, run_id in enumerate(runs)
        )
    )
    assert await transactions_of(store, runs) <= 2
    for run_id in runs:
        assert await events_of(store, run_id) == [(0, "text", 1)]
    assert await idle(store)


async def test_one_bad_append_among_many_costs_only_its_own_events(store: Store):
    events = RunEvents(store)
    good = [f"run-good-{uuid.uuid4().hex[:8]}" for _ in range(5)]
    bad = f"run-bad-{uuid.uuid4().hex[:8]}"
    outcomes = await asyncio.gather(
        events.append(good[0], [NewEvent(type="text", step=1, data={"delta": "first"})]),
        *(
            events.append(r, [NewEvent(type="text", step=1, data={"delta": "ok"})])
            for r in good[1:]
        ),
        events.append(bad, [NewEvent(type="text", step=TOO_BIG, data={"delta": "lost"})]),
        return_exceptions=True,
    )
    assert outcomes[:-1] == [None] * len(good)
    assert isinstance(outcomes[-1], psycopg.errors.NumericValueOutOfRange)
    for run_id in good:
        assert await events_of(store, run_id) == [(0, "text", 1)]
    assert await events_of(store, bad) == []
    assert await idle(store)


async def test_messages_that_fail_part_way_write_none_of_them(store: Store):
    run_id = f"run-put-{uuid.uuid4().hex[:8]}"
    rows = [
        SeqMessage(seq=0, message=Message(role="system", content="written with the rest")),
        SeqMessage(seq=TOO_BIG, message=Message(role="user", content="refused")),
    ]
    with pytest.raises(psycopg.errors.NumericValueOutOfRange):
        await store.put_messages(run_id, rows)
    assert await store.load_transcript(run_id) == []
    assert await idle(store)
    await store.put_messages(run_id, rows[:1])
    assert [e.message.content for e in await store.load_transcript(run_id)] == [
        "written with the rest"
    ]


async def test_an_appended_event_keeps_every_character_it_was_given(store: Store):
    """The append's values are quoted into its one query string by psycopg: text that looks
    like SQL, quotes, backslashes, dollar quotes and non-ASCII arrive as they were sent."""
    events = RunEvents(store)
    run_id = f"run-quote-{uuid.uuid4().hex[:6]}'; DROP TABLE run_events; --"
    hostile = "it's \\'; DROP TABLE run_events; -- $$ $x$ \\x00 E'\\n' ünï 🧪 \u2028"
    await events.append(
        run_id,
        [
            NewEvent(type="text", step=1, data={"delta": hostile, "n": [1, None, True]}),
            NewEvent(type="tool_start", step=2, data={"tool": hostile}, key=f"k'{hostile}"),
        ],
    )
    async with store.pool.connection() as conn:
        cur = await conn.execute(
            'SELECT "offset", data, key FROM run_events WHERE run_id = %s ORDER BY "offset"',
            (run_id,),
        )
        rows = await cur.fetchall()
    assert rows == [
        (0, {"delta": hostile, "n": [1, None, True]}, None),
        (1, {"tool": hostile}, f"k'{hostile}"),
    ]
    assert await idle(store)


async def test_the_pool_checks_only_connections_that_sat_idle(store: Store, monkeypatch):
    """The check is a round trip per checkout; a connection just returned is handed out
    unchecked, one idle past CHECK_AFTER_IDLE is checked."""
    checked: list[int] = []
    real = store_module.AsyncConnectionPool.check_connection

    async def counted(conn):
        checked.append(conn.info.backend_pid)
        await real(conn)

    monkeypatch.setattr(store_module.AsyncConnectionPool, "check_connection", counted)
    for _ in range(3):
        async with store.pool.connection() as conn:
            await conn.execute("SELECT 1")
    assert len(checked) <= 1  # the first checkout's connection may not have been returned yet
    monkeypatch.setattr(pool_module, "CHECK_AFTER_IDLE", 0.0)
    async with store.pool.connection() as conn:
        await conn.execute("SELECT 1")
    assert len(checked) >= 1 and checked[-1] == conn.info.backend_pid


async def test_a_recently_used_connection_a_restart_broke_fails_once_as_an_outage(
    store: Store, database_url: str
):
    """Unchecked, a connection whose server process went away fails its statement as an
    outage (which callers retry); the pool drops it and the next statement reconnects."""
    async with store.pool.connection() as conn:
        pid = conn.info.backend_pid
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(psycopg.OperationalError) as failed:
        await store.recorded_step("run-broken", 1)
    assert is_outage(failed.value)
    assert await store.recorded_step("run-broken", 1) is None  # a fresh connection
    async with store.pool.connection() as conn:
        assert conn.info.backend_pid != pid


async def test_a_runs_first_rows_and_many_runs_text_take_one_round_trip_each(
    database_url: str,
):
    """Counted at a proxy in front of Postgres: a run's first transcript rows go in one
    round trip (BEGIN and COMMIT pipelined with them; `transaction()` took three), and 20
    runs' text due at once in one (it was one each)."""
    from tests.support.pg_proxy import CountingProxy

    proxy = await CountingProxy(database_url).start()
    store = await Store.open(proxy.url, max_size=1)
    try:
        run_id = f"run-trips-{uuid.uuid4().hex[:8]}"
        seed = [SeqMessage(seq=i, message=Message(role="user", content=f"m{i}")) for i in range(3)]
        await idle(store)  # the pool's connection, used: not checked again
        proxy.round_trips = 0
        await store.put_messages(run_id, seed)
        assert proxy.round_trips == 1
        assert [m.content for m in await store.load_messages(run_id)] == ["m0", "m1", "m2"]

        events = RunEvents(store)
        runs = [f"run-trips-{uuid.uuid4().hex[:8]}" for _ in range(20)]
        proxy.round_trips = 0
        await asyncio.gather(
            *(events.append(r, [NewEvent(type="text", step=1, data={"delta": "hi"})]) for r in runs)
        )
        assert proxy.round_trips <= 2
    finally:
        await store.close()
        await proxy.stop()


async def test_a_burst_of_checkouts_up_to_a_third_of_the_pool_waits_for_none(database_url: str):
    """The pool opens a third of its connections up front: runs that start together do not
    queue while it grows one connection at a time (they did with one up front, and a few did
    with a quarter at 1,000 runs)."""
    store = await Store.open(database_url, max_size=12)
    held = asyncio.Event()
    holding: list[None] = []
    try:

        async def hold() -> None:
            async with store.pool.connection():
                holding.append(None)
                await held.wait()

        holders = [asyncio.create_task(hold()) for _ in range(4)]
        await wait_for(lambda: len(holding) == 4)  # all four hold one (a sleep could see none)
        stats = store.pool.get_stats()
        held.set()
        await asyncio.gather(*holders)
        assert stats.get("requests_waiting", 0) == 0 and stats.get("requests_queued", 0) == 0
        assert stats["pool_size"] == 4
    finally:
        await store.close()


async def test_a_runs_events_are_one_call_of_the_database_function():
    """Each run's events go in one `append_run_events` call, whose statements Postgres plans
    once a session, not one INSERT per event planned every time (bench/README.md)."""
    text = run_events.transaction_of(
        [
            ("run-b", [NewEvent(type="text", step=1, data={"delta": "INSERT"})] * 3),
            ("run-a", [NewEvent(type="iteration", step=1, data={})]),
            ("run-b", [NewEvent(type="text", step=2, data={"delta": "x"})]),
        ]
    ).as_string(None)
    assert text.startswith("BEGIN; SELECT append_run_events('run-a'") and text.endswith("COMMIT")
    assert text.count("SELECT append_run_events(") == 2
    assert "INSERT INTO" not in text


async def test_many_writers_of_one_run_get_dense_offsets_and_its_keyed_event_once(
    store: Store, database_url: str
):
    """Two workers' pools appending to one run at once, a keyed event among them sent six
    times (a retried tool step): every event at the next offset, none skipped, the keyed one
    written once."""
    other = await Store.open(database_url, max_size=4)
    try:
        writers = [RunEvents(store), RunEvents(other)]
        run_id = f"run-dense-{uuid.uuid4().hex[:8]}"
        started = NewEvent(type="tool_start", step=2, data={"tool": "t"}, key="tool_start:2")
        await asyncio.gather(
            *(
                writers[i % 2].append(
                    run_id, [NewEvent(type="text", step=1, position=i, data={"delta": "x"})]
                )
                for i in range(40)
            ),
            *(writers[i % 2].append(run_id, [started]) for i in range(6)),
        )
        written = await events_of(store, run_id)
        assert [offset for offset, _, _ in written] == list(range(41))
        assert [type for _, type, _ in written].count("tool_start") == 1
    finally:
        await other.close()


PREVIOUS_APPEND = """INSERT INTO run_events (run_id, "offset", type, step, position, data, key)
SELECT %(run)s, coalesce(max("offset"), -1) + 1, 'text', 1, 0, '{}', %(key)s
FROM run_events WHERE run_id = %(run)s
ON CONFLICT (run_id, key) WHERE key IS NOT NULL DO NOTHING"""
"""How a release before migration 10 appended an event, after taking the run's lock."""


async def test_a_worker_of_the_previous_release_and_this_one_share_a_runs_offsets(
    store: Store, database_url: str
):
    """During a rolling deploy both kinds of worker write one run's events: they take the same
    lock, so the offsets stay dense and a key is still written once."""
    run_id = f"run-mixed-{uuid.uuid4().hex[:8]}"
    previous = await psycopg.AsyncConnection.connect(database_url, autocommit=True)

    async def previous_release(key: str | None) -> None:
        async with previous.transaction():
            await previous.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (run_id,))
            await previous.execute(PREVIOUS_APPEND, {"run": run_id, "key": key})

    try:
        events = RunEvents(store)
        for i in range(10):
            await asyncio.gather(
                previous_release("tool_end:3" if i == 4 else None),
                events.append(
                    run_id,
                    [
                        NewEvent(type="text", step=1, data={"delta": "now"}),
                        NewEvent(type="tool_end", step=3, data={}, key="tool_end:3"),
                    ],
                ),
            )
        written = await events_of(store, run_id)
        assert [offset for offset, _, _ in written] == list(range(len(written)))
        assert [type for _, type, _ in written].count("text") == 10 + 9
        assert len(written) == 10 + 9 + 1
    finally:
        await previous.close()


async def test_a_store_that_cannot_connect_says_why_without_the_password(database_url: str):
    """The pool says only that it timed out ("pool initialization incomplete after 15 sec");
    the error names Postgres's reason, and never the password in the connection string."""
    missing = psycopg.conninfo.make_conninfo(
        database_url, dbname=f"missing_{uuid.uuid4().hex[:8]}", password="S3cretPW"
    )
    with pytest.raises(store_module.StoreUnavailable) as refused:
        await Store.open(missing)
    assert "does not exist" in str(refused.value)
    assert "S3cretPW" not in str(refused.value) and "password=***" in str(refused.value)


async def test_a_debrief_of_a_long_run_with_billions_of_tokens_is_stored(store: Store):
    """A run that waited 25 days for approval (approval_timeout_seconds allows a year), with 3
    billion tokens: its debrief's write failed for good ("integer out of range"), so it had no
    debrief and no lessons, and a trivial run, which writes it itself, never ended."""
    run_id = f"long-{uuid.uuid4().hex[:8]}"
    ran = DebriefInput(task="t", agent_id="a", run_id=run_id, terminated_by="end_turn")
    long_days = 25 * 86_400_000
    metrics = DebriefMetrics(duration_ms=long_days, iterations=3, tokens=3_000_000_000)
    debrief = AgentDebrief(outcome="success", summary="Done.", metrics=metrics)
    await DebriefStore(store).save(ran, debrief)
    async with store.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT tokens_used, duration_ms FROM agent_debriefs WHERE run_id = %s", (run_id,)
        )
        assert await cur.fetchone() == (3_000_000_000, long_days)


def test_a_reported_usage_is_taken_up_to_a_call_s_worth():
    """An endpoint's usage of 10**30 tokens went into budgets, metrics and the store as it was."""
    reply = ChatCompletion.model_validate(
        {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [],
            "usage": {"prompt_tokens": 10**30, "completion_tokens": 5, "total_tokens": 10**30},
        }
    )
    usage = usage_of(reply, {})
    assert (usage.prompt_tokens, usage.completion_tokens) == (MAX_TOKENS_PER_CALL, 5)


async def test_prune_deletes_runs_idle_past_the_age_and_keeps_the_rest(store: Store):
    """A run idle 40 days goes from every table; one written today stays, and so does a run
    begun 40 days ago that wrote today (still going): its whole live output and transcript."""
    old, recent, going = (f"run-prune-{uuid.uuid4().hex[:8]}" for _ in range(3))
    async with store.pool.connection() as conn:
        for run_id, ages in ((old, [40, 41]), (recent, [0]), (going, [40, 0])):
            for seq, age in enumerate(ages):
                at = f"now() - interval '{age} days'"
                await conn.execute(
                    'INSERT INTO run_events (run_id, "offset", type, step, data, created_at)'
                    f" VALUES (%s, %s, 'text', 1, '{{}}', {at})",
                    (run_id, seq),
                )
                await conn.execute(
                    "INSERT INTO run_messages (run_id, seq, role, content, created_at)"
                    f" VALUES (%s, %s, 'user', 'hi', {at})",
                    (run_id, seq),
                )
                await conn.execute(
                    f"INSERT INTO run_context (run_id, seq, created_at) VALUES (%s, %s, {at})",
                    (run_id, seq),
                )
    with pytest.raises(ValueError, match="at least 1 day"):
        await prune(store, timedelta(hours=12))
    deleted = await prune(store, timedelta(days=30))
    assert {table: deleted[table] >= 2 for table in PRUNED_TABLES} == dict.fromkeys(
        PRUNED_TABLES, True
    )
    async with store.pool.connection() as conn:
        for table in PRUNED_TABLES:
            cur = await conn.execute(
                f"SELECT run_id, count(*) FROM {table} WHERE run_id = ANY(%s) GROUP BY run_id",
                ([old, recent, going],),
            )
            assert dict(await cur.fetchall()) == {recent: 1, going: 2}, table  # type: ignore[arg-type]


async def test_what_an_endpoint_sent_with_a_call_is_stored_and_sent_back(store: Store):
    """A call's `extra_content` (Gemini 3's thought signature) is stored with the transcript
    and sent back as it came, but never carried in a workflow's payloads."""
    signature = {"google": {"thought_signature": "abc=="}}
    call = ToolCall(id="fc1", name="calculator", arguments="{}", extra_content=signature)
    run_id = f"run-extra-{uuid.uuid4().hex[:8]}"
    await store.put_messages(
        run_id, [SeqMessage(seq=0, message=Message(role="assistant", tool_calls=[call]))]
    )
    [stored] = await store.load_transcript(run_id)
    assert to_openai(stored.message)["tool_calls"][0]["extra_content"] == signature
    assert "extra_content" not in call.model_dump_json()


async def test_a_worker_that_cannot_write_is_refused_at_its_start(store: Store, database_url: str):
    """A read-only server (a primary failed over to a standby) or a role with SELECT only:
    the worker started without a word and every run failed its first step as the model's
    error, then retried its wrap-up forever. Now it does not start, saying why; a run's
    writes refused so later are an outage, waited out."""
    read_only = conninfo_with(database_url, options="-c default_transaction_read_only=on")
    with pytest.raises(StoreUnavailable, match="takes no writes"):
        await Store.open(read_only, max_size=1)
    role = f"reader_{uuid.uuid4().hex[:8]}"
    async with store.pool.connection() as conn:
        await conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        try:
            await conn.execute(
                sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA public TO {}").format(
                    sql.Identifier(role)
                )
            )
            with pytest.raises(StoreUnavailable, match=f"role {role} may not insert.*run_events"):
                await Store.open(conninfo_with(database_url, user=role), max_size=1)
        finally:
            await conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            await conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
    assert is_outage(psycopg.errors.ReadOnlySqlTransaction())


async def test_connections_a_restart_broke_are_found_in_one_sweep(database_url: str, monkeypatch):
    """Every idle connection is broken once Postgres restarts: the pool found them one
    checkout at a time, pausing 1, 2, 4, 8 s between them (a worker stalled 20-40 s after
    Postgres was back). The first that fails its check has the pool check the rest at once."""
    monkeypatch.setattr(pool_module, "CHECK_AFTER_IDLE", 0.0)
    failed: list[int] = []
    real = pool_module.IdleChecks.check

    async def counted(self, conn):
        try:
            await real(self, conn)
        except Exception:
            failed.append(conn.info.backend_pid)
            raise

    monkeypatch.setattr(pool_module.IdleChecks, "check", counted)
    name = f"sweep-{uuid.uuid4().hex[:8]}"
    store = await Store.open(conninfo_with(database_url, application_name=name), max_size=12)
    try:
        await wait_for(lambda: store.pool.get_stats().get("pool_available", 0) >= 4)
        with psycopg.connect(database_url, autocommit=True) as admin:
            ended = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE application_name = %s",
                (name,),
            ).fetchone()
        assert ended is not None and ended[0] >= 4
        async with store.pool.connection() as conn:
            await conn.execute("SELECT 1")
        assert len(failed) == 1, failed
    finally:
        await store.close()


async def test_a_step_s_live_output_is_written_after_an_outage_took_its_record_s_write(
    store: Store, monkeypatch
):
    """The record and the step's last events go together; when that write fails (Postgres
    gone a moment), the record goes again alone, and the events were dropped: a watcher saw
    the tool start and never end. They are written once the record is."""
    records = StepRecords(store)
    real = records.write
    failed: list[int] = []

    async def first_fails(record):
        if not failed:
            failed.append(1)
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        await real(record)

    monkeypatch.setattr(records, "write", first_fails)
    run_id = f"run-outage-{uuid.uuid4().hex[:8]}"
    ended = NewEvent(type="tool_end", step=3, data={"tool": "calculator"}, key="tool_end:3")
    await attempt(2).run(
        record_step,
        records,
        run_id,
        3,
        Message(role="tool", content="42", tool_call_id="c1"),
        SeqMessage(seq=3, message=Message(role="tool", content="42")),
        events=[ended],
        what="recording the tool's result",
    )
    assert failed == [1]
    assert [e[1] for e in await events_of(store, run_id)] == ["tool_end"]
