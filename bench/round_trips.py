"""Round trips to Postgres per store operation, before and now, counted through a proxy.

On a busy worker every round trip holds its pooled connection until the event loop comes
back to the statement's result, which at 200 runs at once takes tens to hundreds of
milliseconds: a write's round trips, more than its CPU, are what makes the pool a queue
(bench.scale's pool waits). This script puts the tests' counting proxy
(`tests/support/pg_proxy.py`: a round trip is a burst of the client's bytes after the
server's; nothing is timed) between the store and Postgres, and reads pool checkouts from
psycopg_pool's statistics. Side by side, for each operation, the code before (as it was,
inlined here) and now:

- an LLM step's reads (the transcript rows since its last step, its context record): one
  after the other on one checkout (before) against both queries in one pipeline (now,
  `LlmActivities._step`);
- a run's memory reads as it starts (its agent's last debrief, the lessons relevant to the
  task): one after the other (before) against both in one pipeline (now, `prepare_run`);
- a quick iteration's records with their live-output events (an LLM step whose reply is a
  tool call, announced; the tool's start and end): each record and its events apart (before)
  against one round trip each (now, `activities.step_records.record_step`);
- a run's wrap-up writes (its debrief with two lessons, then its last run): in a
  `transaction()` and apart (before) against one pipelined connection (now,
  `DebriefStore.pipelined`);
- a run's first three transcript rows: `transaction()` around `executemany` (before)
  against a pipeline with `BEGIN` and `COMMIT` in it (now, `Store.put_messages`);
- 20 runs' text due at once: a transaction each (before) against the appends queued while
  one is written going out together (now, `RunEvents.append`);
- 20 runs' tool steps ending at once, each record with its tool's start and end: a round
  trip and a checkout each (before) against the records queued while one is written going
  out together, their events in the transaction after theirs (now, `StepRecords`).

    .venv/bin/python -m bench.round_trips [--quick]
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

from activities.debrief_store import DebriefStore
from activities.lesson_store import LessonStore
from activities.llm_context import ContextRecords
from activities.run_events import RunEvents, transaction
from activities.statements import UPSERT_MESSAGE, pg_json, pg_text, record_row
from activities.step_records import StepRecord, StepRecords
from activities.store import Store
from bench._stack import _start_postgres, log, machine, parser, print_table, run
from reactive_temporal.contracts.debrief import AgentDebrief, DebriefInput
from reactive_temporal.contracts.entity import RunFinished
from reactive_temporal.contracts.events import NewEvent
from reactive_temporal.contracts.llm_payloads import LlmStepResult
from reactive_temporal.contracts.run import AgentConfig, Message, SeqMessage, ToolCall, ToolResult
from tests.support.pg_proxy import CountingProxy

# -- the code before, as it was -----------------------------------------------------------


async def save_before(debriefs: DebriefStore, input: DebriefInput, debrief: AgentDebrief) -> None:
    """`DebriefStore.save` before: its statements in a `transaction()`."""
    as_json = pg_json(debrief.model_dump(mode="json"))
    async with debriefs.pool.connection() as conn, conn.transaction():
        await conn.execute(
            "INSERT INTO agent_debriefs (run_id, agent_id, task_prompt, terminated_by, output,"
            " output_format, outcome, synthesized, debrief_json, debrief_markdown, tokens_used,"
            " duration_ms, iterations) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (run_id) DO UPDATE SET debrief_json = EXCLUDED.debrief_json",
            (input.run_id, input.agent_id, input.task, input.terminated_by, "",
             input.output_format, debrief.outcome, debrief.synthesized, as_json,
             debrief.markdown, 0, 0, 0),
        )  # fmt: skip
        await conn.execute(
            "UPDATE agent_last_runs SET run = jsonb_set(run, '{debrief}', %s)"
            " WHERE agent_id = %s AND run_id = %s",
            (as_json, input.agent_id, input.run_id),
        )
        await conn.execute("DELETE FROM agent_lessons WHERE run_id = %s", (input.run_id,))
        async with conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO agent_lessons (run_id, position, agent_id, lesson)"
                " VALUES (%s, %s, %s, %s)",
                [(input.run_id, i, input.agent_id, lesson)
                 for i, lesson in enumerate(debrief.lessons_learned)],
            )  # fmt: skip


async def put_messages_before(store: Store, run_id: str, entries: list[SeqMessage]) -> None:
    """`Store.put_messages` before: `transaction()` around `executemany`."""
    rows = [
        (run_id, e.seq, e.message.role, pg_text(e.message.content), None, None, None, None, None)
        for e in entries
    ]
    async with store.pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
        await cur.executemany(UPSERT_MESSAGE, rows)


# -- measuring ------------------------------------------------------------------------------


async def measured(
    proxy: CountingProxy, store: Store, operation: Callable[[], Awaitable[None]]
) -> tuple[int, int]:
    """Round trips and pool checkouts of one `operation()`."""
    checkouts = store.pool.get_stats().get("requests_num", 0)
    proxy.round_trips = 0
    await operation()
    return proxy.round_trips, store.pool.get_stats().get("requests_num", 0) - checkouts


async def main() -> None:
    args = parser(__doc__ or "").parse_args()
    trials = 3 if args.quick else 10
    print(f"\n## round_trips — Postgres round trips per store operation, {trials} trials each")
    print(f"_{machine()}_\n")
    tmp = Path(tempfile.mkdtemp(prefix="rt-bench-"))
    postgres = None
    database_url = os.environ.get("DATABASE_URL") or ""
    if not database_url:
        log("starting embedded Postgres")
        postgres = await asyncio.to_thread(_start_postgres, tmp / "pg")
        database_url = str(postgres.get_uri())
    await (await Store.open(database_url)).close()  # migrated
    proxy = await CountingProxy(database_url).start()
    store = await Store.open(proxy.url, max_size=25, migrate=False)
    results: dict[str, list[tuple[float, int]]] = {}
    try:
        events, debriefs = RunEvents(store), DebriefStore(store)
        seed = [SeqMessage(seq=i, message=Message(role="user", content=f"m{i}")) for i in range(3)]
        call = ToolCall(id="c", name="calculator", arguments='{"expression": "6*7"}')
        reply = Message(role="assistant", tool_calls=[call])
        replied = LlmStepResult(tool_calls=[call], finish_reason="tool_calls")
        observation = Message(role="tool", content="42", tool_call_id="c", name="calculator")
        observed = ToolResult(call_id="c", name="calculator", success=True, content="42")

        def iteration(seq: int) -> tuple[NewEvent, list[NewEvent]]:
            begins = NewEvent(type="iteration", step=seq, data={}, key=f"iteration:{seq}")
            start = NewEvent(type="tool_start", step=seq + 1, data={}, key=f"tool_start:{seq}")
            end = NewEvent(type="tool_end", step=seq + 1, data={}, key=f"tool_end:{seq}")
            return begins, [start, end]

        async def records_before() -> None:
            run_id = f"rt-{uuid.uuid4().hex[:8]}"
            begins, tool = iteration(2)
            await store.record_step(run_id, 2, reply, replied)
            await events.append(run_id, [begins])
            await store.record_step(run_id, 3, observation, observed)
            await events.append(run_id, tool)

        async def records_now() -> None:
            run_id = f"rt-{uuid.uuid4().hex[:8]}"
            begins, tool = iteration(2)
            await store.record_step(run_id, 2, reply, replied, then=transaction(run_id, [begins]))
            await store.record_step(
                run_id, 3, observation, observed, then=transaction(run_id, tool)
            )

        def wrap_up() -> tuple[DebriefInput, AgentDebrief, RunFinished]:
            agent_id = f"rt-{uuid.uuid4().hex[:8]}"
            debrief = AgentDebrief(
                summary="done", outcome="success", lessons_learned=["one", "two"]
            )
            entry = DebriefInput(
                run_id=f"run-{agent_id}", agent_id=agent_id, task="t",
                terminated_by="final_answer",
            )  # fmt: skip
            finished = RunFinished(
                run_id=entry.run_id, started_at=datetime.now(UTC),
                agent=AgentConfig(agent_id=agent_id, model="m"), debrief=debrief,
            )  # fmt: skip
            return entry, debrief, finished

        async def wrap_up_before() -> None:
            entry, debrief, finished = wrap_up()
            await save_before(debriefs, entry, debrief)
            await debriefs.keep_last_run(finished)

        async def wrap_up_now() -> None:
            entry, debrief, finished = wrap_up()
            async with debriefs.pipelined() as conn:
                await debriefs.save(entry, debrief, conn=conn)
                await debriefs.keep_last_run_on(conn, finished)

        async def messages_before() -> None:
            await put_messages_before(store, f"rt-{uuid.uuid4().hex[:8]}", seed)

        async def messages_now() -> None:
            await store.put_messages(f"rt-{uuid.uuid4().hex[:8]}", seed)

        text = NewEvent(type="text", step=1, data={"delta": "a piece of the reply"})

        async def alone(run_id: str) -> None:
            async with store.pool.connection() as conn:
                await conn.execute(transaction(run_id, [text]))

        async def texts_before() -> None:
            await asyncio.gather(*(alone(f"rt-{uuid.uuid4().hex[:8]}") for _ in range(20)))

        async def texts_now() -> None:
            runs = [f"rt-{uuid.uuid4().hex[:8]}" for _ in range(20)]
            await asyncio.gather(*(events.append(r, [text]) for r in runs))

        step_records = StepRecords(store)

        async def steps_before() -> None:
            async def one(run_id: str) -> None:
                await store.record_step(
                    run_id, 3, observation, observed, then=transaction(run_id, iteration(2)[1])
                )

            await asyncio.gather(*(one(f"rt-{uuid.uuid4().hex[:8]}") for _ in range(20)))

        async def steps_now() -> None:
            async def one(run_id: str) -> None:
                row = record_row(run_id, 3, observation, observed)
                await step_records.write(StepRecord(run_id, row, events=iteration(2)[1]))

            await asyncio.gather(*(one(f"rt-{uuid.uuid4().hex[:8]}") for _ in range(20)))

        records = ContextRecords(store)
        read_run = f"rt-{uuid.uuid4().hex[:8]}"
        await store.put_messages(read_run, seed)

        async def reads_before() -> None:
            async with store.connection() as conn:
                await store.load_transcript(read_run, 3, from_seq=2, conn=conn)
                await records.load(read_run, 3, conn=conn)

        async def reads_now() -> None:
            async with store.connection() as conn:
                async with conn.pipeline():
                    reading = await store.begin_transcript(read_run, 3, 2, conn)
                    loading = await records.begin_load(read_run, 3, conn)
                await reading()
                await loading()

        lessons = LessonStore(store)

        async def memory_before() -> None:
            await debriefs.latest("rt-agent", 72)
            await lessons.relevant("rt-agent", "count the stock", limit=5)

        async def memory_now() -> None:
            async with store.connection() as conn:
                async with conn.pipeline():
                    last = await debriefs.begin_latest(conn, "rt-agent", 72)
                    relevant = await lessons.begin_relevant(
                        conn, "rt-agent", "count the stock", limit=5
                    )
                await last()
                await relevant()

        operations = {
            "memory": (memory_before, memory_now),
            "reads": (reads_before, reads_now),
            "records": (records_before, records_now),
            "wrap-up": (wrap_up_before, wrap_up_now),
            "messages": (messages_before, messages_now),
            "texts": (texts_before, texts_now),
            "steps": (steps_before, steps_now),
        }
        for before, now in operations.values():  # warm: connections open, checked
            await before()
            await now()
        for trial in range(trials):
            log(f"trial {trial + 1}/{trials}")
            for name, (before, now) in operations.items():
                for version, operation in (("before", before), ("now", now)):
                    results.setdefault(f"{name} {version}", []).append(
                        await measured(proxy, store, operation)
                    )
    finally:
        await store.close()
        await proxy.stop()
        if postgres is not None:
            await asyncio.to_thread(postgres.cleanup)
        shutil.rmtree(tmp, ignore_errors=True)

    def cell(key: str) -> str:
        trips = statistics.median(t for t, _ in results[key])
        checkouts = statistics.median(c for _, c in results[key])
        return f"{trips:g} · {checkouts:g}"

    labels = {
        "memory": "a run's memory reads as it starts (last debrief, lessons)",
        "reads": "an LLM step's reads (new transcript rows, context record)",
        "records": "a quick iteration's records with their events",
        "wrap-up": "a run's wrap-up writes (debrief with 2 lessons, last run)",
        "messages": "a run's first 3 transcript rows",
        "texts": "20 runs' text due at once (all 20 together)",
        "steps": "20 runs' tool steps ending at once: records with their events",
    }
    print("Round trips · pool checkouts, medians.\n")
    print_table(
        ["operation", "before", "now"],
        [[label, cell(f"{name} before"), cell(f"{name} now")] for name, label in labels.items()],
    )


if __name__ == "__main__":
    run(main)
