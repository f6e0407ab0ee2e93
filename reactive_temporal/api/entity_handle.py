"""The client side of chat: talk to an agent's AgentWorkflow.

Each turn is a workflow update, created on first use (update-with-start), so the agent's
entity exists whenever someone talks to it; the validator's refusal comes back as a
ChatError naming what was wrong, and nothing is recorded. `Agent.chat` and every `Session`
go through one handle, so a turn is sent, waited out and refused the same way either way.
A cluster that refuses updates says so as a ClusterRefusal naming its setting; one that
refuses only update-with-start has the entity started first (`_start_then_update`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar, cast

from temporalio import workflow
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from reactive_temporal.api.chat_refusals import (
    ChatError,
    ChatUnavailable,
    busy_or_between_runs,
    cluster_refusal,
    update_failure_message,
)
from reactive_temporal.api.entity_closing import once_more_if_ended
from reactive_temporal.api.entity_leaving import unless_waiting_on_approval
from reactive_temporal.api.entity_wedge import EntityWedged, reset_command, wedged
from reactive_temporal.api.results import UNREACHABLE_PATIENCE_SECONDS
from reactive_temporal.api.session_pages import whole_history
from reactive_temporal.api.session_waits import unless_session_waits
from reactive_temporal.api.unserved import RunUnserved, while_served, workflow_stall
from reactive_temporal.cluster_switches import (
    UPDATE_WITH_START,
    UPDATES,
    refused_for_good,
    switched_off,
)
from reactive_temporal.contracts import names
from reactive_temporal.contracts.debrief import AgentDebrief
from reactive_temporal.contracts.entity import (
    ChatReply,
    ChatRequest,
    SessionHistory,
    new_entity_input,
)
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.errors import workflow_not_found
from reactive_temporal.refusals import tasks_failing, while_busy
from workflows.agent_entity import AgentWorkflow
from workflows.chat_rules import chat_request_problem

ArgT = TypeVar("ArgT")
ResultT = TypeVar("ResultT")

log = logging.getLogger(__name__)

ENTITY_SUMMARY = "agent {agent}: chat, sessions, last debrief"

WITHOUT_UPDATE_WITH_START: weakref.WeakSet[Client] = weakref.WeakSet()
"""Clients whose cluster refused an update-with-start for good (switched off, or a server
without it): their updates go `_start_then_update` from then on, so a turn does not pay a
refused call first. Remembered for the client's life (a process's, for the CLI): a cluster
that turns it on later is still served right, at one more call when an entity is missing."""


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
        *,
        resend_taken: bool = True,
    ) -> ResultT:
        """Run an update on the agent's AgentWorkflow, starting the workflow if needed.

        The update has one id for all its tries, so a turn sent again while Temporal is busy
        (`while_busy`) runs once, in whichever of the entity's runs it reaches.
        `resend_taken`: sent again when the run that took it ended before answering (not a
        chat turn: `api/entity_closing.py`).

        Raises:
            ChatError: the update's validator refused the request (it names the problem).
            EntityEnded: the entity ended under the request (a ChatUnavailable).
        """
        try:
            result = await self._send(update, [arg], resend_taken=resend_taken)
        except WorkflowUpdateFailedError as err:
            raise ChatError(update_failure_message(err)) from err
        except RPCError as err:
            if not tasks_failing(err):
                raise
            _, stall = await workflow_stall(self.client, self.workflow_id)
            if stall.retrying is not None and wedged(stall.retrying):
                agent_id = self.config.agent_id
                raise EntityWedged(agent_id, self.workflow_id, stall.retrying, sent=False) from err
            raise ChatError(  # the server's words named no agent and no way out
                f"agent {self.config.agent_id}'s workflow ({self.workflow_id}) is failing its "
                "workflow tasks and takes no turn now; a worker's log says why (a "
                "nondeterminism error: a worker of another build, or a bug). The turn was "
                "not taken: send it again once a worker completes the task (one that keeps "
                f"failing: `{reset_command(self.config.agent_id)}`)"
            ) from err
        # The SDK types a named async update's result as the coroutine; it returns its value.
        return cast(ResultT, result)

    async def _send(
        self,
        update: workflow.UpdateMethodMultiParam[Any, Any],
        args: list[Any],
        *,
        resend_taken: bool = True,
    ) -> Any:
        """An update that starts the entity if need be, sent again while Temporal is busy.

        Its one update id makes a run of the entity run it once however often it is sent (and
        the next run answer a chat turn the last one answered from its carried-over replies).
        Sent once more when the entity's run ended under it (`api/entity_closing.py`): one
        that had not taken it, or, with `resend_taken`, one that had.

        Raises:
            ClusterRefusal: the cluster refuses updates (switched off, or a server without
                them), naming the setting; nothing was taken.
            EntityEnded: the entity ended under it, and under the try sent again.
        """
        await self.require_served(starts=True)
        update_id = str(uuid.uuid4())
        session_id = getattr(args[0], "session_id", None) if args else None
        delivered = once_more_if_ended(
            lambda: self._delivered(update, args, update_id),
            self.config.agent_id,
            resend_taken=resend_taken,
            session_id=session_id,
        )
        if update is not AgentWorkflow.chat or session_id is None:
            return await delivered
        # a turn behind its session's tool-path run parked on approval is said at once
        return await unless_session_waits(
            delivered, self.client, self.config.agent_id, session_id, update_id
        )

    async def _delivered(
        self, update: workflow.UpdateMethodMultiParam[Any, Any], args: list[Any], update_id: str
    ) -> Any:
        """One delivery: update-with-start where the cluster allows it, else the fallback."""
        try:
            if self.client not in WITHOUT_UPDATE_WITH_START:
                try:
                    return await self._sent(self._with_start(update, args, update_id))
                except RPCError as err:
                    if not refused_for_good(err, UPDATE_WITH_START) or switched_off(err, UPDATES):
                        raise  # its update's refusal: no update gets through
                    self._without_update_with_start(err)
            return await self._sent(self._start_then_update(update, args, update_id))
        except RPCError as err:
            refusal = cluster_refusal(err, self.client.namespace)
            if refusal is None:
                raise
            raise refusal from err

    def _with_start(
        self, update: workflow.UpdateMethodMultiParam[Any, Any], args: list[Any], update_id: str
    ) -> Callable[[], Awaitable[Any]]:
        """One try of the update-with-start."""

        async def attempt() -> Any:
            start = self._start()
            try:
                return await self.client.execute_update_with_start_workflow(
                    update, args=args, id=update_id, start_workflow_operation=start
                )
            except (RPCError, WorkflowUpdateRPCTimeoutOrCancelledError):
                # The start operation keeps its own copy of the error; read it, or asyncio
                # logs "exception was never retrieved" for every refused try, and for a try
                # given up on (a wait cancelled: the entity stuck, the caller's timeout).
                # (Bounded: an error raised before the start was sent leaves it unset.)
                with contextlib.suppress(RPCError, WorkflowAlreadyStartedError, TimeoutError):
                    await asyncio.wait_for(start.workflow_handle(), timeout=1)
                raise

        return attempt

    def _start_then_update(
        self, update: workflow.UpdateMethodMultiParam[Any, Any], args: list[Any], update_id: str
    ) -> Callable[[], Awaitable[Any]]:
        """One try of the update on a cluster without update-with-start: the start after it.

        The update is sent to the entity, and when there is none (never started, or its last run
        closed), sent again once the entity is started.

        A turn still runs once: only the update is the turn, under its one update id for every
        try. The start is `_start`'s, sent alone (a new entity gets this handle's configuration,
        a running one is left as it is; not `configure`'s signal, which would set a running
        agent's configuration to the CLI's defaults): started twice, it is one entity. An
        update refused NOT_FOUND was admitted nowhere, and neither was anything of a refused
        update-with-start, so the update sent after the start is the turn's first delivery; a
        run admits a later try's id once, and its next run answers a turn already answered from
        the replies it carries over (`answered_turns`). An entity ended between the start and
        the update is NOT_FOUND again: `_send` tries once more (`api/entity_closing.py`). The
        update goes first: one call a turn while the entity runs, and nothing started on a
        cluster that refuses updates too.
        """

        async def attempt() -> Any:
            handle = self.handle()
            try:
                return await handle.execute_update(update, args=args, id=update_id)
            except RPCError as err:
                if not workflow_not_found(err):
                    raise
            try:
                await self.client.start_workflow(
                    AgentWorkflow.run,
                    new_entity_input(self.config),
                    **self.start_options(),
                )
            except WorkflowAlreadyStartedError:
                pass  # a server that ignores the conflict policy: it runs, as needed
            return await handle.execute_update(update, args=args, id=update_id)

        return attempt

    def _without_update_with_start(self, err: RPCError) -> None:
        """Remember that this client's cluster refuses update-with-start, saying so once."""
        WITHOUT_UPDATE_WITH_START.add(self.client)
        log.warning(
            "the Temporal cluster refuses update-with-start (%s); agents' entities are "
            "started first, then sent their updates (one more call when one does not run). "
            "To send both at once: %s",
            err.message,
            UPDATE_WITH_START.fix(),
        )

    async def _sent(self, attempt: Callable[[], Awaitable[Any]]) -> Any:
        """`attempt()`, sent again while Temporal is busy or out of reach.

        For as long as a worker may serve the entity; a ChatError once none can.
        """
        # Out of reach too (a restart, a failover): sent again under its one id it runs once,
        # where it raised at once, the turn lost to its caller as a wait for a result is not.
        sending = while_busy(
            unless_waiting_on_approval(attempt, self.client, self.config.agent_id),
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
            if err.retrying is not None and wedged(err.retrying):
                raise EntityWedged(
                    self.config.agent_id, self.workflow_id, err.retrying, sent=True
                ) from err
            raise ChatUnavailable(str(err)) from err

    @property
    def _whose(self) -> str:
        return f"agent {self.config.agent_id}'s workflow ({self.workflow_id})"

    async def require_served(self, *, starts: bool = False) -> None:
        """ChatError, nothing sent, when no worker can serve the agent's AgentWorkflow now.

        `starts`: the request starts the workflow on this handle's task queue when it does
        not run (`api.unserved.workflow_unserved`).
        """
        start_queue = self.task_queue if starts else None
        why, stall = await workflow_stall(self.client, self.workflow_id, start_queue)
        if why is None:
            return
        if stall.retrying is not None and wedged(stall.retrying):
            raise EntityWedged(self.config.agent_id, self.workflow_id, stall.retrying, sent=False)
        raise ChatUnavailable(
            f"{self._whose} can take no request now: {why}. It was not sent: send it again "
            "once a worker runs it"
        )

    def start_options(self) -> dict[str, Any]:
        """Every start of the agent's AgentWorkflow: id, queue, summary; one running stays."""
        return {
            "id": self.workflow_id,
            "task_queue": self.task_queue,
            "id_conflict_policy": WorkflowIDConflictPolicy.USE_EXISTING,
            "static_summary": ENTITY_SUMMARY.format(agent=self.config.agent_id),
        }

    def _start(self) -> WithStartWorkflowOperation[AgentWorkflow, None]:
        """The agent's AgentWorkflow, started by an update when it does not exist yet."""
        return WithStartWorkflowOperation(
            AgentWorkflow.run,
            new_entity_input(self.config),
            **self.start_options(),
        )

    def handle(self) -> WorkflowHandle[AgentWorkflow, None]:
        """The agent's AgentWorkflow (which may not exist yet)."""
        return self.client.get_workflow_handle_for(AgentWorkflow.run, self.workflow_id)

    async def configure(self) -> None:
        """Tell the agent its configuration (signal-with-start): chat from any process uses it."""
        await self.client.start_workflow(
            AgentWorkflow.run,
            new_entity_input(self.config),
            start_signal=names.CONFIGURE_SIGNAL,
            start_signal_args=[self.config],
            **self.start_options(),
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
        return await self.update(AgentWorkflow.chat, request, resend_taken=False)

    async def last_debrief(self) -> AgentDebrief | None:
        """The last run's debrief; None before its first run.

        An update, not a query: runs keep themselves in Postgres as they end, and the agent
        reads its last run there (no run signals it), which a query cannot do.
        """
        return cast("AgentDebrief | None", await self._send(AgentWorkflow.read_last_run, []))

    async def history(self, session_id: str) -> SessionHistory:
        """A session's whole history (`api/session_pages.py`); empty when none is known."""
        return await whole_history(self, session_id)
