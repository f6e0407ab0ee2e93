"""Chat sessions: multi-turn conversations with an agent, resumable from any process.

    session = agent.session()
    await session.chat("What did you find?"); await session.history(); await session.end()

A session's history lives in the agent's AgentWorkflow (and, turn by turn, in Postgres), not
in this process: a `Session` is only its id and the agent's handle, so `agent.session(id=…)`
takes up a conversation another process started.
"""

from __future__ import annotations

import re
import time
import uuid

from reactive_temporal.api.arguments import text_argument
from reactive_temporal.api.chat_refusals import ChatError, chat_request
from reactive_temporal.api.entity_handle import AgentEntity
from reactive_temporal.api.workflow_ids import shown
from reactive_temporal.contracts.entity import (
    DEFAULT_SESSION,
    SESSION_ID_PATTERN,
    ChatMessage,
    ChatReply,
    SessionRef,
)
from workflows.agent_entity import AgentWorkflow


def new_session_id() -> str:
    """A fresh session id: `sess_<epoch ms>_<6 hex>`, sortable by creation time."""
    return f"sess_{int(time.time() * 1000)}_{uuid.uuid4().hex[:6]}"


def valid_session_id(session_id: str) -> str:
    """`session_id`, or a ChatError (a ValueError) saying what a session id is.

    "" was a new session, without a word (`chat --session ""`). TypeError when it is not
    text at all.
    """
    text_argument("a session id", session_id)
    if not re.fullmatch(SESSION_ID_PATTERN, session_id):
        raise ChatError(
            f"invalid session id {shown(session_id)}: use letters, digits, '_', '.', ':', '-' "
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
        request = chat_request(  # checked before the session is opened: nothing sent
            message=message,
            session_id=self.id,
            use_tools=use_tools,
            max_iterations=max_iterations,
            stream_id=stream_id,
        )
        if not self._opened:
            await self.open()
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
