"""Contracts of the debrief: what it is made from, what it says, and how it is written.

The DebriefWorkflow's and its activities' inputs and results are here too.

Durable (serialised into histories): add fields only as optional, never rename.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import AliasChoices, BaseModel, Field, field_validator

from reactive_temporal.contracts.approvals import ApprovalRecord
from reactive_temporal.contracts.internal import InternalPayload
from reactive_temporal.contracts.llm_payloads import BilledReplies, RationaleDetail
from reactive_temporal.contracts.run import FinalAnswerCapture, TerminatedBy

Outcome = Literal["success", "partial", "failed"]
Confidence = Literal["high", "medium", "low"]


class ToolCallRecord(BaseModel):
    """One executed tool call, as the debrief counts it."""

    name: str
    success: bool
    duration_ms: int = 0
    iteration: int = 0
    error: str | None = None


class RationaleEntry(BaseModel):
    """Why the agent made one decision (audit mode: one per tool call)."""

    iteration: int
    decision: str = "tool-selection"
    tool_name: str | None = None
    rationale: RationaleDetail


class ToolStat(BaseModel):
    """One tool's calls, errors and mean duration in a run."""

    name: str
    calls: int
    errors: int
    avg_duration_ms: int


class ToolUsage(BaseModel):
    """One tool as the debrief reports it: calls and success rate."""

    name: str
    calls: int
    success_rate: float
    """A fraction in [0, 1]."""


class SynthesisTokens(BaseModel):
    """What the debrief synthesis itself used and cost."""

    input: int = 0
    output: int = 0
    total: int = 0
    cost: float = 0.0

    @classmethod
    def billed(cls, replies: BilledReplies) -> SynthesisTokens:
        """What replies the synthesis was billed for used and cost, in the debrief's shape."""
        usage = replies.usage
        return cls(
            input=usage.prompt_tokens,
            output=usage.completion_tokens,
            total=usage.total_tokens,
            cost=replies.cost,
        )


class DebriefMetrics(BaseModel):
    """A run's size: tokens, duration, iterations, cost."""

    tokens: int = 0
    duration_ms: int = 0
    iterations: int = 0
    cost: float = 0.0
    synthesis_tokens: SynthesisTokens | None = None
    """The rich synthesis's own LLM usage; never counted in the run's tokens."""


class AgentDebrief(BaseModel):
    """What a run did, found and learned: the debrief (instant or synthesized)."""

    outcome: Outcome
    summary: str
    key_findings: list[str] = Field(default_factory=list)
    errors_encountered: list[str] = Field(default_factory=list)
    lessons_learned: list[str] = Field(default_factory=list)
    confidence: Confidence | str = "medium"
    caveats: str | None = None
    tools_used: list[ToolUsage] = Field(default_factory=list)
    metrics: DebriefMetrics = Field(default_factory=DebriefMetrics)
    rationale: list[RationaleEntry] = Field(default_factory=list)
    markdown: str = ""
    synthesized: bool = False
    """True when an LLM wrote the narrative; False for the deterministic debrief."""
    approvals: list[ApprovalRecord] = Field(default_factory=list)
    """Each tool call a person approved or denied (or its timeout denied): who, when, why."""


class DebriefInput(BaseModel):
    """Everything the debrief is made from, collected by the run as it went."""

    task: str
    agent_id: str
    run_id: str
    terminated_by: TerminatedBy
    final_answer: FinalAnswerCapture | None = None
    tool_stats: list[ToolStat] = Field(default_factory=list)
    errors_from_loop: list[str] = Field(default_factory=list)
    metrics: DebriefMetrics = Field(default_factory=DebriefMetrics)
    final_output: str | None = None
    output_format: str = "text"
    rationale: list[RationaleEntry] = Field(default_factory=list)
    stop_note: str | None = None
    """Why a cancel or a limit stopped the run ("token budget of 5,000 exceeded: …")."""
    approvals: list[ApprovalRecord] = Field(default_factory=list)


class DebriefWorkflowInput(InternalPayload):
    """The DebriefWorkflow's input (`input` is the run's DebriefInput)."""

    input: DebriefInput
    fallback: AgentDebrief | None = None
    """The deterministic debrief, as the run returned it; none since runs leave the child to
    build it from `input` (the same pure `build_fallback`), which kept it twice in the run's
    history (in its result and in this input)."""
    synthesize: bool
    """False for trivial runs: the fallback is persisted as it is, with no LLM call."""
    model: str
    llm_timeout_seconds: float = 120
    agent_workflow_id: str | None = None
    """Signalled `debrief_ready` with the result, when it exists: only a child of a run from
    before runs kept themselves in Postgres (since, `persist_debrief` tells the agent)."""
    reasoning_effort: str | None = None
    """The agent's reasoning effort, for a reasoning model writing the debrief."""


class SynthesisRequest(InternalPayload):
    """The `synthesize_debrief` activity's input."""

    input: DebriefInput
    model: str
    max_attempts: int | None = None
    reasoning_effort: str | None = None


class SynthesisFields(BaseModel):
    """The synthesis LLM's JSON answer; camelCase keys (the reference's) are accepted too."""

    summary: str | None = None
    key_findings: list[str] = Field(
        default_factory=list, validation_alias=AliasChoices("key_findings", "keyFindings")
    )
    errors_encountered: list[str] = Field(
        default_factory=list,
        validation_alias=AliasChoices("errors_encountered", "errorsEncountered"),
    )
    lessons_learned: list[str] = Field(
        default_factory=list, validation_alias=AliasChoices("lessons_learned", "lessonsLearned")
    )
    caveats: str | None = None

    @field_validator("key_findings", "errors_encountered", "lessons_learned", mode="before")
    @classmethod
    def _strings_only(cls, value: object) -> list[str]:
        if isinstance(value, str):
            return [value] if value.strip() else []
        if not isinstance(value, list):
            return []
        return [
            str(v).strip() for v in value if isinstance(v, str | int | float) and str(v).strip()
        ]

    @field_validator("summary", "caveats", mode="before")
    @classmethod
    def _text_only(cls, value: object) -> str | None:
        return value if isinstance(value, str) else None


class SynthesisResult(InternalPayload):
    """What the synthesis LLM said, validated; `parsed` is None when its answer was unusable."""

    parsed: SynthesisFields | None = None
    raw_excerpt: str = ""
    tokens: SynthesisTokens = Field(default_factory=SynthesisTokens)


class PersistDebriefInput(InternalPayload):
    """The `persist_debrief` activity's input: the debrief and its run."""

    input: DebriefInput
    debrief: AgentDebrief


class StoredLesson(BaseModel):
    """A lesson in the agent's memory (`starter.py lessons --json` prints these)."""

    id: int
    agent_id: str
    lesson: str
    run_id: str
    """The run whose debrief taught it."""
    created_at: datetime
    expires_at: datetime | None = None
    """After this it is no longer used, and `lessons` no longer lists it."""
