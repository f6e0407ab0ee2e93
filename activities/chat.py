"""Chat activities: the direct-path LLM call, and sessions saved to Postgres."""

from __future__ import annotations

from typing import Any

import openai
from temporalio import activity

from activities.llm import heartbeating, llm_errors
from activities.store import SessionStore
from reactive_temporal.config import ModelPrice
from reactive_temporal.contracts import names
from reactive_temporal.contracts.entity import (
    ChatDirectInput,
    ChatDirectResult,
    LoadSessionInput,
    SaveSessionInput,
    SessionHistory,
)
from reactive_temporal.pricing import cost_of

DIRECT_MAX_TOKENS = 1024


class ChatActivities:
    def __init__(
        self,
        sessions: SessionStore,
        client: openai.AsyncOpenAI,
        prices: dict[str, ModelPrice] | None = None,
    ) -> None:
        self.sessions = sessions
        self.client = client
        self.prices = prices or {}

    @activity.defn(name=names.CHAT_DIRECT)
    async def chat_direct(self, input: ChatDirectInput) -> ChatDirectResult:
        """One LLM call: persona and context as the system prompt, then the history."""
        messages: list[dict[str, Any]] = [{"role": "system", "content": input.context}]
        messages += [{"role": m.role, "content": m.content} for m in input.history]
        messages.append({"role": "user", "content": input.message})
        with llm_errors(input.agent.llm_max_attempts):
            async with heartbeating():
                response = await self.client.chat.completions.create(
                    model=input.agent.model,
                    messages=messages,  # type: ignore[arg-type]
                    temperature=0.7 if input.agent.temperature is None else input.agent.temperature,
                    max_tokens=DIRECT_MAX_TOKENS,
                )
        content = (response.choices[0].message.content if response.choices else None) or ""
        prompt = response.usage.prompt_tokens if response.usage else 0
        completion = response.usage.completion_tokens if response.usage else 0
        return ChatDirectResult(
            message=content.strip() or "(no answer)",
            tokens=prompt + completion,
            cost=cost_of(input.agent.model, prompt, completion, self.prices),
        )

    @activity.defn(name=names.LOAD_SESSION)
    async def load_session(self, input: LoadSessionInput) -> SessionHistory:
        messages = await self.sessions.load(input.agent_id, input.session_id)
        return SessionHistory(session_id=input.session_id, messages=messages)

    @activity.defn(name=names.SAVE_SESSION)
    async def save_session(self, input: SaveSessionInput) -> None:
        await self.sessions.save(input.agent_id, input.session_id, input.messages)
