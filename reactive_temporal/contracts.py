"""The data that crosses a boundary: client ↔ workflow ↔ activity.

Every model here is serialised into Temporal's history by the pydantic data converter, so
they are durable contracts: new fields must be optional (with a default), and names never
change. Workflows, activities and the client API all import from here and nowhere else.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import AliasChoices, BaseModel, Field, field_validator

TerminatedBy = Literal[
    "final_answer_tool", "final_answer", "max_iterations", "end_turn", "llm_error"
]
"""How a run ended (the reference's `terminatedBy`, minus the opt-in `abstained`)."""

OUTPUT_FORMATS = ("text", "json", "markdown", "csv", "html")
"""Formats a final answer may declare."""

FINAL_ANSWER_TOOL = "final-answer"
"""The meta-tool that ends the loop. It is never registered as a normal tool."""

TASK_MAX_CHARS = 100_000
"""A task longer than this is refused before a run starts."""

# Activity names: the workflow calls activities by name so that `workflows/` never imports
# the modules that hold openai or psycopg. Renaming one breaks runs already in flight.
PREPARE_RUN = "prepare_run"
LLM_STEP = "llm_step"
RUN_TOOL = "run_tool"
RECORD_MESSAGES = "record_messages"


class ToolCall(BaseModel):
    """One tool call as the model emitted it; `arguments` is the raw JSON text."""

    id: str
    name: str
    arguments: str = "{}"


class Message(BaseModel):
    """One transcript message, in the chat-completions shape."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None


class SeqMessage(BaseModel):
    """A message and its place in the run's transcript."""

    seq: int
    message: Message


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class AgentConfig(BaseModel):
    """How an agent behaves on a run. Travels in the run's input."""

    agent_id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
    model: str = Field(min_length=1, max_length=200)
    system_prompt: str | None = None
    max_iterations: int = Field(default=10, ge=1, le=500)
    required_tools: list[str] = Field(default_factory=list)
    tools: list[str] | None = None
    """Tool names this agent may use; None means every tool the worker has."""
    memory: bool = True
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_parallel_tools: int = Field(default=4, ge=1, le=32)
    tool_timeout_seconds: float = Field(default=120, gt=0, le=3600)
    llm_timeout_seconds: float = Field(default=120, gt=0, le=3600)
    """One LLM call longer than this is abandoned and retried."""
    llm_max_attempts: int = Field(default=5, ge=1, le=50)
    """Attempts per LLM call on retryable LLM failures (429, 5xx, timeouts, dropped
    connections); infrastructure failures (Postgres, a lost worker) retry beyond it."""
    audit_rationale: bool = False
    """Ask the model for a rationale block per tool call; they land in the debrief."""
    debrief_model: str | None = None
    """The model that writes the rich debrief; None means the run's model."""


class AgentRunInput(BaseModel):
    task: str = Field(min_length=1, max_length=TASK_MAX_CHARS)
    agent: AgentConfig

    @field_validator("task")
    @classmethod
    def _storable_task(cls, task: str) -> str:
        if not task.strip():
            raise ValueError("task is blank")
        if "\x00" in task:
            raise ValueError("task contains a NUL byte (\\x00), which cannot be stored")
        return task


class PrepareRunInput(BaseModel):
    run_id: str
    task: str
    agent: AgentConfig
    started_at: datetime | None = None
    """When set, the agent's AgentWorkflow is told the run started (for mid-run chat)."""


class PrepareRunResult(BaseModel):
    tool_names: list[str]
    """The tools this run may call, resolved against the worker's registry."""
    next_seq: int
    """The transcript position after the seeded system and task messages."""


class RationaleDetail(BaseModel):
    why: str
    refs: list[str] | None = None
    confidence: float | None = None


class LlmStepInput(BaseModel):
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


class LlmStepResult(BaseModel):
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    cost: float = 0.0
    rationale: dict[int, RationaleDetail] = Field(default_factory=dict)
    """Audit mode: rationale blocks by 1-based tool-call position (stripped from `content`)."""


class RunToolInput(BaseModel):
    run_id: str
    seq: int
    """Where the tool's observation goes in the transcript."""
    call: ToolCall


class ToolResult(BaseModel):
    call_id: str
    name: str
    success: bool
    content: str
    duration_ms: int = 0


class RecordMessagesInput(BaseModel):
    run_id: str
    messages: list[SeqMessage]


class FinalAnswerCapture(BaseModel):
    """The payload of a `final-answer` call, and of the operator's `final_answer` signal."""

    output: str
    format: str = "text"
    summary: str = ""
    confidence: str | None = None


# -- the debrief ---------------------------------------------------------------------------


def debrief_workflow_id(run_id: str) -> str:
    """The DebriefWorkflow of a run: derived, so a replayed or reset run finds the same one."""
    return f"{run_id}-debrief"


Outcome = Literal["success", "partial", "failed"]
Confidence = Literal["high", "medium", "low"]

SYNTHESIZE_DEBRIEF = "synthesize_debrief"
PERSIST_DEBRIEF = "persist_debrief"


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
    name: str
    calls: int
    errors: int
    avg_duration_ms: int


class ToolUsage(BaseModel):
    name: str
    calls: int
    success_rate: float
    """A fraction in [0, 1]."""


class SynthesisTokens(BaseModel):
    input: int = 0
    output: int = 0
    total: int = 0
    cost: float = 0.0


class DebriefMetrics(BaseModel):
    tokens: int = 0
    duration_ms: int = 0
    iterations: int = 0
    cost: float = 0.0
    synthesis_tokens: SynthesisTokens | None = None
    """The rich synthesis's own LLM usage; never counted in the run's tokens."""


class AgentDebrief(BaseModel):
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


class DebriefWorkflowInput(BaseModel):
    input: DebriefInput
    fallback: AgentDebrief
    synthesize: bool
    """False for trivial runs: the fallback is persisted as it is, with no LLM call."""
    model: str
    llm_timeout_seconds: float = 120
    agent_workflow_id: str | None = None
    """Signalled `debrief_ready` with the result, when it exists."""


class SynthesisRequest(BaseModel):
    input: DebriefInput
    model: str
    max_attempts: int | None = None


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


class SynthesisResult(BaseModel):
    """What the synthesis LLM said, validated; `parsed` is None when its answer was unusable."""

    parsed: SynthesisFields | None = None
    raw_excerpt: str = ""
    tokens: SynthesisTokens = Field(default_factory=SynthesisTokens)


class PersistDebriefInput(BaseModel):
    input: DebriefInput
    debrief: AgentDebrief


class RunMetadata(BaseModel):
    duration_ms: int = 0
    tokens_used: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    steps_count: int = 0
    """LLM steps plus tool calls executed."""
    iterations: int = 0
    """Completed LLM turns."""


class AgentResult(BaseModel):
    output: str
    success: bool
    run_id: str
    agent_id: str
    format: str = "text"
    terminated_by: TerminatedBy
    metadata: RunMetadata = Field(default_factory=RunMetadata)
    final_answer: FinalAnswerCapture | None = None
    tools_used: list[str] = Field(default_factory=list)
    """Real tools the run called, in first-use order (meta-tools like final-answer excluded)."""
    error: str | None = None
    """Why the run failed, when it did (e.g. the LLM error)."""
    debrief: AgentDebrief | None = None
    """The instant deterministic debrief (None with memory off); see `debrief_rich()`."""


class RunProgress(BaseModel):
    """A running run's live state, served by the `progress` query."""

    run_id: str
    agent_id: str
    status: Literal["running", "completed"] = "running"
    iteration: int = 0
    max_iterations: int = 0
    current_tool: str | None = None
    tools_called: list[str] = Field(default_factory=list)
    tokens: int = 0
    last_observation: str | None = None
    terminated_by: TerminatedBy | None = None
