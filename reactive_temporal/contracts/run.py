"""Contracts of a run: its agent, input, transcript, activities' payloads and progress.

Every model here is serialised into Temporal's history by the pydantic data converter, so
they are durable contracts: new fields must be optional (with a default), and names never
change.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from reactive_temporal.contracts.approvals import PendingApproval
from reactive_temporal.contracts.internal import InternalPayload
from reactive_temporal.contracts.retrying import RetryingStep, WaitingForWorker

TerminatedBy = Literal[
    "final_answer_tool",
    "final_answer",
    "max_iterations",
    "end_turn",
    "llm_error",
    "cancelled",
    "budget_exceeded",
    "timeout",
    "error",
]
"""How a run ended (the reference's `terminatedBy`, minus the opt-in `abstained`), plus the
endings an operator or a limit imposes: `cancelled` (a cancel request), `budget_exceeded`
(the token or cost budget), `timeout` (the run's deadline); and `error`: the run's workflow
code failed on a bug, or Postgres refused the run's data for good (the workflow then fails
visibly, after the run's debrief)."""

SUCCESSFUL_ENDINGS: frozenset[str] = frozenset({"final_answer_tool", "final_answer", "end_turn"})
"""The endings where the agent finished on its own; every other ending is a failed run."""

OUTPUT_FORMATS = ("text", "json", "markdown", "csv", "html")
"""Formats a final answer may declare."""

FINAL_ANSWER_TOOL = "final-answer"
"""The meta-tool that ends the loop. It is never registered as a normal tool."""

ReasoningEffort = Literal["minimal", "low", "medium", "high"]
"""How hard a reasoning model thinks (OpenAI's `reasoning_effort`)."""

TASK_MAX_CHARS = 100_000
MAX_ITERATIONS = 10_000
"""A run continues as new as it goes, so thousands of iterations stay within Temporal's
history limits."""
"""A task longer than this is refused before a run starts."""


class ToolCall(BaseModel):
    """One tool call as the model emitted it; `arguments` is the raw JSON text."""

    id: str
    name: str
    arguments: str = "{}"
    oversized: int | None = None
    """Set by `llm_step` when the model's arguments were too large to carry: their length,
    the arguments themselves dropped. The run refuses the call (reactive_temporal.limits)."""
    extra_content: dict[str, Any] | None = Field(default=None, exclude=True)
    """What the endpoint sent with the call for itself (Gemini 3's thought signature), sent
    back with it in later requests. Stored with the transcript, never in a workflow's
    payloads (`exclude`): the workflow has no use for it."""


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
    """An LLM call's token usage."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    """Output tokens, reasoning tokens included (providers bill them as output)."""
    reasoning_tokens: int = 0
    """Of the completion tokens, those a reasoning model spent thinking."""
    cached_tokens: int = 0
    """Of the prompt tokens, those the provider read from its cache (billed lower)."""
    estimated: bool = False
    """The endpoint reported no usable count (for either side, or both): those are estimates
    (`llm_usage.estimated_usage`)."""

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        """Two calls' usage together."""
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            estimated=self.estimated or other.estimated,
        )


AGENT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$"
"""An agent's name: what `AgentConfig.agent_id` takes, and so what a filter by agent can match."""
AGENT_ID_MAX = 200


class AgentConfig(BaseModel):
    """How an agent behaves on a run. Travels in the run's input."""

    agent_id: str = Field(min_length=1, max_length=AGENT_ID_MAX, pattern=AGENT_ID_PATTERN)
    model: str = Field(min_length=1, max_length=200)
    system_prompt: str | None = None
    max_iterations: int = Field(default=10, ge=1, le=MAX_ITERATIONS)
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
    token_budget: int | None = Field(default=None, ge=1)
    """Tokens (prompt + completion) the run may use; checked after every LLM step."""
    cost_budget: float | None = Field(default=None, gt=0)
    """USD the run may spend on LLM calls (the worker's price table); checked after every
    LLM step."""
    timeout_seconds: float | None = Field(default=None, gt=0, le=366 * 86400)
    """The run's deadline from its start: a durable timer that ends it as `timeout`,
    cancelling what is in flight."""
    reasoning_effort: ReasoningEffort | None = None
    """How hard a reasoning model thinks (`minimal`…`high`); sent only to models that take it,
    for the run, chat and the debrief alike."""
    approve_tools: list[str] = Field(default_factory=list)
    """Tools whose calls wait for a person's approval (`"all"`: every tool); tools marked
    `@tool(approve=True)` always do."""
    approval_timeout_seconds: float = Field(default=86_400, gt=0, le=366 * 86400)
    """A call undecided this long after it was made is denied with that reason."""
    live_output: bool = True
    """Write the run's live output (`watch`, `agent.events`): the model's replies streamed
    as they are generated, tool calls as they start and end. Off, watchers see only the
    run's end."""


class RunContinuation(BaseModel):
    """What a run carries into its next Temporal run when it continues as new.

    The workflow id and the transcript stay the same; the state and the first start travel.
    """

    state: dict[str, Any]
    """The run's state (workflows.run_state.RunState, compacted), as its model_dump makes it."""
    started_at: datetime
    """When the run's first Temporal run started: its duration counts from here."""
    continued: int = 1
    """How many times the run has continued as new."""
    approval_tools: list[str] = Field(default_factory=list)
    """Tools the worker marked as needing approval (`prepare_run` told the first run)."""


class AgentRunInput(BaseModel):
    """The AgentRunWorkflow's input: the task, and the agent that works on it."""

    task: str = Field(min_length=1, max_length=TASK_MAX_CHARS)
    agent: AgentConfig
    continue_as_new_every: int | None = Field(default=None, ge=1)
    """Iterations per Temporal run before the run continues as new; None means when
    Temporal suggests it, or every 500 iterations (tests set a low number)."""
    continuation: RunContinuation | None = None
    """Set when this is a run continuing as new, not a new run."""
    patch_bundle: str | None = None
    """The patch bundle (`names.RUN_PATCH_BUNDLE`, or an earlier one) the run was started
    with, set by the project's starters: the run then takes the bundle's patches as on
    without asking Temporal, which costs a marker and a TemporalChangeVersion upsert (two
    events and a visibility write). Any other value (None: a run started before it was set,
    or by a starter that does not set it) makes the run ask `workflow.patched`, as such runs
    always did."""

    @field_validator("task")
    @classmethod
    def _storable_task(cls, task: str) -> str:
        if not task.strip():
            raise ValueError("task is blank")
        if "\x00" in task:
            raise ValueError("task contains a NUL byte (\\x00), which cannot be stored")
        return task


class PrepareRunInput(InternalPayload):
    """The `prepare_run` activity's input."""

    run_id: str
    task: str
    agent: AgentConfig
    started_at: datetime | None = None
    """When set, the agent's AgentWorkflow is told the run started (for mid-run chat)."""


class RunSeed(BaseModel):
    """What a run's first LLM step needs to seed its transcript and resolve its tools.

    With it no `prepare_run` step comes before the first (the first-step-seeds patch). It
    holds the task and the parts of the agent that decide its prompt, tools and notes.
    """

    task: str
    agent_id: str
    system_prompt: str | None = None
    tools: list[str] | None = None
    required_tools: list[str] = Field(default_factory=list)
    approve_tools: list[str] = Field(default_factory=list)
    audit_rationale: bool = False
    memory: bool = True

    @classmethod
    def of(cls, task: str, agent: AgentConfig) -> RunSeed:
        """The seed of a run of `agent` on `task` (the agent's fields of the same names)."""
        return cls(task=task, **agent.model_dump(include=set(cls.model_fields) - {"task"}))


class PrepareRunResult(InternalPayload):
    """What `prepare_run` resolved: the run's tools and where its transcript goes on."""

    tool_names: list[str]
    """The tools this run may call, resolved against the worker's registry."""
    next_seq: int
    """The transcript position after the seeded system and task messages."""
    tool_timeouts: dict[str, float] = Field(default_factory=dict)
    """Each tool's own timeout in seconds, so its activity lives at least that long."""
    approval_tools: list[str] = Field(default_factory=list)
    """The run's tools the worker marks `@tool(approve=True)`: their calls always wait for
    a person."""


class RunToolInput(InternalPayload):
    """The `run_tool` activity's input: one tool call and where its observation goes."""

    run_id: str
    seq: int
    """Where the tool's observation goes in the transcript."""
    call: ToolCall
    live_output: bool = False
    """Write `tool_start` and `tool_end` to the run's live output."""
    cut_off: bool = False
    """The reply with this call was cut off at the output token limit: arguments that do not
    parse were cut short, and the observation says so."""


class ToolResult(InternalPayload):
    """One tool call's outcome; failures are observations too."""

    call_id: str
    name: str
    success: bool
    content: str
    duration_ms: int = 0


class RecordMessagesInput(InternalPayload):
    """The `record_messages` activity's input: messages at their transcript positions."""

    run_id: str
    messages: list[SeqMessage]


class FinalAnswerCapture(BaseModel):
    """The payload of a `final-answer` call, and of the operator's `final_answer` signal."""

    output: str
    format: str = "text"
    summary: str = ""
    confidence: str | None = None


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
    waiting_for: Literal["approval"] | None = None
    """What the run is parked on, with no activity running."""
    pending_approvals: list[PendingApproval] = Field(default_factory=list)
    retrying: RetryingStep | None = None
    """The step the run is stuck on, failing and tried again (an LLM endpoint down, Postgres
    unreachable), from its second attempt on; None while every step lands at its first.
    The query answers for the run's local activities and its waits for Postgres; the
    client's `run_progress` adds its activities as Temporal's server sees them."""
    waiting_for_worker: WaitingForWorker | None = None
    """The run's step no worker takes: none has polled its task queue for it for a while.
    Never set by the query (a worker answered it); `run_progress` adds it for an activity
    while a worker still runs the run's workflow tasks."""

    @property
    def current_iteration(self) -> int:
        """The iteration to show people, never beyond the run's real count.

        While the run runs, the one in progress (1-based); once it has ended, the number it
        completed.
        """
        if self.status != "running":
            return self.iteration
        upcoming = self.iteration + 1
        return min(upcoming, self.max_iterations) if self.max_iterations else upcoming
