"""What each agent's runs spent, from their debriefs in Postgres (`starter.py costs`).

Every run that ends writes one debrief row with its tokens and its cost (`metrics.cost`, the
model calls it was billed for, priced as the worker priced them), so an operator asks the
agents' database what an agent spent over the last days rather than adding up a provider's
bill by hand. The synthesis of a rich debrief is counted apart (`synthesis_tokens`): it is
the debrief's model's, not the run's. Chat turns are not runs and are not counted.

One statement, grouped by agent, through the index on (agent_id, created_at).
"""

from __future__ import annotations

from datetime import datetime

from psycopg.rows import dict_row
from pydantic import BaseModel

from activities.store import Store

MAX_DAYS = 3_660
"""How far back a report may look (ten years): past that, the interval is a typo."""


class AgentSpend(BaseModel):
    """One agent's runs that ended in the window, and what they spent."""

    agent_id: str
    runs: int
    succeeded: int
    partial: int
    failed: int
    tokens: int
    cost_usd: float
    synthesis_tokens: int
    last_run_at: datetime


_NUMBER = "CASE WHEN jsonb_typeof(debrief_json #> '{{metrics,{key}}}') = 'number'" \
    " THEN (debrief_json #>> '{{metrics,{key}}}')::{cast} END"  # fmt: skip

_SPEND = (
    "SELECT agent_id, count(*) AS runs,"
    " count(*) FILTER (WHERE outcome = 'success') AS succeeded,"
    " count(*) FILTER (WHERE outcome = 'partial') AS partial,"
    " count(*) FILTER (WHERE outcome = 'failed') AS failed,"
    " coalesce(sum(tokens_used), 0) AS tokens,"
    f" coalesce(sum({_NUMBER.format(key='cost', cast='float8')}), 0) AS cost_usd,"
    f" coalesce(sum({_NUMBER.format(key='synthesis_tokens', cast='bigint')}), 0)"
    " AS synthesis_tokens,"
    " max(created_at) AS last_run_at"
    " FROM agent_debriefs"
    " WHERE created_at >= now() - make_interval(days => %(days)s)"
    " AND (%(agent)s::text IS NULL OR agent_id = %(agent)s::text)"
    " GROUP BY agent_id ORDER BY cost_usd DESC, tokens DESC, agent_id"
)


async def spend_by_agent(
    store: Store, *, days: int, agent_id: str | None = None
) -> list[AgentSpend]:
    """Each agent's spend on runs that ended in the last `days` (one agent's, when given),
    the costliest first. ValueError for a window outside 1..MAX_DAYS."""
    if not 1 <= days <= MAX_DAYS:
        raise ValueError(f"--days must be between 1 and {MAX_DAYS}, not {days}")
    async with store.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(_SPEND, {"days": days, "agent": agent_id})
        return [AgentSpend.model_validate(row) for row in await cur.fetchall()]
