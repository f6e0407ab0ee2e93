"""Contracts of a run's LLM step: its input, the model's reply, what the step tells.

The input is a reference to the transcript, not the transcript; the reply comes with its
usage and cost; the step tells how full its request was and what it was billed for replies
the run did not take.

Serialised into Temporal's history like every contract (`contracts/run.py` says the rules):
new fields optional, names never changed.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from reactive_temporal.contracts.internal import InternalPayload
from reactive_temporal.contracts.run import PrepareRunResult, RunSeed, ToolCall, Usage


class RationaleDetail(BaseModel):
    """Why the agent made one tool call (audit mode)."""

    why: str
    refs: list[str] | None = None
    confidence: float | None = None


class LlmStepInput(InternalPayload):
    """The `llm_step` activity's input: a reference to the transcript, not the transcript."""

    run_id: str
    seq: int
    """Where the model's reply goes; the activity reads every message before it."""
    iteration: int
    model: str
    tool_names: list[str]
    temperature: float | None = None
    audit_rationale: bool = False
    max_attempts: int | None = None
    """LLM failures allowed before the step fails for good (the agent's llm_max_attempts)."""
    reasoning_effort: str | None = None
    stream: bool = False
    """Stream the reply into the run's live output (text deltas as they arrive)."""
    cost_budget: bool = False
    """The run has a cost budget: the step does not call a model the worker has no price
    for (it would cost 0, and the budget would never end the run)."""
    seed: RunSeed | None = None
    """Set on a run's first step (the first-step-seeds patch): the step seeds the transcript
    and resolves the run's tools first, and returns them as `LlmStepResult.prepared`. `seq`
    is then where the seed begins (0) and `tool_names` the tools offered after the resolved
    ones (the final-answer tool, when the gate is open)."""


class ContextReport(BaseModel):
    """How full the step's request was, and how much of the transcript it showed compacted."""

    context_tokens: int
    """The model's context window."""
    budget_tokens: int
    """What the request's messages and tools could take (the window less reserved output)."""
    estimated_tokens: int
    """The request, estimated before it was sent."""
    compacted: int = 0
    """Transcript messages the request showed shortened or left out."""
    retried_after_overflow: int = 0
    """Times the endpoint said the request was too long and it went again compacted harder."""


class BilledReplies(BaseModel):
    """What an LLM step was billed for replies its run did not get.

    The model's replies with no choices or that could not be read, and a reply Postgres
    refused to record. Carried to the step's next attempt in its heartbeat details, and in
    its failure when it fails for good: the run's tokens, cost and budgets count them (they
    were spent, and were shown nowhere but the metrics).
    """

    usage: Usage = Usage()
    cost: float = 0.0


class LlmStepResult(InternalPayload):
    """The model's reply in one step, with its usage and cost."""

    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    cost: float = 0.0
    rationale: dict[int, RationaleDetail] = Field(default_factory=dict)
    """Audit mode: rationale blocks by 1-based tool-call position (stripped from `content`)."""
    context: ContextReport | None = None
    prepared: PrepareRunResult | None = None
    """A run's first step (given a `seed`): its tools, and the reply's position in
    `next_seq`."""
    unread_calls: bool = False
    """The reply ended with tool calls written in its text that could not be read (a block
    that names no tool: no name, cut off before it), taken out of `content`: the model is
    told (`prompts.UNREAD_CALLS_NUDGE`), where the run ended on its words, or the markup."""
