"""Contracts of tool-call approval: a call waiting for a person, their decision, its record.

A run whose agent names tools that need approval (`--approve TOOL`, `with_tools(approve=…)`,
`@tool(approve=True)`) parks before running such a call until someone approves or denies it
through the run's validated `decide_tool_calls` update, or its approval timeout passes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

APPROVE_ALL = "all"
"""`--approve all`: every real tool needs approval."""

DECIDER_MAX_CHARS = 200
REASON_MAX_CHARS = 2_000

Decision = Literal["approved", "denied"]


class PendingApproval(BaseModel):
    """A tool call waiting for a decision (the `progress` query and `approvals` list them)."""

    call_id: str
    """How to name the call in `approve`/`deny`: the model's call id when it is usable."""
    tool: str
    arguments: str
    """The call's arguments as the model wrote them (JSON text), clipped for display."""
    since: datetime
    iteration: int
    """The turn (1-based) that made the call."""


class ApprovalDecision(BaseModel):
    """The `decide_tool_calls` update's input: approve or deny some or all pending calls."""

    call_ids: list[str] = Field(default_factory=list)
    """The calls decided; empty means every call pending now."""
    approve: bool
    reason: str | None = None
    """Why; required to deny (the model reads it as the call's observation)."""
    by: str
    """Who decided (default the OS user of the CLI)."""


class ApprovalRecord(BaseModel):
    """One decision, as the run and its debrief keep it."""

    call_id: str
    tool: str
    arguments: str
    decision: Decision
    by: str
    at: datetime
    reason: str | None = None
    requested_at: datetime | None = None


class ApprovalOutcome(BaseModel):
    """What a `decide_tool_calls` update decided."""

    decided: list[ApprovalRecord] = Field(default_factory=list)
