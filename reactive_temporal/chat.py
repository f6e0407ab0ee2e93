"""The client side of chat: talk to an agent's AgentWorkflow, alone or in sessions.

    reply = await agent.chat("Which PR had the most changes?")
    session = agent.session()
    await session.chat("What did you find?"); await session.history(); await session.end()

Each turn is a workflow update, created on first use (update-with-start), so the agent's
entity exists whenever someone talks to it; the validator's refusal comes back as a
ChatError naming what was wrong, and nothing is recorded.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, TypeVar

from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from reactive_temporal.chat_contracts import (
    DEFAULT_SESSION,
    AgentState,
    AgentWorkflowInput,
    ChatMessage,
    ChatReply,
    ChatRequest,
    SessionHistory,
    SessionRef,
    agent_workflow_id,
)
from reactive_temporal.contracts import AgentConfig, AgentDebrief

T = TypeVar("T")


class ChatError(ValueError):
    """The agent refused a chat request (empty message, unknown session, …)."""


def new_session_id() -> str:
    return f"sess_{int(time.time() * 1000)}_{uuid.uuid4().hex[:6]}"


class AgentEntity:
    """A client handle on one agent's AgentWorkflow."""

    def __init__(self, client: Client, task_queue: str, config: AgentConfig) -> None:
        self.client = client
        self.task_queue = task_queue
        self.config = config
        self.workflow_id = agent_workflow_id(config.agent_id)

    async def update(self, name: str, arg: Any, result_type: type[T]) -> T:
        start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
            "AgentWorkflow",
            AgentWorkflowInput(state=AgentState(agent=self.config)),
            id=self.workflow_id,
            task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            static_summary=f"agent {self.config.agent_id}: chat, sessions, last debrief",
        )
        try:
            result: T = await self.client.execute_update_with_start_workflow(
                name, arg, start_workflow_operation=start, result_type=result_type
            )
        except WorkflowUpdateFailedError as err:
            cause = err.cause
            message = getattr(cause, "message", None) or str(cause or err)
            raise ChatError(message) from err
        return result

    async def query(self, name: str, arg: Any, result_type: type[T], default: T) -> T:
        """A query's answer; `default` when the agent has no entity yet."""
        handle = self.client.get_workflow_handle(self.workflow_id)
        try:
            args = [] if arg is None else [arg]
            result: T = await handle.query(name, args=args, result_type=result_type)
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return default
            raise
        return result

    async def chat(self, request: ChatRequest) -> ChatReply:
        if request.agent is None:
            request = request.model_copy(update={"agent": self.config})
        return await self.update("chat", request, ChatReply)

    async def last_debrief(self) -> AgentDebrief | None:
        return await self.query("last_debrief", None, AgentDebrief | None, None)  # type: ignore[arg-type]


class Session:
    """A multi-turn conversation with the agent; its history lives in the AgentWorkflow and,
    once ended, in Postgres, from where `agent.session(id=…)` resumes it in any process."""

    def __init__(self, entity: AgentEntity, session_id: str | None = None) -> None:
        self.entity = entity
        self.id = session_id or new_session_id()
        self._opened = False

    async def open(self) -> list[ChatMessage]:
        """Open (or resume) the session; returns its history so far."""
        opened = await self.entity.update(
            "open_session", SessionRef(session_id=self.id), SessionHistory
        )
        self._opened = True
        return opened.messages

    async def chat(
        self, message: str, *, use_tools: bool | None = None, max_iterations: int | None = None
    ) -> ChatReply:
        if not self._opened:
            await self.open()
        request = ChatRequest(
            message=message, session_id=self.id, use_tools=use_tools, max_iterations=max_iterations
        )
        return await self.entity.chat(request)

    async def history(self) -> list[ChatMessage]:
        """A copy of the session's `{role, content, timestamp}` messages, oldest first."""
        history = await self.entity.query(
            "history",
            SessionRef(session_id=self.id),
            SessionHistory,
            SessionHistory(session_id=self.id),
        )
        return history.messages

    async def end(self) -> list[ChatMessage]:
        """Save the session to Postgres and clear it; returns what was saved. The session
        must be open in the agent (ChatError otherwise: unknown, or already ended)."""
        saved = await self.entity.update(
            "end_session", SessionRef(session_id=self.id), SessionHistory
        )
        self._opened = self.id == DEFAULT_SESSION
        return saved.messages
