"""Each of the product's statements sent again and again on one connection, as a worker's
pooled connection sends it (`bench.data_scale`): the plans Postgres ran for its 1st–5th
executions against its 11th–15th.

psycopg prepares a statement after 5 executions on a connection (`prepare_threshold`), and
Postgres, after 5 executions of a prepared statement, may plan it once for any parameters (a
generic plan, `plan_cache_mode=auto`) when that plan's estimate is no worse than the plans it
made for the parameters it saw. The estimate is the planner's, for an average agent, run or
session; the busy agent's lessons read 9,700 rows in 22 ms that way where its own plan read
2,000 in 3 (82c514f). A plan EXPLAINed once with real parameters cannot show it: these are
the plans Postgres ran (auto_explain, analyzed, with buffers), each call of the product's own
code made AGAIN times on one connection, with the parameters of the skewed cases.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import psycopg
from psycopg import AsyncConnection
from pydantic import BaseModel

from activities.debrief_store import DebriefStore
from activities.llm_context import ContextRecords, StepContext
from activities.run_events import RunEvents
from activities.store import Store
from bench._scale_data import BIG_SESSION, LONG_RUN
from bench._stack import log, print_table
from reactive_temporal.api.live_feed import BATCH, BATCH_QUERY
from reactive_temporal.context_window import ContextPlan
from reactive_temporal.contracts.debrief import AgentDebrief, DebriefInput
from reactive_temporal.contracts.events import NewEvent
from reactive_temporal.contracts.run import Message

AGAIN = 15
"""Executions of each statement on one connection: 1–5 unprepared, 6–10 prepared and
planned for their parameters, 11–15 where Postgres may use its generic plan."""

_DURATION = re.compile(r"duration: ([0-9.]+) ms")


@dataclass(frozen=True)
class Ran:
    """One execution's plan as Postgres ran it."""

    ms: float
    shape: str
    rows_read: int
    buffers: int


SCANS = ("Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Index Scan", "Bitmap Heap Scan")
"""Plan nodes that read a table or an index."""


def plan_nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    """Every node of a plan, its root first."""
    found = [node]
    for child in node.get("Plans", []):
        found.extend(plan_nodes(child))
    return found


def scan_names(node: dict[str, Any]) -> str | None:
    """A scan node as `kind index-or-table` (None for other nodes and for a bitmap's heap
    scan, named by its index scan)."""
    kind = node["Node Type"]
    if kind not in SCANS or kind == "Bitmap Heap Scan":
        return None
    return f"{kind} {node.get('Index Name') or node.get('Relation Name', '')}".strip()


def heap_rows_read(root: dict[str, Any]) -> int:
    """The rows a plan's scans read from tables' heaps: returned and filtered out, every loop."""
    return sum(
        round(
            (
                n.get("Actual Rows", 0)
                + n.get("Rows Removed by Filter", 0)
                + n.get("Rows Removed by Index Recheck", 0)
            )
            * n.get("Actual Loops", 1)
        )
        for n in plan_nodes(root)
        if n["Node Type"] in SCANS and "Relation Name" in n
    )


def shape(root: dict[str, Any]) -> tuple[str, int]:
    """How the plan reads tables (its top node, each scan and its index: `max()` over an
    index is a Result over a Limit, or an Aggregate of every row), and the rows its scans
    read from tables' heaps (`heap_rows_read`)."""
    parts = [name for n in plan_nodes(root) if (name := scan_names(n))]
    return f"{root['Node Type']}: {', '.join(dict.fromkeys(parts)) or '–'}", heap_rows_read(root)


class ExecutedPlans:
    """The plans a connection's statements ran with, as Postgres ran them (auto_explain,
    analyzed, with buffers, sent to the client as notices); nested statements (a function's)
    included, the product's statements only when `only` is given."""

    def __init__(self, conn: AsyncConnection[Any]) -> None:
        self.conn = conn
        self.ran: list[tuple[str, Ran]] = []

    def _notice(self, diag: psycopg.errors.Diagnostic) -> None:
        text = diag.message_primary or ""
        if "plan:" not in text:
            return
        head, body = text.split("plan:", 1)
        explained = json.loads(body)
        root = explained["Plan"]
        found = _DURATION.search(head)
        how, rows = shape(root)
        buffers = root.get("Shared Hit Blocks", 0) + root.get("Shared Read Blocks", 0)
        ran = Ran(float(found.group(1)) if found else 0.0, how, rows, buffers)
        self.ran.append((explained.get("Query Text", ""), ran))

    async def start(self) -> None:
        await self.conn.execute("LOAD 'auto_explain'")
        for setting, value in (
            ("log_min_duration", "0"), ("log_analyze", "on"), ("log_timing", "off"),
            ("log_buffers", "on"), ("log_format", "json"), ("log_level", "notice"),
            ("log_nested_statements", "on"),
        ):  # fmt: skip
            await self.conn.execute(f"SET auto_explain.{setting} = {value}")
        self.conn.add_notice_handler(self._notice)

    async def stop(self) -> None:
        self.conn.remove_notice_handler(self._notice)
        await self.conn.execute("SET auto_explain.log_min_duration = -1")


class _OneConnection:
    def __init__(self, conn: AsyncConnection[Any]) -> None:
        self.conn = conn

    async def __aenter__(self) -> AsyncConnection[Any]:
        return self.conn

    async def __aexit__(self, *exc: object) -> None:
        return None

    def connection(self) -> _OneConnection:
        return self


@dataclass(frozen=True)
class Case:
    """The parameters the calls are made with (data_scale's Params, and more)."""

    run: str
    run_length: int
    agent: str
    session: str
    events_run: str
    """The run whose live output is appended to and read."""
    events_middle: int
    """An offset in the middle of its live output."""


Again = Callable[[Store, Case], Awaitable[object]]


@dataclass(frozen=True)
class Compared:
    label: str
    first: list[Ran]
    """Executions 1–5, skewed parameters throughout."""
    last: list[Ran]
    """Executions 11–15, skewed parameters throughout."""
    after_typical: list[Ran]
    """Executions 11–15 with the skewed parameters after 10 with typical ones: a generic plan
    chosen on typical parameters, then met by the skewed case."""


async def _executions(
    url: str, call: Again, cases: list[Case], commits: bool
) -> list[tuple[str, list[Ran]]]:
    """`call` once with each of `cases`, in order, on one connection: the plans Postgres ran
    for each statement it sent (nested ones too), by statement, in the order sent. In a
    transaction rolled back, unless the call commits its own (then on an autocommit
    connection: its writes stay)."""
    async with await AsyncConnection.connect(url, autocommit=commits) as conn:
        store = Store(cast(Any, _OneConnection(conn)))
        plans = ExecutedPlans(conn)
        await plans.start()
        try:
            for case in cases:
                await call(store, case)
        finally:
            if not commits:
                # in a transaction a statement's plan is logged as its portal closes: with
                # the next statement, the last one's at the end
                await conn.rollback()
            await plans.stop()
    # by text: a read's plan may arrive with the next statement's answer
    by_text: dict[str, list[Ran]] = {}
    for text, ran in plans.ran:
        by_text.setdefault(text, []).append(ran)
    return [
        (text, runs) for text, runs in by_text.items()
        if not text.lstrip().upper().startswith(("SET", "LOAD"))
    ]  # fmt: skip


async def sent_again(
    url: str, label: str, call: Again, skewed: Case, typical: Case, *, commits: bool = False
) -> list[Compared]:
    """`call` AGAIN times on one connection with `skewed`; and on another, 10 times with
    `typical`, then 5 with `skewed`. For each statement it sends, the plans of executions
    1–5 and 11–15 (a call may execute a statement more than once: executions, not calls)."""
    again = await _executions(url, call, [skewed] * AGAIN, commits)
    mixed = await _executions(url, call, [typical] * 10 + [skewed] * (AGAIN - 10), commits)
    typical_runs = dict(mixed)
    compared = []
    for i, (text, runs) in enumerate(again):
        name = f"{label} ({i + 1}/{len(again)})" if len(again) > 1 else label
        after = typical_runs.get(text, [])
        tail = after[-(AGAIN - 10) :] if len(after) >= AGAIN else []
        compared.append(Compared(name, runs[:5], runs[10:15], tail))
    return compared


def _median(runs: list[Ran]) -> str:
    if not runs:
        return "–"
    ms = statistics.median(r.ms for r in runs)
    rows = round(statistics.median(r.rows_read for r in runs))
    buffers = round(statistics.median(r.buffers for r in runs))
    return f"{ms:.2f} · {rows:,} · {buffers:,}"


def print_again(compared: list[Compared]) -> None:
    """Executions 1–5 against 11–15 of each statement: median ms, rows read, buffers, and
    the plan (a later one's when it differs)."""
    print(
        f"\n### Each statement {AGAIN} times on one connection, as a worker's pooled connection"
        " sends it: the plans Postgres ran (auto_explain), skewed parameters (the busy agent,"
        " its big session, the long run's live output); and 10 times with a quiet agent's,"
        " then the skewed ones\n"
    )
    rows = []
    for c in compared:
        first = c.first[-1].shape
        later = [r.shape for r in (c.last[-1:] + c.after_typical[-1:])]
        rows.append(
            [c.label, _median(c.first), _median(c.last), _median(c.after_typical), first,
             " / ".join(dict.fromkeys(x for x in later if x != first)) or "same"]
        )  # fmt: skip
    print_table(
        ["statement", "1–5: ms · rows read · buffers", "11–15", "11–15 after 10 typical",
         "plan 1–5", "plan 11–15, when another"],
        rows,
    )  # fmt: skip


async def all_again(
    url: str, calls: list[tuple[str, Again, bool]], skewed: Case, typical: Case
) -> list[Compared]:
    compared: list[Compared] = []
    for label, call, commits in calls:
        log(f"sent again: {label}")
        compared.extend(await sent_again(url, label, call, skewed, typical, commits=commits))
    return compared


class _Result(BaseModel):
    """A step's result, as `record_step` keeps it."""

    content: str = "42"


def again_calls(
    reads: Sequence[tuple[str, Callable[[Store, Any], Awaitable[object]]]],
) -> list[tuple[str, Again, bool]]:
    """`reads` (data_scale's CALLS) but the operator's `lessons` listings (a command's one
    connection, never a worker's), with a step's writes, the live feed's reads, a run's
    wrap-up: what a worker or the API sends per run, per step, per turn; and whether the
    call commits its own transaction."""
    said = Message(role="assistant", content="The answer is 42.")
    context = StepContext(
        view=[], plan=ContextPlan(), budget=128_000, estimated=1_000, tools_tokens=200,
        context_tokens=1_000,
    )  # fmt: skip
    event = NewEvent(type="text", step=1, data={"delta": "streamed text"})
    debrief = AgentDebrief(outcome="success", summary="did the thing", lessons_learned=["a"])

    async def batch(s: Store, run: str, offset: int) -> None:
        async with s.pool.connection() as conn, conn.cursor() as cur:
            await cur.execute(BATCH_QUERY, (run, offset, offset + BATCH, BATCH))
            await cur.fetchall()

    def ended(p: Case) -> DebriefInput:
        return DebriefInput(task="t", agent_id=p.agent, run_id=p.run, terminated_by="end_turn")

    calls = [(label, call, False) for label, call in reads if not label.startswith("lessons")]
    return calls + [
        ("llm_step: a step's record", lambda s, p: s.record_step(p.run, 7, said, _Result()), False),
        (
            "llm_step: a step's context row",
            lambda s, p: ContextRecords(s).record(p.run, 12, context=context),
            False,
        ),
        (
            "live output: an append",
            lambda s, p: RunEvents(s).append(p.events_run, [event]),
            True,
        ),
        ("watch: a run's first batch", lambda s, p: batch(s, p.events_run, 0), False),
        ("watch: a middle batch", lambda s, p: batch(s, p.events_run, p.events_middle), False),
        ("debrief: a run's written", lambda s, p: DebriefStore(s).save(ended(p), debrief), True),
    ]


async def cases(conn: AsyncConnection[Any], skewed_run: str, agent: str) -> tuple[Case, Case]:
    """The skewed case (`skewed_run`, a run of the busy `agent`; its big session; the long
    run's live output) and a typical one (a quiet agent, a run and a session of its)."""
    cur = await conn.execute(
        "SELECT agent_id, session_id FROM chat_sessions WHERE agent_id LIKE 'agent-___'"
        " ORDER BY created_at DESC LIMIT 1 OFFSET 10"
    )
    quiet, session = cast(tuple[str, str], await cur.fetchone())
    cur = await conn.execute(
        "SELECT run_id FROM agent_debriefs WHERE agent_id = %s ORDER BY created_at DESC LIMIT 1",
        (quiet,),
    )
    (run,) = cast(tuple[str], await cur.fetchone())
    lengths = []
    for r in (skewed_run, run, LONG_RUN):
        cur = await conn.execute(
            "SELECT (SELECT count(*) FROM run_messages WHERE run_id = %s),"
            " (SELECT count(*) FROM run_events WHERE run_id = %s)",
            (r, r),
        )
        lengths.append(cast(tuple[int, int], await cur.fetchone()))
    skewed = Case(skewed_run, lengths[0][0], agent, BIG_SESSION, LONG_RUN, lengths[2][1] // 2)
    return skewed, Case(run, lengths[1][0], quiet, session, run, lengths[1][1] // 2)
