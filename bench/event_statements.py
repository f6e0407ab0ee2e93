"""What a step's record with its live-output events costs Postgres, before and now.

Every LLM step writes its record with its last events (the iteration, its text), every tool
step its record with the tool's start and end, in one query string
(`activities.step_records.record_step`). Before, each event was an `INSERT … SELECT
max("offset") … ON CONFLICT` of its own, after a statement taking the run's lock and before
one NOTIFYing its watchers, all sent as text: Postgres parsed and planned each anew. Now a
run's events are one call of `append_run_events` (migration 10), whose statements Postgres
plans once a session.

One embedded Postgres, one connection, the two interleaved round by round; Postgres's CPU is
its backend process's (Linux /proc, 10 ms ticks: hence many writes a round), the worker's the
event-loop thread's.

    .venv/bin/python -m bench.event_statements [--quick]
"""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from psycopg import sql
from psycopg.types.json import Jsonb

from activities.run_events import transaction
from activities.store import Store
from bench._stack import _start_postgres, cpu_seconds, log, machine, parser, print_table, run
from reactive_temporal.contracts.events import NewEvent
from reactive_temporal.contracts.llm_payloads import LlmStepResult
from reactive_temporal.contracts.run import Message, ToolCall, ToolResult
from reactive_temporal.live_output import channel_for
from reactive_temporal.sanitize import clean_value

_APPEND_BEFORE = sql.SQL(
    """INSERT INTO run_events (run_id, "offset", type, step, position, data, key)
SELECT {run}, coalesce(max("offset"), -1) + 1, {type}, {step}, {position}, {data}, {key}
FROM run_events WHERE run_id = {run}
ON CONFLICT (run_id, key) WHERE key IS NOT NULL DO NOTHING"""
)


def transaction_before(run_id: str, events: Sequence[NewEvent]) -> sql.Composed:
    """`run_events.transaction` as it was: lock, an INSERT per event, NOTIFY."""
    run = sql.Literal(run_id)
    inserts = [
        _APPEND_BEFORE.format(
            run=run,
            type=sql.Literal(e.type),
            step=sql.Literal(e.step),
            position=sql.Literal(e.position),
            data=sql.Literal(Jsonb(clean_value(e.data, nul=True))),
            key=sql.Literal(e.key),
        )
        for e in events
    ]
    return sql.SQL("; ").join(
        [
            sql.SQL("BEGIN"),
            sql.SQL("SELECT pg_advisory_xact_lock(hashtext({}))").format(run),
            *inserts,
            sql.SQL("SELECT pg_notify({}, '')").format(sql.Literal(channel_for(run_id))),
            sql.SQL("COMMIT"),
        ]
    )


CALL = ToolCall(id="c", name="calculator", arguments='{"expression": "6*7"}')
REPLY = Message(role="assistant", content="Let me work that out.", tool_calls=[CALL])
REPLIED = LlmStepResult(content="Let me work that out.", tool_calls=[CALL])
OBSERVATION = Message(role="tool", content="42", tool_call_id="c", name="calculator")
OBSERVED = ToolResult(call_id="c", name="calculator", success=True, content="42")


def llm_step_events(seq: int) -> list[NewEvent]:
    return [
        NewEvent(type="iteration", step=seq, data={"iteration": seq // 2 + 1}),
        NewEvent(type="text", step=seq, data={"delta": "Let me work that out.", "attempt": 1}),
    ]


def tool_step_events(seq: int) -> list[NewEvent]:
    data = {"call_id": "c", "tool": "calculator", "success": True, "preview": "42"}
    return [
        NewEvent(type="tool_start", step=seq, data=data, key=f"tool_start:{seq}"),
        NewEvent(type="tool_end", step=seq, data=data, key=f"tool_end:{seq}"),
    ]


async def iterations(store: Store, how: str, count: int) -> None:
    """`count` iterations of one run: an LLM step's record and events, a tool step's."""
    build = transaction if how == "now" else transaction_before
    run_id = f"bench-{how}-{uuid.uuid4().hex[:8]}"
    for i in range(count):
        llm, tool = 2 * i, 2 * i + 1
        await store.record_step(
            run_id, llm, REPLY, REPLIED, then=build(run_id, llm_step_events(llm))
        )
        await store.record_step(
            run_id, tool, OBSERVATION, OBSERVED, then=build(run_id, tool_step_events(tool))
        )


async def main() -> None:
    args = parser(__doc__ or "").parse_args()
    rounds, count = (3, 150) if args.quick else (8, 300)
    print(f"\n## event_statements — a step's record with its events, {rounds} rounds × {count}")
    print(f"_{machine()}_\n")
    postgres = _start_postgres(Path(tempfile.mkdtemp(prefix="rt-bench-pg-")))
    store = await Store.open(str(postgres.get_uri()), max_size=1)
    try:
        async with store.pool.connection() as conn:
            row = await (await conn.execute("SELECT pg_backend_pid()")).fetchone()
        backend = row[0] if row else 0
        figures: dict[str, dict[str, list[float]]] = {
            how: {"postgres": [], "loop": []} for how in ("before", "now")
        }
        await iterations(store, "before", 20)  # warm-up: plans and caches of both
        await iterations(store, "now", 20)
        for r in range(rounds):
            log(f"round {r + 1}/{rounds}")
            for how in ("before", "now") if r % 2 == 0 else ("now", "before"):
                pg, loop = cpu_seconds(backend), time.thread_time()
                await iterations(store, how, count)
                steps = 2 * count
                figures[how]["postgres"].append((cpu_seconds(backend) - pg) / steps * 1000)
                figures[how]["loop"].append((time.thread_time() - loop) / steps * 1000)
    finally:
        await store.close()
        postgres.cleanup()

    def med(how: str, what: str) -> float:
        return statistics.median(figures[how][what])

    print_table(
        ["CPU per step (record and 2 events), ms", "before", "now", "now / before"],
        [
            [
                what,
                f"{med('before', what):.3f}",
                f"{med('now', what):.3f}",
                f"{med('now', what) / med('before', what):.2f}×",
            ]
            for what in ("postgres", "loop")
        ],
    )


if __name__ == "__main__":
    run(main)
