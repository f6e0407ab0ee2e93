"""The client side of chat: talk to an agent's AgentWorkflow, alone or in sessions.

    reply = await agent.chat("Which PR had the most changes?")
    session = agent.session()
    await session.chat("What did you find?"); await session.history(); await session.end()

Each turn is a workflow update, created on first use (update-with-start), so the agent's
entity exists whenever someone talks to it; the validator's refusal comes back as a
ChatError naming what was wrong, and nothing is recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
import uuid
from collections.abc import Awaitable, Coroutine
from datetime import timedelta
from typing import Any, TypeVar, cast

from pydantic import ValidationError
from temporalio import workflow
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ChildWorkflowError,
    WorkflowAlreadyStartedError,
)
from temporalio.service import RPCError, RPCStatusCode

from reactive_temporal.api.results import UNREACHABLE_PATIENCE_SECONDS
from reactive_temporal.api.retrying_steps import QUERY_PATIENCE_SECONDS
from reactive_temporal.api.unserved import RunUnserved, while_served, workflow_unserved
from reactive_temporal.contracts import names
from reactive_temporal.contracts.debrief import AgentDebrief
from reactive_temporal.contracts.entity import (
    DEFAULT_SESSION,
    SESSION_ID_PATTERN,
    ChatMessage,
    ChatReply,
    ChatRequest,
    SessionHistory,
    SessionPage,
    SessionRef,
    new_entity_input,
)
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.errors import workflow_not_found
from reactive_temporal.refusals import busy_or_aborted, tasks_failing, while_busy
from reactive_temporal.sanitize import clip
from workflows.agent_entity import AgentWorkflow
from workflows.chat_rules import chat_request_problem

ArgT = TypeVar("ArgT")
ResultT = TypeVar("ResultT")


class ChatError(ValueError):
    """The agent refused a chat request (empty message, unknown session, …)."""


CHAT_ERROR_MAX_CHARS = 2_000


def update_failure_message(err: WorkflowUpdateFailedError) -> str:
    """Why the update failed, as its innermost cause says it.

    A failed activity's own error (the model endpoint's refusal), not "Activity task
    failed"; clipped, since an endpoint's error body can be megabytes.
    """
    cause: BaseException | None = err.cause
    while isinstance(cause, ActivityError | ChildWorkflowError) and cause.cause is not None:
        cause = cause.cause
    message = getattr(cause, "message", None) or str(cause or err)
    return clip(message, CHAT_ERROR_MAX_CHARS)


ENTITY_BETWEEN_RUNS = (
    (RPCStatusCode.FAILED_PRECONDITION, "limit on number of total updates"),  # older servers
    (RPCStatusCode.FAILED_PRECONDITION, "total number of distinct updates"),
)
"""How the server refuses an update while the agent's entity moves to its next run: one run
takes at most 2,000 updates (`history.maxTotalUpdates`; it is told to continue as new at 90%),
and the updates it had admitted but not begun when it does are aborted (`UPDATE_ABORTED`). Its
messages (which changed between server versions) are the only mark of either."""


def busy_or_between_runs(err: Exception) -> bool:
    """Refused for now: the server is busy, or the entity is continuing as new.

    The server says so past its limit; the entity itself once it is time (it takes no new
    update then, so that what it took can finish). Its next run takes the update, under the
    same update id; a chat turn the last run had answered is answered from the replies it
    carried over (`reactive_temporal.answered_turns`), so it still runs once.
    """
    if isinstance(err, WorkflowUpdateFailedError):
        cause = err.cause
        return isinstance(cause, ApplicationError) and cause.type == names.ENTITY_BETWEEN_RUNS
    return busy_or_aborted(err) or (
        isinstance(err, RPCError)
        and any(
            err.status == status and text in err.message for status, text in ENTITY_BETWEEN_RUNS
        )
    )


def chat_request(**fields: Any) -> ChatRequest:
    """A chat request, or a ChatError naming what is wrong with it (not pydantic's error)."""
    try:
        return ChatRequest(**fields)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "request"
        raise ChatError(f"invalid {where}: {first['msg']}") from None


def new_session_id() -> str:
    """A fresh session id: `sess_<epoch ms>_<6 hex>`, sortable by creation time."""
    return f"sess_{int(time.time() * 1000)}_{uuid.uuid4().hex[:6]}"


class AgentEntity:
    """A client handle on one agent's AgentWorkflow.

    `send_config`: chat turns carry this handle's configuration (an agent built in code);
    otherwise (the CLI) the agent's own, as its runs and builder last set it, is used.
    """

    def __init__(
        self,
        client: Client,
        task_queue: str,
        config: AgentConfig,
        *,
        send_config: bool = True,
        unreachable_for: float = UNREACHABLE_PATIENCE_SECONDS,
    ) -> None:
        """The AgentWorkflow of `config`'s agent, reached with `client` on `task_queue`.

        An update is sent again through `unreachable_for` seconds of a server out of reach.
        """
        self.client = client
        self.task_queue = task_queue
        self.config = config
        self.send_config = send_config
        self.unreachable_for = unreachable_for
        self.workflow_id = names.agent_workflow_id(config.agent_id)

    async def update(
        self,
        update: workflow.UpdateMethodMultiParam[
            [AgentWorkflow, ArgT], Coroutine[Any, Any, ResultT]
        ],
        arg: ArgT,
    ) -> ResultT:
        """Run an update on the agent's AgentWorkflow, starting the workflow if needed.

        The update has one id for all its tries, so a turn sent again while Temporal is busy
        (`while_busy`) runs once, in whichever of the entity's runs it reaches.

        Raises:
            ChatError: the update's validator refused the request (it names the problem).
        """
        try:
            result = await self._send(update, [arg])
        except WorkflowUpdateFailedError as err:
            raise ChatError(update_failure_message(err)) from err
        except RPCError as err:
            if not tasks_failing(err):
                raise
            raise ChatError(  # the server's words named no agent and no way out
                f"agent {self.config.agent_id}'s workflow ({self.workflow_id}) is failing its "
                "workflow tasks and takes no turn now; a worker's log says why (a "
                "nondeterminism error: a worker of another build, or a bug). The turn was "
                "not taken: send it again once a worker completes the task"
            ) from err
        # The SDK types a named async update's result as the coroutine; it returns its value.
        return cast(ResultT, result)

    async def _send(
        self, update: workflow.UpdateMethodMultiParam[Any, Any], args: list[Any]
    ) -> Any:
        """An update-with-start, sent again while Temporal is too busy to take it.

        Its one update id makes a run of the entity run it once however often it is sent (and
        the next run answer a chat turn the last one answered from its carried-over replies).
        """
        await self.require_served(starts=True)
        update_id = str(uuid.uuid4())

        async def attempt() -> Any:
            start = self._start()
            try:
                return await self.client.execute_update_with_start_workflow(
                    update, args=args, id=update_id, start_workflow_operation=start
                )
            except RPCError:
                # The start operation keeps its own copy of the error; read it, or asyncio
                # logs "exception was never retrieved" for every refused try. (Bounded: an
                # error raised before the start was sent leaves it unset.)
                with contextlib.suppress(RPCError, WorkflowAlreadyStartedError, TimeoutError):
                    await asyncio.wait_for(start.workflow_handle(), timeout=1)
                raise

        # Out of reach too (a restart, a failover): sent again under its one id it runs once,
        # where it raised at once, the turn lost to its caller as a wait for a result is not.
        sending = while_busy(
            attempt,
            f"an update of {self.workflow_id}",
            passing=busy_or_between_runs,
            unreachable_for=self.unreachable_for,
        )
        try:
            return await while_served(
                self.client,
                self.workflow_id,
                sending,
                lambda why: (
                    f"{self._whose} has not taken the request: {why}. It was sent and "
                    "may still be answered once a worker runs it (`starter.py session history` "
                    "shows a turn answered)"
                ),
            )
        except RunUnserved as err:
            raise ChatError(str(err)) from err

    @property
    def _whose(self) -> str:
        return f"agent {self.config.agent_id}'s workflow ({self.workflow_id})"

    async def require_served(self, *, starts: bool = False) -> None:
        """ChatError, nothing sent, when no worker can serve the agent's AgentWorkflow now.

        `starts`: the request starts the workflow on this handle's task queue when it does
        not run (`api.unserved.workflow_unserved`).
        """
        start_queue = self.task_queue if starts else None
        if (why := await workflow_unserved(self.client, self.workflow_id, start_queue)) is None:
            return
        raise ChatError(
            f"{self._whose} can take no request now: {why}. It was not sent: send it again "
            "once a worker runs it"
        )

    def _start(self) -> WithStartWorkflowOperation[AgentWorkflow, None]:
        """The agent's AgentWorkflow, started by an update when it does not exist yet."""
        return WithStartWorkflowOperation(
            AgentWorkflow.run,
            new_entity_input(self.config),
            id=self.workflow_id,
            task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            static_summary=f"agent {self.config.agent_id}: chat, sessions, last debrief",
        )

    def handle(self) -> WorkflowHandle[AgentWorkflow, None]:
        """The agent's AgentWorkflow (which may not exist yet)."""
        return self.client.get_workflow_handle_for(AgentWorkflow.run, self.workflow_id)

    async def configure(self) -> None:
        """Tell the agent its configuration (signal-with-start): chat from any process uses it."""
        await self.client.start_workflow(
            AgentWorkflow.run,
            new_entity_input(self.config),
            id=self.workflow_id,
            task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            start_signal=names.CONFIGURE_SIGNAL,
            start_signal_args=[self.config],
            static_summary=f"agent {self.config.agent_id}: chat, sessions, last debrief",
        )

    async def chat(self, request: ChatRequest) -> ChatReply:
        """One chat turn.

        The request carries this handle's agent settings (when it sends them) unless it has
        its own.

        Raises:
            ChatError: the request was refused, here (the agent's own checks, before it is
                sent) or by the agent.
        """
        if request.agent is None and self.send_config:
            request = request.model_copy(update={"agent": self.config})
        # checked here first: the agent's refusal of a message of megabytes carries it back,
        # which fails the agent's task (Temporal's 2 MB) and its chat for everyone a while
        if (problem := chat_request_problem(request, self.config.agent_id)) is not None:
            raise ChatError(problem)
        return await self.update(AgentWorkflow.chat, request)

    async def last_debrief(self) -> AgentDebrief | None:
        """The last run's debrief; None before its first run.

        An update, not a query: runs keep themselves in Postgres as they end, and the agent
        reads its last run there (no run signals it), which a query cannot do.
        """
        return cast("AgentDebrief | None", await self._send(AgentWorkflow.read_last_run, []))

    async def history(self, session_id: str) -> SessionHistory:
        """A session's whole history.

        What the agent holds, and what it paged out to Postgres (or all of it, for an ended
        session) read back a page at a time; empty when neither the agent nor Postgres knows
        the session.
        """
        await self.require_served()
        query = self.handle().query(
            AgentWorkflow.history,
            SessionRef(session_id=session_id),
            rpc_timeout=timedelta(seconds=QUERY_PATIENCE_SECONDS),
        )
        held = await _unless_missing(query, SessionHistory(session_id=session_id))
        if held.complete or (held.total_messages is None and held.messages):
            return held  # an entity from before sessions were saved turn by turn holds it all
        messages: list[ChatMessage] = []
        total = held.total_messages
        while total is None or len(messages) < total:
            page = await self.update(
                AgentWorkflow.read_session, SessionPage(session_id=session_id, offset=len(messages))
            )
            total = page.total_messages or 0
            if not page.messages:
                break
            messages += page.messages
        return SessionHistory(
            session_id=session_id, messages=messages, total_messages=len(messages)
        )


async def _unless_missing(query: Awaitable[ResultT], default: ResultT) -> ResultT:
    """A query's answer, or `default` when the agent has no entity yet."""
    try:
        return await query
    except RPCError as err:
        if workflow_not_found(err):
            return default
        raise


def valid_session_id(session_id: str) -> str:
    """`session_id`, or a ChatError (a ValueError) saying what a session id is.

    "" was a new session, without a word (`chat --session ""`).
    """
    if not isinstance(session_id, str) or not re.fullmatch(SESSION_ID_PATTERN, session_id):
        raise ChatError(
            f"invalid session id {session_id!r:.140}: use letters, digits, '_', '.', ':', '-' "
            "(at most 128 characters)"
        )
    return session_id


class Session:
    """A multi-turn conversation with the agent.

    Its history lives in the AgentWorkflow and, once ended, in Postgres, from where
    `agent.session(id=…)` resumes it in any process.
    """

    def __init__(self, entity: AgentEntity, session_id: str | None = None) -> None:
        """A session with the agent behind `entity`: a new one, or the one with this id."""
        self.entity = entity
        self.id = new_session_id() if session_id is None else valid_session_id(session_id)
        self._opened = False

    async def open(self) -> list[ChatMessage]:
        """Open (or resume) the session; returns its history so far."""
        opened = await self.entity.update(
            AgentWorkflow.open_session, SessionRef(session_id=self.id)
        )
        self._opened = True
        return opened.messages

    async def chat(
        self,
        message: str,
        *,
        use_tools: bool | None = None,
        max_iterations: int | None = None,
        stream_id: str | None = None,
    ) -> ChatReply:
        """One turn in this session (opened on first use).

        Routed to tools or not by intent, or as `use_tools` forces; `stream_id` as in
        `Agent.chat`.

        Raises:
            ChatError: the agent refused the message (empty, too long, session ended, …).
        """
        if not self._opened:
            await self.open()
        request = chat_request(
            message=message,
            session_id=self.id,
            use_tools=use_tools,
            max_iterations=max_iterations,
            stream_id=stream_id,
        )
        try:
            return await self.entity.chat(request)
        except ChatError as err:
            if "open it" not in str(err):
                raise
            await self.open()  # closed while idle (it is saved): resume it and go on
            return await self.entity.chat(request)

    async def history(self) -> list[ChatMessage]:
        """A copy of the session's `{role, content, timestamp}` messages, oldest first."""
        return (await self.entity.history(self.id)).messages

    async def end(self) -> list[ChatMessage]:
        """End the session and clear it from the agent; returns its messages.

        Every turn is already saved in Postgres, so it can be resumed later by id; ending a
        session that is not open (never used, or ended already) succeeds.
        """
        ended = await self.entity.update(AgentWorkflow.end_session, SessionRef(session_id=self.id))
        self._opened = self.id == DEFAULT_SESSION
        if ended.complete or ended.total_messages is None:
            return ended.messages
        return (await self.entity.history(self.id)).messages
