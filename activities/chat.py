"""Chat activities: the direct-path LLM call, and sessions saved to Postgres turn by turn.

What the agent knows of its runs reaches the model without credentials (a run's debrief and
observations are redacted where they are kept; an entity may hold a debrief it was told before
that): `activities/memory_redaction.py`."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from temporalio import activity

from activities.chat_usage import ChatTurnUsage, ChatUsageStore, TurnKey
from activities.completion import Completion
from activities.llm_calls import LlmEndpoint
from activities.llm_errors import unreadable_reply
from activities.llm_request import ContextWindowExceeded, chat_request
from activities.memory_redaction import redacted
from activities.pg_refusals import refused_data_fails
from activities.reply_calls import content_text, unmade_calls_out
from activities.request_messages import merged_turns
from activities.run_events import RunEvents
from activities.session_store import SessionStore
from reactive_temporal.contracts import names
from reactive_temporal.contracts.entity import (
    ChatDirectInput,
    ChatDirectResult,
    ChatMessage,
    LoadSessionInput,
    SaveSessionInput,
    SessionHistory,
)
from reactive_temporal.limits import REPLY_CONTENT_MAX_CHARS
from reactive_temporal.prompts import CUT_SHORT_NOTES
from reactive_temporal.sanitize import clean_text, clip
from reactive_temporal.session_window import WINDOW_BYTES, WINDOW_MESSAGES

SESSION_PAGE_BYTES = 1_000_000
"""A page of a session read back (the `read_session` update) stays well under 2 MB."""
DIRECT_MAX_TOKENS = 1024
DIRECT_TEMPERATURE = 0.7
"""The direct path's temperature when the agent sets none: a conversation, not a task."""
RECORD_USAGE_SECONDS = 5.0
"""How long a turn's answer may wait for its usage row: Postgres answers in milliseconds,
and a pool waiting out an outage (10 s a connection) would hold the reply for nothing."""


def direct_messages(
    system: str, notes: str | None, history: Sequence[ChatMessage], message: str
) -> list[dict[str, Any]]:
    """A direct turn's request: the system prompt, the notes on the agent's runs (a user
    message: data, not instructions), the session's history from its first whole turn, and
    the message; as whole turns a strict chat template takes.

    The history window is cut by size, and may begin with a reply whose question it left
    out; the notes, a user message, were followed by the user's own. Both broke the
    alternation strict templates check ("After the optional system message, conversation
    roles must alternate user/assistant/user/assistant/...", a 400 from vLLM): every direct
    turn after a run was refused by Gemma, Mistral-7B-Instruct or Llama 2 under vLLM. The
    reply goes; the notes and the question go as one user message. The session keeps both.
    """
    start = next((i for i, m in enumerate(history) if m.role == "user"), len(history))
    turns = [{"role": "user", "content": notes}] if notes else []
    turns += [{"role": m.role, "content": m.content} for m in history[start:]]
    turns.append({"role": "user", "content": message})
    return [{"role": "system", "content": system}, *merged_turns(turns)]


def _without_credentials(input: ChatDirectInput) -> ChatDirectInput:
    """The turn with the agent's notes on its runs redacted: `notes`, or for an entity from
    before notes were data, the system prompt that holds them (`context`)."""
    owner = f"agent {input.agent.agent_id}'s chat"
    if input.notes is not None:
        notes = redacted(input.notes, where="chat", owner=owner)
        return input if notes is input.notes else input.model_copy(update={"notes": notes})
    context = redacted(input.context, where="chat", owner=owner)
    return input if context is input.context else input.model_copy(update={"context": context})


class ChatActivities:
    def __init__(
        self, sessions: SessionStore, llm: LlmEndpoint, events: RunEvents, usage: ChatUsageStore
    ) -> None:
        self.sessions = sessions
        self.llm = llm
        self.events = events
        self.usage = usage

    @activity.defn(name=names.CHAT_DIRECT)
    async def chat_direct(self, input: ChatDirectInput) -> ChatDirectResult:
        """One LLM call: persona as the system prompt, the notes on the agent's runs as quoted
        data, then the history and the message. A request too long for the model's window
        goes again with the latest turn of history only."""
        input = _without_credentials(input)
        history = input.history
        calls_in_text = self.llm.capabilities(input.agent.model).calls_in_text
        async with self.events.streaming(
            input.stream_id or None, 0, calls_in_text=calls_in_text
        ) as text:
            while True:
                try:
                    completion = await self.llm.complete(
                        self._request(input, history),
                        max_attempts=input.agent.llm_max_attempts,
                        on_text=text.add if text is not None else None,
                        on_thinking=text.add_thinking if text is not None else None,
                    )
                    break
                except ContextWindowExceeded:
                    if len(history) <= 2:
                        raise
                    history = history[-2:]
        # bounded where it enters, as a run's replies are: a reply past the payload limit
        # could never be returned, and the activity (and the model) would be retried forever
        await self._record_usage(input, completion)
        try:  # whatever the endpoint put in its reply: an error here is the model's
            if (broke_off := completion.broke_off) is not None:  # half a reply, not the answer
                raise ValueError(f"the reply broke off part-way: {broke_off}")
            answer, finish_reason = completion.content, completion.finish_reason
            # no tools on this path: calls a model wrote at its end are markup, never the reply
            choices = completion.response.choices
            answer = unmade_calls_out(
                answer,
                content_text(choices[0].message) if choices else None,
                calls_in_text=calls_in_text,
            )
        except Exception as err:
            raise unreadable_reply(err, input.agent.llm_max_attempts) from None
        message = clip(clean_text(answer or ""), REPLY_CONTENT_MAX_CHARS).strip()
        cut_short = CUT_SHORT_NOTES.get(finish_reason or "")
        if cut_short:  # said to the person, and to the model next turn: the answer is not whole
            message = f"{message}\n\n{cut_short}" if message else cut_short
        return ChatDirectResult(
            message=message or "(no answer)",
            tokens=completion.usage.total_tokens,
            cost=completion.cost,
        )

    async def _record_usage(self, input: ChatDirectInput, completion: Completion) -> None:
        """What the turn's call used and cost, for `costs` (activities/chat_usage.py): keyed
        by this activity, so a retried attempt rewrites its row and the turn counts once.

        A write that fails (Postgres down, or not migrated yet) is logged, naming the agent,
        the session, the model, the tokens and the dollars left out, and the turn is answered
        all the same. Failing the activity instead would have Temporal call the model again,
        billed again, to write a row of accounting, and keep the person waiting on it; a step
        of its own in the agent's workflow, retried until it lands, would add a history event
        to every turn and a patch to the entity for a record no one is waiting for. The row
        is what `costs` reads; the model's tokens and dollars are also counted, whether the
        row is written or not, in the worker's metrics (`reactive_temporal_llm_cost_usd`)."""
        info = activity.info()
        turn = ChatTurnUsage(
            # a workflow's activity always has both (the SDK types them optional for
            # activities started on their own, which chat never is)
            key=TurnKey(info.workflow_id or "", info.workflow_run_id or "", info.activity_id),
            agent_id=input.agent.agent_id,
            session_id=input.session_id,
            model=input.agent.model,
            usage=completion.usage,
            cost_usd=completion.cost,
        )
        try:
            async with asyncio.timeout(RECORD_USAGE_SECONDS):
                await self.usage.record(turn)
        except Exception as err:  # never the turn's failure: see above
            activity.logger.warning(
                "a chat turn's usage was not recorded, `costs` will not count it: %s (%s: %s)",
                turn.described(),
                type(err).__name__,
                " ".join(str(err).split())[:300],
            )

    @staticmethod
    def _request(input: ChatDirectInput, history: list[ChatMessage]) -> dict[str, Any]:
        temperature = input.agent.temperature
        return chat_request(
            input.agent.model,
            direct_messages(input.context, input.notes, history, input.message),
            temperature=DIRECT_TEMPERATURE if temperature is None else temperature,
            max_tokens=DIRECT_MAX_TOKENS,
            reasoning_effort=input.agent.reasoning_effort,
        )

    @activity.defn(name=names.LOAD_SESSION)
    @refused_data_fails
    async def load_session(self, input: LoadSessionInput) -> SessionHistory:
        """A saved session: whole, a page from `offset`, or its latest window."""
        window = (WINDOW_MESSAGES, WINDOW_BYTES) if input.window else None
        max_bytes = input.max_bytes
        if input.offset is not None and max_bytes is None:
            max_bytes = SESSION_PAGE_BYTES
        messages, first, total = await self.sessions.load(
            input.agent_id,
            input.session_id,
            offset=input.offset or 0,
            max_bytes=max_bytes,
            window=window,
        )
        return SessionHistory(
            session_id=input.session_id,
            messages=messages,
            total_messages=total,
            first_position=first,
        )

    @activity.defn(name=names.SAVE_SESSION)
    @refused_data_fails
    async def save_session(self, input: SaveSessionInput) -> None:
        """A turn appended at its position, or (first_position None) the whole session."""
        if input.first_position is None:
            await self.sessions.save(input.agent_id, input.session_id, input.messages)
        else:
            await self.sessions.append(
                input.agent_id, input.session_id, input.first_position, input.messages
            )
