"""What each agent spent, from its debriefs and its chat turns in Postgres (`starter.py costs`).

Every run that ends writes one debrief row with its tokens and its cost (`metrics.cost`, the
model calls it was billed for, priced as the worker priced them), so an operator asks the
agents' database what an agent spent over the last days rather than adding up a provider's
bill by hand. Three kinds of spend, each counted once:
- runs: each debrief's `metrics.tokens` and `metrics.cost` (a tool-path chat turn is a run,
  with its own debrief, and is counted here);
- the synthesis of a debrief: its own call, kept in `metrics.synthesis_tokens` (an
  object: input, output, total, cost) and never in the run's; there whenever the model was
  billed, in a debrief that fell back to the deterministic one too (an answer that was not
  usable JSON, replies that could not be read: DebriefWorkflow);
- direct chat turns: one `chat_usage` row each (activities/chat_usage.py).
`total_tokens` and `total_cost_usd` add up all three.

Two statements, each grouped by agent through its index on (agent_id, created_at); the two
are merged here (`merge_spend`), since an agent may have chatted in the window and run
nothing, or the other way round.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from psycopg.rows import dict_row
from pydantic import BaseModel, computed_field

from activities.store import Store

MAX_DAYS = 3_660
"""How far back a report may look (ten years): past that, the interval is a typo."""

DOLLAR_DIGITS = 6
"""Totals over agents are rounded to a millionth of a dollar (float sums leave ...0000001s)."""


class RunSpend(BaseModel):
    """One agent's runs that ended in the window, read from their debriefs."""

    agent_id: str
    runs: int
    succeeded: int
    partial: int
    failed: int
    tokens: int
    cost_usd: float
    syntheses: int
    synthesis_tokens: int
    synthesis_cost_usd: float
    last_run_at: datetime


class ChatSpend(BaseModel):
    """One agent's direct chat turns in the window, read from `chat_usage`."""

    agent_id: str
    chat_turns: int
    chat_tokens: int
    chat_cost_usd: float
    last_chat_at: datetime


class AgentSpend(BaseModel):
    """One agent's spend in the window: its runs, their rich debriefs' synthesis, its chat.

    The fields before `syntheses` are the report's first ones, kept as they were (scripts
    read them): `tokens` and `cost_usd` are the runs' alone; `total_*` add up all three."""

    agent_id: str
    runs: int = 0
    succeeded: int = 0
    partial: int = 0
    failed: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    synthesis_tokens: int = 0
    last_run_at: datetime | None = None
    """None for an agent that only chatted in the window."""
    syntheses: int = 0
    """Runs whose debrief's synthesis was billed (it reported its usage), rich or not."""
    synthesis_cost_usd: float = 0.0
    chat_turns: int = 0
    chat_tokens: int = 0
    chat_cost_usd: float = 0.0
    last_chat_at: datetime | None = None
    """None for an agent that did not chat in the window."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total_tokens(self) -> int:
        """The runs', their syntheses' and the chat turns' tokens."""
        return self.tokens + self.synthesis_tokens + self.chat_tokens

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total_cost_usd(self) -> float:
        """The runs', their syntheses' and the chat turns' dollars."""
        return self.cost_usd + self.synthesis_cost_usd + self.chat_cost_usd


class SpendTotal(BaseModel):
    """Every agent's spend added up (the report's `total`; its first three fields as they
    were: `tokens` and `cost_usd` are the runs')."""

    runs: int
    tokens: int
    cost_usd: float
    syntheses: int
    synthesis_tokens: int
    synthesis_cost_usd: float
    chat_turns: int
    chat_tokens: int
    chat_cost_usd: float
    total_tokens: int
    total_cost_usd: float


def merge_spend(runs: Iterable[RunSpend], chats: Iterable[ChatSpend]) -> list[AgentSpend]:
    """Each agent's runs and chat as one line, the costliest in all first (then the most
    tokens, then by name). ValueError when one source names an agent twice."""
    merged: dict[str, dict[str, object]] = {}
    _merge_in(merged, runs)
    _merge_in(merged, chats)
    spent = [AgentSpend.model_validate(fields) for fields in merged.values()]
    return sorted(spent, key=lambda s: (-s.total_cost_usd, -s.total_tokens, s.agent_id))


def _merge_in(merged: dict[str, dict[str, object]], rows: Iterable[RunSpend | ChatSpend]) -> None:
    seen: set[str] = set()
    for row in rows:
        if row.agent_id in seen:
            raise ValueError(f"agent {row.agent_id!r} comes twice in one source of spend")
        seen.add(row.agent_id)
        merged.setdefault(row.agent_id, {}).update(row.model_dump())


def spend_total(spent: Sequence[AgentSpend]) -> SpendTotal:
    """The agents' spend added up, field by field (dollars to `DOLLAR_DIGITS`)."""
    added: dict[str, float] = {}
    for name in SpendTotal.model_fields:
        values = [getattr(s, name) for s in spent]
        added[name] = dollars(values) if name.endswith("_usd") else sum(values)
    return SpendTotal.model_validate(added)


def dollars(amounts: Iterable[float]) -> float:
    """Dollar amounts added up, to `DOLLAR_DIGITS`."""
    return round(sum(amounts), DOLLAR_DIGITS)


def _number(path: str, cast: str) -> str:
    """The debrief's number at `path` (`metrics,cost`), NULL where it is missing or no
    number (a debrief written by hand, or before the field was)."""
    return (
        f"CASE WHEN jsonb_typeof(debrief_json #> '{{{path}}}') = 'number'"
        f" THEN (debrief_json #>> '{{{path}}}')::{cast} END"
    )


_WINDOW = (
    " WHERE created_at >= now() - make_interval(days => %(days)s)"
    " AND (%(agent)s::text IS NULL OR agent_id = %(agent)s::text)"
    " GROUP BY agent_id"
)

_RUNS = (
    "SELECT agent_id, count(*) AS runs,"
    " count(*) FILTER (WHERE outcome = 'success') AS succeeded,"
    " count(*) FILTER (WHERE outcome = 'partial') AS partial,"
    " count(*) FILTER (WHERE outcome = 'failed') AS failed,"
    " coalesce(sum(tokens_used), 0) AS tokens,"
    f" coalesce(sum({_number('metrics,cost', 'float8')}), 0) AS cost_usd,"
    # `synthesis_tokens` is an object (reactive_temporal.contracts.debrief.SynthesisTokens):
    # read as a number, as it was, it was always 0
    f" count({_number('metrics,synthesis_tokens,total', 'bigint')}) AS syntheses,"
    f" coalesce(sum({_number('metrics,synthesis_tokens,total', 'bigint')}), 0)"
    " AS synthesis_tokens,"
    f" coalesce(sum({_number('metrics,synthesis_tokens,cost', 'float8')}), 0)"
    " AS synthesis_cost_usd,"
    " max(created_at) AS last_run_at"
    " FROM agent_debriefs" + _WINDOW
)

_CHAT = (
    "SELECT agent_id, count(*) AS chat_turns,"
    " coalesce(sum(input_tokens + output_tokens), 0) AS chat_tokens,"
    " coalesce(sum(cost_usd), 0) AS chat_cost_usd,"
    " max(created_at) AS last_chat_at"
    " FROM chat_usage" + _WINDOW
)


async def spend_by_agent(
    store: Store, *, days: int, agent_id: str | None = None
) -> list[AgentSpend]:
    """Each agent's spend on runs that ended and chat turns in the last `days` (one agent's,
    when given), the costliest first. ValueError for a window outside 1..MAX_DAYS."""
    if not 1 <= days <= MAX_DAYS:
        raise ValueError(f"--days must be between 1 and {MAX_DAYS}, not {days}")
    params = {"days": days, "agent": agent_id}
    async with store.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(_RUNS, params)
        runs = [RunSpend.model_validate(row) for row in await cur.fetchall()]
        await cur.execute(_CHAT, params)
        chats = [ChatSpend.model_validate(row) for row in await cur.fetchall()]
    return merge_spend(runs, chats)
