"""What each direct chat turn's LLM call used and cost, kept in Postgres (`chat_usage`).

A run's spend is in its debrief; a chat turn answered by the direct path is no run and had
no record at all, so `starter.py costs` left chat out (activities/spend_report.py). The
chat activity writes one row per turn here as the model answers (activities/chat.py says
why there, and what happens when the write fails). A tool-path turn is a run of its own,
with its own debrief: it is counted as a run, not here.

A row is keyed by the Temporal activity that made the call (workflow, run, activity id):
a retried attempt of the same activity writes the same row again, so a turn is counted
once however often Temporal retried it; the row holds the attempt whose answer the person
got (its usage is the reply's `tokens` and `cost`).
"""

from __future__ import annotations

from dataclasses import dataclass

from activities.statements import pg_text
from activities.store import Store
from reactive_temporal.contracts.run import Usage

_UPSERT = (
    "INSERT INTO chat_usage (workflow_id, run_id, activity_id, agent_id, session_id, model,"
    " input_tokens, output_tokens, cached_tokens, reasoning_tokens, estimated, cost_usd)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
    " ON CONFLICT (workflow_id, run_id, activity_id) DO UPDATE SET"
    " model = EXCLUDED.model, input_tokens = EXCLUDED.input_tokens,"
    " output_tokens = EXCLUDED.output_tokens, cached_tokens = EXCLUDED.cached_tokens,"
    " reasoning_tokens = EXCLUDED.reasoning_tokens, estimated = EXCLUDED.estimated,"
    " cost_usd = EXCLUDED.cost_usd, updated_at = now()"
)
"""One turn's row; a retried attempt rewrites it (created_at stays the first attempt's)."""


@dataclass(frozen=True)
class TurnKey:
    """The Temporal activity that answered a chat turn: the same for each of its attempts."""

    workflow_id: str
    run_id: str
    activity_id: str


@dataclass(frozen=True)
class ChatTurnUsage:
    """One direct chat turn's LLM call: whose, which model, its tokens and US dollars."""

    key: TurnKey
    agent_id: str
    session_id: str | None
    model: str
    usage: Usage
    cost_usd: float

    def described(self) -> str:
        """The turn in a log line: enough to add it back by hand if its row was lost."""
        u = self.usage
        return (
            f"agent {self.agent_id!r}, session {self.session_id!r}, model {self.model!r}: "
            f"{u.prompt_tokens} input ({u.cached_tokens} cached) and {u.completion_tokens} "
            f"output ({u.reasoning_tokens} reasoning) tokens, ${self.cost_usd:.6f} "
            f"(workflow {self.key.workflow_id}, run {self.key.run_id}, "
            f"activity {self.key.activity_id})"
        )


class ChatUsageStore:
    """Chat turns' usage rows (`chat_usage`), one per turn, written idempotently."""

    def __init__(self, store: Store) -> None:
        self.pool = store.pool

    async def record(self, turn: ChatTurnUsage) -> None:
        """The turn's row, written again as it is by a retried attempt."""
        u, k = turn.usage, turn.key
        async with self.pool.connection() as conn:
            await conn.execute(
                _UPSERT,
                (
                    k.workflow_id, k.run_id, k.activity_id, turn.agent_id,
                    pg_text(turn.session_id), pg_text(turn.model), u.prompt_tokens,
                    u.completion_tokens, u.cached_tokens, u.reasoning_tokens, u.estimated,
                    turn.cost_usd,
                ),
            )  # fmt: skip
