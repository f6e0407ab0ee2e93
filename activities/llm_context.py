"""What a run's LLM step shows the model: its transcript, compacted to fit the context window.

The rules are `reactive_temporal.context_window`'s; this module keeps their record in
Postgres (`run_context`, one row per LLM step that had something to record):

- the plan a step used, written *before* its request when the step compacted, so a retried
  or rerun step finds it and sends exactly what was sent;
- the provider's prompt-token count for the step, written after it, so the next step's
  estimate starts from the provider's own figure.

The transcript itself (`run_messages`) is never shortened.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection, sql
from psycopg.types.json import Jsonb

from activities.statements import Rows, pending_rows, quoted
from activities.store import Store
from reactive_temporal.capabilities import ModelCapabilities
from reactive_temporal.context_window import (
    ContextPlan,
    PreviousCall,
    ThinkingTokens,
    build_view,
    estimate_prompt,
    plan_compaction,
    prompt_budget,
    reserved_output,
    sent_thinking,
    tools_tokens,
    view_tokens,
)
from reactive_temporal.contracts.llm_payloads import ContextReport
from reactive_temporal.contracts.run import SeqMessage

RECORD_FROM = 0.25
"""Steps whose request is under this share of the budget record nothing (no write)."""
OVERFLOW_SHRINK = 0.7
"""After the endpoint refused a request as too long (and named no limit), the next request
aims at this share of what the refused one was estimated at."""


@dataclass(frozen=True)
class StepContext:
    """The view one step sends, and how it was decided."""

    view: list[SeqMessage]
    plan: ContextPlan
    budget: int
    estimated: int
    tools_tokens: int
    context_tokens: int

    def report(self, retried_after_overflow: int = 0) -> ContextReport:
        return ContextReport(
            context_tokens=self.context_tokens,
            budget_tokens=self.budget,
            estimated_tokens=self.estimated,
            compacted=self.plan.compacted,
            retried_after_overflow=retried_after_overflow,
        )


@dataclass(frozen=True)
class ContextRecord:
    """What `run_context` holds for a step: the plan it uses, the last call's count."""

    previous: PreviousCall | None
    plan: ContextPlan


def _recorded(rows: Rows) -> ContextRecord:
    by_kind = {r["kind"]: r for r in rows}
    plan_row, call_row = by_kind.get("plan"), by_kind.get("call")
    plan = ContextPlan.model_validate(plan_row["plan"]) if plan_row else ContextPlan()
    previous = None
    # a plan made since that call: the provider's count no longer describes the view
    if call_row is not None and (plan_row is None or plan_row["seq"] <= call_row["seq"]):
        previous = PreviousCall(
            seq=call_row["seq"],
            prompt_tokens=call_row["prompt_tokens"],
            plan=plan,
            tools_tokens=call_row["tools_tokens"] or 0,
        )
    return ContextRecord(previous=previous, plan=plan)


class ContextRecords:
    """The `run_context` rows."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def load(
        self, run_id: str, seq: int, *, conn: AsyncConnection[Any] | None = None
    ) -> ContextRecord:
        """The latest plan at or before this step, and the provider's count for the step
        before it (with whether that step used the same plan)."""
        async with self.store.connection(conn) as c:
            reading = await self.begin_load(run_id, seq, c)
            return await reading()

    async def begin_load(
        self, run_id: str, seq: int, conn: AsyncConnection[Any]
    ) -> Callable[[], Awaitable[ContextRecord]]:
        """`load`'s query sent on `conn`; what it returns reads the answer. On a connection
        in pipeline mode the query goes out with the next one whose rows are read: the LLM
        step reads its transcript and this in one round trip."""
        return await pending_rows(
            conn,
            "(SELECT 'call' AS kind, seq, prompt_tokens, tools_tokens, NULL::jsonb AS plan"
            "  FROM run_context WHERE run_id = %s AND seq < %s AND prompt_tokens IS NOT NULL"
            "  ORDER BY seq DESC LIMIT 1)"
            " UNION ALL"
            " (SELECT 'plan', seq, NULL, NULL, plan FROM run_context"
            "  WHERE run_id = %s AND seq <= %s AND plan IS NOT NULL"
            "  ORDER BY seq DESC LIMIT 1)",
            (run_id, seq, run_id, seq),
            _recorded,
        )

    async def record(
        self,
        run_id: str,
        seq: int,
        *,
        plan: ContextPlan | None = None,
        prompt_tokens: int | None = None,
        context: StepContext,
        conn: AsyncConnection[Any] | None = None,
    ) -> None:
        """Upsert the step's row; a plan or count already recorded is kept when not given."""
        async with self.store.connection(conn) as c:
            await c.execute(
                _UPSERT_CONTEXT, _context_row(run_id, seq, plan, prompt_tokens, context)
            )


_UPSERT_CONTEXT = (
    "INSERT INTO run_context (run_id, seq, plan, prompt_tokens, tools_tokens,"
    " estimated_tokens, budget_tokens) VALUES (%s, %s, %s, %s, %s, %s, %s)"
    " ON CONFLICT (run_id, seq) DO UPDATE SET"
    " plan = COALESCE(EXCLUDED.plan, run_context.plan),"
    " prompt_tokens = COALESCE(EXCLUDED.prompt_tokens, run_context.prompt_tokens),"
    " tools_tokens = EXCLUDED.tools_tokens,"
    " estimated_tokens = EXCLUDED.estimated_tokens,"
    " budget_tokens = EXCLUDED.budget_tokens"
)


def _context_row(
    run_id: str,
    seq: int,
    plan: ContextPlan | None,
    prompt_tokens: int | None,
    context: StepContext,
) -> tuple[object, ...]:
    return (
        run_id,
        seq,
        Jsonb(plan.model_dump(mode="json")) if plan is not None else None,
        prompt_tokens,
        context.tools_tokens,
        context.estimated,
        context.budget,
    )


class StepContexts:
    """Decides each step's view, records what must survive a retry."""

    def __init__(self, store: Store) -> None:
        self.records = ContextRecords(store)

    async def prepare(
        self,
        run_id: str,
        seq: int,
        transcript: Sequence[SeqMessage],
        tools: Sequence[dict[str, Any]],
        caps: ModelCapabilities,
        *,
        refused: StepContext | None = None,
        conn: AsyncConnection[Any] | None = None,
        recorded: ContextRecord | None = None,
        thinking: ThinkingTokens | None = None,
    ) -> StepContext:
        """The view for step `seq`: the recorded plan (`recorded`, when the caller read it
        already), compacted further when the request would not fit the budget (or, with
        `refused`, after the endpoint said it did not); on `conn` when given. `thinking`:
        what the request sends back with the model's turns, for an endpoint that wants it."""
        if recorded is None:
            recorded = await self.records.load(run_id, seq, conn=conn)
        tools_cost = tools_tokens(tools)
        reserve = reserved_output(caps.context_tokens, caps.max_output_tokens)
        budget = prompt_budget(caps.context_tokens, reserve)
        plan = recorded.plan
        if refused is not None:
            budget = min(budget, int(refused.estimated * OVERFLOW_SHRINK))
        view = build_view(transcript, plan)
        estimated = estimate_prompt(view, tools_cost, plan, recorded.previous, thinking)
        if refused is not None or estimated > budget:
            new_plan = plan_compaction(
                transcript,
                budget=budget,
                tools=tools_cost,
                previous=plan,
                harder=refused is not None,
                thinking=thinking,
            )
            if new_plan != plan:
                plan = new_plan
                view = build_view(transcript, plan)
                estimated = view_tokens(view, tools_cost, sent_thinking(thinking, plan))
        context = StepContext(
            view=view,
            plan=plan,
            budget=budget,
            estimated=estimated,
            tools_tokens=tools_cost,
            context_tokens=caps.context_tokens,
        )
        if plan != recorded.plan:  # durable before the request: a retry sends the same
            await self.records.record(run_id, seq, plan=plan, context=context, conn=conn)
        return context

    def sent(
        self, run_id: str, seq: int, context: StepContext, prompt_tokens: int
    ) -> sql.Composed | None:
        """The statement that keeps the provider's count for the next step's estimate, once
        it matters (None before): the step sends it in its record's transaction
        (`step_records.record_step`), where it cost a round trip of its own."""
        if prompt_tokens > 0 and (
            context.plan.compacted or context.estimated >= context.budget * RECORD_FROM
        ):
            return quoted(_UPSERT_CONTEXT, _context_row(run_id, seq, None, prompt_tokens, context))
        return None
