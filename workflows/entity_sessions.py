"""The agent entity's chat sessions, saved turn by turn, with a bounded window of each kept.

Every turn goes to Postgres as it happens (`save_session` at the turn's position); the
entity's state keeps each open session's latest messages (reactive_temporal.session_window),
pages out the least recently used windows when they outgrow their budget, and closes
sessions idle past a TTL, so its continue-as-new input stays far under 2 MB whatever the chat
volume. A session not held here (resumed, paged out, closed while idle) is read back from
Postgres when it is used again.

Workflow code: it runs inside AgentWorkflow, activities by name, decisions from the pure
rules; the entity serialises each session's handlers with `lock`.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from reactive_temporal.contracts import names
    from reactive_temporal.contracts.entity import (
        DEFAULT_SESSION,
        AgentState,
        ChatMessage,
        LoadSessionInput,
        SaveSessionInput,
        SessionHistory,
        SessionMeta,
    )
    from reactive_temporal.session_window import (
        SESSION_IDLE_TTL,
        next_idle_deadline,
        sessions_to_close,
        sessions_to_page_out,
        trim_window,
    )
    from workflows.activity_options import SESSION_LOAD, STORE
    from workflows.store_refusals import store_refusal

KEEP_ENDED_SESSIONS = 200


class SessionKeeper:
    def __init__(self, state: AgentState, idle_after_seconds: float | None) -> None:
        self.state = state
        self.idle_ttl = (
            SESSION_IDLE_TTL
            if idle_after_seconds is None
            else timedelta(seconds=idle_after_seconds)
        )
        self.locks: dict[str, asyncio.Lock] = {}
        self.watching: datetime | None = None
        """The idle deadline the entity's timer waits for (None: no timer)."""
        self.wake = False
        """A session goes idle sooner than the timer waits: the entity sets a new one."""

    def lock(self, session_id: str) -> asyncio.Lock:
        """One handler at a time per session."""
        return self.locks.setdefault(session_id, asyncio.Lock())

    # -- Postgres, through activities --------------------------------------------------------

    async def load(self, session_id: str, **what: object) -> SessionHistory:
        loaded: SessionHistory = await workflow.execute_activity(
            names.LOAD_SESSION,
            LoadSessionInput(agent_id=self.state.agent.agent_id, session_id=session_id, **what),
            result_type=SessionHistory,
            **SESSION_LOAD,
            summary=f"load session {session_id}",
        )
        return loaded

    async def _save(self, session_id: str, messages: list[ChatMessage], first: int | None) -> None:
        await workflow.execute_activity(
            names.SAVE_SESSION,
            SaveSessionInput(
                agent_id=self.state.agent.agent_id,
                session_id=session_id,
                messages=messages,
                first_position=first,
            ),
            **STORE,
            summary=f"save session {session_id}",
        )

    # -- what handlers do ----------------------------------------------------------------------

    async def open(self, session_id: str) -> None:
        """The session open here with its window: as it is, or its latest messages read back
        from Postgres (a session resumed, paged out, or closed while idle)."""
        meta = self.state.session_meta.get(session_id)
        window = self.state.sessions.get(session_id)
        if meta is None and window:
            await self.save_unsaved(session_id)
        elif meta is None or (meta.total and not window):
            loaded = await self.load(session_id, window=True)
            self.state.sessions[session_id] = loaded.messages
            self.state.session_meta[session_id] = SessionMeta(
                total=loaded.total_messages or 0, last_active=workflow.now()
            )
        if session_id in self.state.ended_sessions:
            self.state.ended_sessions.remove(session_id)
        self._watch()

    async def save_unsaved(self, session_id: str) -> None:
        """A session held whole in state (from before turns were saved): save it whole."""
        messages = self.state.sessions.get(session_id)
        if session_id in self.state.session_meta or not messages:
            return
        await self._save(session_id, messages, None)
        self.state.session_meta[session_id] = SessionMeta(
            total=len(messages), last_active=workflow.now()
        )
        self.state.sessions[session_id] = trim_window(messages)

    async def adopt_unsaved(self) -> None:
        """Sessions an older entity held whole: saved, then windowed like any other. One
        whose messages Postgres refuses for good stays held whole (its updates fail saying
        why), and the entity goes on serving the others: this runs in the entity's main
        loop, where a failure would end the entity."""
        for session_id in list(self.state.sessions):
            async with self.lock(session_id):
                try:
                    await self.save_unsaved(session_id)
                except ActivityError as err:
                    if (refusal := store_refusal(err)) is None:
                        raise
                    workflow.logger.error("session %s stays unsaved: %s", session_id, refusal)
        self.bound()

    async def save_turn(self, session_id: str, turn: list[ChatMessage]) -> None:
        """Postgres first, then the window: a turn the store did not take is not shown.
        Refused for good (a `StoreDataError`), the chat update fails saying why and the
        session stays as it was (workflows/store_refusals.py)."""
        meta = self.state.session_meta.setdefault(session_id, SessionMeta())
        await self._save(session_id, turn, meta.total)
        meta.total += len(turn)
        meta.last_active = workflow.now()
        window = [*self.state.sessions.get(session_id, []), *turn]
        self.state.sessions[session_id] = trim_window(window)
        self.bound(keep=session_id)
        self._watch()

    def close(self, session_id: str) -> None:
        """Out of the state (its messages are in Postgres): ended, or for the agent's own
        default session simply paged out until the next turn."""
        was_open = session_id in self.state.sessions
        self.state.sessions.pop(session_id, None)
        self.state.session_meta.pop(session_id, None)
        if session_id == DEFAULT_SESSION or not was_open:
            return
        ended = [s for s in self.state.ended_sessions if s != session_id]
        self.state.ended_sessions = [*ended[-(KEEP_ENDED_SESSIONS - 1) :], session_id]

    # -- keeping the state bounded -------------------------------------------------------------

    def bound(self, keep: str | None = None) -> None:
        """Windows over their budget leave the state, least recently used first; too many
        open sessions close (all are saved). Sessions with a handler running stay."""
        kept = ({keep} if keep else set()) | self._busy()
        active = self._last_active()
        windows = {sid: self.state.sessions[sid] for sid in active}
        for sid in sessions_to_page_out(windows, active, keep=kept):
            self.state.sessions[sid] = []
        for sid in sessions_to_close(active, workflow.now(), ttl=self.idle_ttl, keep=kept):
            self.close(sid)

    def until_next_idle(self) -> timedelta | None:
        """How long until a session goes idle (the timer to set); None with none to watch."""
        self.wake = False
        self.watching = next_idle_deadline(self._last_active(), ttl=self.idle_ttl)
        if self.watching is None:
            return None
        return max(self.watching - workflow.now(), timedelta(seconds=1))

    def _watch(self) -> None:
        """Wake the entity when a session now goes idle before the deadline it waits for (a
        turn only moves a session's deadline later: one timer per idle period at most)."""
        deadline = next_idle_deadline(self._last_active(), ttl=self.idle_ttl)
        if deadline is not None and (self.watching is None or deadline < self.watching):
            self.wake = True

    def close_idle(self) -> None:
        for sid in sessions_to_close(
            self._last_active(), workflow.now(), ttl=self.idle_ttl, keep=self._busy()
        ):
            self.close(sid)

    def _last_active(self) -> dict[str, datetime]:
        return {
            sid: m.last_active
            for sid, m in self.state.session_meta.items()
            if m.last_active is not None and sid in self.state.sessions
        }

    def _busy(self) -> set[str]:
        return {sid for sid, lock in self.locks.items() if lock.locked()}
