"""Chat activities: the direct-path LLM call, and sessions saved to Postgres."""

from __future__ import annotations

from typing import Any

from temporalio import activity

from activities.llm_calls import LlmEndpoint, chat_request
from activities.store import SessionStore
from reactive_temporal.contracts import names
from reactive_temporal.contracts.entity import (
    ChatDirectInput,
    ChatDirectResult,
    LoadSessionInput,
    SaveSessionInput,
    SessionHistory,
)

DIRECT_MAX_TOKENS = 1024
DIRECT_TEMPERATURE = 0.7
"""The direct path's temperature when the agent sets none: a conversation, not a task."""


class ChatActivities:
    def __init__(self, sessions: SessionStore, llm: LlmEndpoint) -> None:
        self.sessions = sessions
        self.llm = llm

    @activity.defn(name=names.CHAT_DIRECT)
    async def chat_direct(self, input: ChatDirectInput) -> ChatDirectResult:
        """One LLM call: persona and context as the system prompt, then the history."""
        messages: list[dict[str, Any]] = [{"role": "system", "content": input.context}]
        messages += [{"role": m.role, "content": m.content} for m in input.history]
        messages.append({"role": "user", "content": input.message})
        temperature = input.agent.temperature
        completion = await self.llm.complete(
            chat_request(
                input.agent.model,
                messages,
                temperature=DIRECT_TEMPERATURE if temperature is None else temperature,
                max_tokens=DIRECT_MAX_TOKENS,
                reasoning_effort=input.agent.reasoning_effort,
            ),
            max_attempts=input.agent.llm_max_attempts,
        )
        return ChatDirectResult(
            message=(completion.content or "").strip() or "(no answer)",
            tokens=completion.usage.total_tokens,
            cost=completion.cost,
        )

    @activity.defn(name=names.LOAD_SESSION)
    async def load_session(self, input: LoadSessionInput) -> SessionHistory:
        messages = await self.sessions.load(input.agent_id, input.session_id)
        return SessionHistory(session_id=input.session_id, messages=messages)

    @activity.defn(name=names.SAVE_SESSION)
    async def save_session(self, input: SaveSessionInput) -> None:
        await self.sessions.save(input.agent_id, input.session_id, input.messages)
