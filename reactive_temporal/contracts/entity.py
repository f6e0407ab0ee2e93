"""Contracts of the agent entity (AgentWorkflow): chat, sessions, and what runs tell it.

Durable like every contract: add fields only as optional, never rename.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, Field

from reactive_temporal.contracts import names
from reactive_temporal.contracts.debrief import AgentDebrief, PersistDebriefInput
from reactive_temporal.contracts.internal import InternalPayload
from reactive_temporal.contracts.run import AgentConfig, RunProgress

CHAT_MESSAGE_MAX_CHARS = 20_000
DEFAULT_SESSION = "default"
SESSION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
RoutedVia = Literal["direct-llm", "react-loop"]


def _as_utc(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


UtcDatetime = Annotated[datetime, AfterValidator(_as_utc)]
"""A time the entity compares with the times it holds (all aware): one sent without a zone
(a signal sent by hand) is taken as UTC, where comparing it raised in the entity's handler."""


class ChatMessage(BaseModel):
    """One message of a chat session."""

    role: Literal["user", "assistant"]
    content: str
    timestamp: datetime


class ChatRequest(BaseModel):
    """One chat turn, as the `chat` update receives it."""

    message: str
    session_id: str = DEFAULT_SESSION
    use_tools: bool | None = None
    """Force the tool path (True) or the direct path (False); None routes by intent."""
    max_iterations: int | None = None
    """Cap of the tool path's run (default 5)."""
    agent: AgentConfig | None = None
    """The caller's agent settings (model, persona, tools) for this turn; None: the last run's."""
    stream_id: str | None = None
    """Where this turn's live output goes (a `run-<agent>-chat-<12 hex>` id the caller made):
    the direct path streams its reply under it, the tool path's run takes it as its id."""


class ChatReply(BaseModel):
    """The agent's answer to a chat turn, and how it was made."""

    message: str
    routed_via: RoutedVia
    tools_used: list[str] | None = None
    tokens: int = 0
    steps: int | None = None
    cost: float = 0.0
    run_id: str | None = None
    """The tool path's run, which has its own debrief."""


class AnsweredTurn(BaseModel):
    """A chat turn the agent answered, by the id of the update that asked it."""

    update_id: str
    at: datetime
    reply: ChatReply


class RunStarted(BaseModel):
    """A run tells its agent it started (for mid-run chat)."""

    run_id: str
    started_at: UtcDatetime


class RunFinished(BaseModel):
    """A run tells its agent it finished, with what chat may quote of it."""

    run_id: str
    started_at: UtcDatetime
    agent: AgentConfig
    debrief: AgentDebrief | None = None
    observations: list[str] = Field(default_factory=list)
    """`[Tool result]: …` / `[Agent analysis]: …` lines, already capped in size."""


class DebriefReady(BaseModel):
    """A run's rich debrief, sent to its agent when written."""

    run_id: str
    debrief: AgentDebrief


class SessionRef(BaseModel):
    """Names a chat session."""

    session_id: str


class SessionBusy(BaseModel):
    """What a session's turns are doing now (the `session_busy` query's answer)."""

    session_id: str
    tool_run: str | None = None
    """The workflow id of the tool-path run the session's turn in progress runs as."""
    waiting_turns: list[str] = Field(default_factory=list)
    """The update ids of the session's turns taken and waiting for that turn to finish."""


class SessionHistory(BaseModel):
    """A chat session's messages, oldest first."""

    session_id: str
    messages: list[ChatMessage] = Field(default_factory=list)
    total_messages: int | None = None
    """How many messages the whole session has (Postgres keeps them all); None: not known
    here (the session is not open in the agent)."""
    first_position: int = 0
    """The position of `messages[0]` in the whole session: more than 0 when older messages
    were paged out to Postgres (read them with the `read_session` update)."""

    @property
    def complete(self) -> bool:
        """Whether `messages` is the whole session."""
        return self.first_position == 0 and self.total_messages == len(self.messages)


class SessionPage(BaseModel):
    """Which part of a session to read from Postgres (`read_session`)."""

    session_id: str
    offset: int = Field(default=0, ge=0)


class SessionMeta(BaseModel):
    """What the agent knows of an open session besides its window of messages."""

    total: int = 0
    """Messages saved in Postgres: the next turn goes to this position."""
    last_active: datetime | None = None


class AgentState(BaseModel):
    """Everything AgentWorkflow carries across continue-as-new."""

    agent: AgentConfig
    last_run_id: str | None = None
    last_run_started_at: datetime | None = None
    last_debrief: AgentDebrief | None = None
    last_observations: list[str] = Field(default_factory=list)
    active_runs: dict[str, datetime] = Field(default_factory=dict)
    sessions: dict[str, list[ChatMessage]] = Field(default_factory=dict)
    """Each open session's window of latest messages (all of it, before sessions were saved
    turn by turn)."""
    ended_sessions: list[str] = Field(default_factory=list)
    chat_turns: int = 0
    session_meta: dict[str, SessionMeta] = Field(default_factory=dict)
    """Open sessions saved turn by turn: their size in Postgres and when last used."""
    agent_set_at: datetime | None = None
    """When the builder last set `agent` (a run that started before does not replace it)."""
    answered_turns: list[AnsweredTurn] = Field(default_factory=list)
    """The latest chat turns' replies (`reactive_temporal.answered_turns`): a turn the server
    hands to the next run again is answered from here, not asked of the model twice."""


class AgentWorkflowInput(BaseModel):
    """The AgentWorkflow's input: its state, and when to continue as new."""

    state: AgentState
    session_idle_seconds: float | None = None
    """Sessions with no turn for this long close (saved, reopenable); None: 24 hours."""
    continue_as_new_after_events: int | None = None
    """Continue as new past this many history events (tests set it low); None: when Temporal
    suggests it."""
    patch_bundle: str | None = None
    """The patch bundle (`names.ENTITY_PATCH_BUNDLE`) the entity run was started with, kept
    when it continues as new: the run takes the bundle's patches as on without asking
    Temporal. None makes the run ask `workflow.patched`, as entity runs always did; the
    project's starters leave it None for one more release (`names.ENTITY_BUNDLE_IN_STARTS`)."""


def new_entity_input(agent: AgentConfig) -> AgentWorkflowInput:
    """The input of an agent's entity started now (by a chat, a run's news, a builder)."""
    bundle = names.ENTITY_PATCH_BUNDLE if names.ENTITY_BUNDLE_IN_STARTS else None
    return AgentWorkflowInput(state=AgentState(agent=agent), patch_bundle=bundle)


class ChatDirectInput(InternalPayload):
    """The `chat_direct` activity's input: one direct LLM call."""

    agent: AgentConfig
    context: str
    """The system prompt (persona and chat style; with the run context, before notes)."""
    history: list[ChatMessage]
    message: str
    notes: str | None = None
    """What the agent knows of its runs, quoted, sent as a user-role message before the
    history (never in the system prompt)."""
    stream_id: str | None = None
    """Stream the reply into the live output under this id (the chat turn's `stream_id`)."""
    session_id: str | None = None
    """The turn's session, recorded with what its LLM call cost (`chat_usage`); None from an
    entity older than that."""


class ChatDirectResult(InternalPayload):
    """The direct chat path's answer, tokens and cost."""

    message: str
    tokens: int = 0
    cost: float = 0.0


class SaveSessionInput(InternalPayload):
    """The `save_session` activity's input: a session to store in Postgres."""

    agent_id: str
    session_id: str
    messages: list[ChatMessage]
    first_position: int | None = None
    """Where `messages` go in the session (a turn appended); None: they are the whole
    session, replacing what was saved."""


class LoadSessionInput(InternalPayload):
    """The `load_session` activity's input: a session to read from Postgres."""

    agent_id: str
    session_id: str
    offset: int | None = None
    """Read from this position (a page of at most `max_bytes`); None: the whole session, or
    with `window` its latest messages."""
    max_bytes: int | None = None
    window: bool = False
    """Only the latest messages that fit the agent's window of the session."""


class ReadRunProgressInput(InternalPayload):
    """The `read_run_progress` activity's input: the run to query."""

    run_id: str


class ReadRunProgressResult(InternalPayload):
    """A run's live state; None when the run is gone."""

    progress: RunProgress | None = None


class ReadLiveRunsInput(InternalPayload):
    """Which agent's running runs mid-run chat reads (read_live_runs)."""

    agent_id: str
    limit: int = 5
    """The most recently started running runs read; more are left out of the chat context."""
    last_run: bool = False
    """Also read the agent's last finished run from Postgres (the last-run-from-store patch)."""


class ReadLiveRunsResult(InternalPayload):
    """The agent's runs in progress, as their progress queries answered."""

    runs: list[RunProgress] = Field(default_factory=list)
    """Newest first; only runs that answered their progress query as still running."""
    last_run: RunFinished | None = None
    """The agent's last finished run as it kept itself in Postgres (when asked for)."""


class ReadLastRunInput(InternalPayload):
    """Which agent's last finished run to read (`read_last_run`)."""

    agent_id: str


class ReadLastRunResult(InternalPayload):
    """The agent's last finished run as it kept itself in Postgres; None before any."""

    last_run: RunFinished | None = None


class NotifyAgentInput(InternalPayload):
    """The `notify_agent` activity's input: which signal to send, with what.

    With `keep_last_run`, no signal: the finished run is kept in Postgres for its agent to read.
    """

    agent: AgentConfig
    signal: Literal["run_started", "run_finished"]
    run_started: RunStarted | None = None
    run_finished: RunFinished | None = None
    persist: PersistDebriefInput | None = None
    """The run's deterministic debrief, saved before the agent is told, when the run starts no
    DebriefWorkflow (nothing to synthesize)."""
    keep_last_run: bool = False
    """Keep `run_finished` as the agent's last run in Postgres instead of signalling it (runs
    with the last-run-in-store patch)."""
    calls_in_flight: bool = False
    """The run ended while a model call or a tool of its ran (cancelled, past its deadline,
    answered by an operator): every worker is told to stop them (`activities.run_stops`)."""
    debrief_if_taken: PersistDebriefInput | None = None
    """The run's deterministic debrief when it starts a DebriefWorkflow: saved here only when
    that workflow's id is taken by one an earlier timeline of the run started and is still
    running (the run was reset meanwhile), which the run's own cannot start beside; that one
    is ended first (`activities/run_timelines.py`)."""
    earlier_timeline: bool = False
    """The run is not on its first execution (reset since): a debrief an earlier timeline
    started and that still runs is ended before the run keeps its own (`persist`)."""
