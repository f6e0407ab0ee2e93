"""When an operator or a limit stops a run: a cancel request, the token or cost budget, the
run's deadline. Pure functions that decide the `Ending` and word its note, so the run loop
only asks and the rules are unit-tested in milliseconds.

A stopped run ends like any other: `success` false, the model's last text as its output,
the note in `AgentResult.error` and first in the debrief's errors.
"""

from __future__ import annotations

from reactive_temporal.contracts.run import AgentConfig, TerminatedBy
from workflows.turns import Ending

STOP_ENDINGS: tuple[TerminatedBy, ...] = ("cancelled", "budget_exceeded", "timeout")
"""Endings imposed from outside the model's reasoning."""

REASON_MAX_CHARS = 500


def budget_ending(agent: AgentConfig, *, tokens: int, cost: float, last_text: str) -> Ending | None:
    """The `budget_exceeded` ending once the run used more than a budget allows; None while
    it is within both (or has none). The token budget is checked first."""
    if agent.token_budget is not None and tokens > agent.token_budget:
        return Ending(
            "budget_exceeded",
            last_text,
            note=f"token budget of {agent.token_budget:,} exceeded: {tokens:,} tokens used",
        )
    if agent.cost_budget is not None and cost > agent.cost_budget:
        return Ending(
            "budget_exceeded",
            last_text,
            note=f"cost budget of ${agent.cost_budget:,.4f} exceeded: ${cost:,.4f} spent",
        )
    return None


def timeout_ending(timeout_seconds: float, *, last_text: str, doing: str | None) -> Ending:
    """The run's deadline fired; `doing` says what it interrupted (an LLM call, a tool…)."""
    during = f" during {doing}" if doing else ""
    return Ending(
        "timeout", last_text, note=f"deadline of {duration_text(timeout_seconds)} reached{during}"
    )


def cancel_ending(reason: str | None, *, last_text: str) -> Ending:
    """A cancel request (`starter.py cancel`, `agent.cancel`, the Web UI, `temporal workflow
    cancel`); its reason, clipped and on one line, goes into the note."""
    text = " ".join((reason or "").split())
    if len(text) > REASON_MAX_CHARS:
        text = text[:REASON_MAX_CHARS] + "…"
    return Ending("cancelled", last_text, note=f"cancelled: {text}" if text else "cancelled")


def duration_text(seconds: float) -> str:
    """A duration as people read it: `30 s`, `10 min`, `24 h`, `3 days`."""
    if seconds < 120:
        return f"{seconds:g} s"
    if seconds < 7200:
        return f"{seconds / 60:g} min"
    if seconds < 172_800:
        return f"{seconds / 3600:g} h"
    return f"{seconds / 86400:g} days"
