"""AgentWorkflow: one long-lived entity per agent, for chat about its runs.

It holds what chat needs, durably: the last run's debrief (instant first, upgraded when the
rich one is ready, never replaced by an older run's late debrief), that run's tool
observations, and the open chat sessions. Runs keep themselves in Postgres as they end, and
the agent reads its last run there when chat needs it (with each chat turn, and for
`read_last_run`), and asks Temporal for its runs in progress: no run signals it (runs started
before that still do, and it still hears them; workflows/entity_news.py has what runs and
builders tell it). People talk to it with the validated `chat` update.

A chat turn takes one of two paths (workflows.chat_rules.route; workflows/entity_chat.py):
- direct: one LLM activity with the agent's system prompt, the run context (and the live
  state of a run in progress), and the windowed session history;
- tool: a capped child AgentRunWorkflow, whose run gets its own debrief like any run.

Sessions are saved to Postgres turn by turn, as each happens; the entity keeps only a window
of each (older messages paged out, read back with `read_session`), closes sessions idle past
a TTL, and pages out the least recently used windows when they outgrow their budget
(reactive_temporal.session_window), so its continue-as-new input stays far under Temporal's
2 MB whatever the chat volume. It continues as new when Temporal suggests it, once every
handler has finished, carrying its state; nothing a user can see is lost. When is decided
where a handler ends, never in a wait condition (workflows/entity_lifetime.py says why).
"""

from __future__ import annotations

import re

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from reactive_temporal import prompts
    from reactive_temporal.answered_turns import answered_before, recent, remember
    from reactive_temporal.contracts import names
    from reactive_temporal.contracts.debrief import AgentDebrief
    from reactive_temporal.contracts.entity import (
        DEFAULT_SESSION,
        SESSION_ID_PATTERN,
        AgentWorkflowInput,
        ChatMessage,
        ChatReply,
        ChatRequest,
        LoadSessionInput,
        ReadLastRunInput,
        ReadLastRunResult,
        ReadLiveRunsInput,
        ReadLiveRunsResult,
        ReadRunProgressInput,
        ReadRunProgressResult,
        SaveSessionInput,
        SessionBusy,
        SessionHistory,
        SessionPage,
        SessionRef,
    )
    from workflows.activity_options import RUN_QUERY, SESSION_LOAD, STORE
    from workflows.bugs import BUG_EXCEPTIONS
    from workflows.chat_rules import (
        build_context_summary,
        chat_request_problem,
        route,
    )
    from workflows.entity_chat import ChatPaths
    from workflows.entity_inputs import turn_agent_problem
    from workflows.entity_lifetime import notes_lifetime
    from workflows.entity_news import RunNews
    from workflows.entity_sessions import KEEP_ENDED_SESSIONS, SessionKeeper
    from workflows.session_turns import SessionTurns

SESSION_ID = re.compile(SESSION_ID_PATTERN)


@workflow.defn(name=names.AGENT_WORKFLOW, failure_exception_types=BUG_EXCEPTIONS)
class AgentWorkflow(ChatPaths, RunNews):
    @workflow.init
    def __init__(self, input: AgentWorkflowInput) -> None:
        self.state = input.state
        self.state.sessions.setdefault(DEFAULT_SESSION, [])
        self.continue_after = input.continue_as_new_after_events
        self.idle_after = input.session_idle_seconds
        self.sessions = SessionKeeper(self.state, self.idle_after)
        self.turns = SessionTurns()
        self.patch_bundle = input.patch_bundle
        self._ask_patches(input.patch_bundle)
        self._bound_state()

    @workflow.run
    async def run(self, input: AgentWorkflowInput) -> None:
        if self._sessions_saved_per_turn():
            await self.sessions.adopt_unsaved()
            while not (self.continue_due or self._time_to_continue_as_new()):
                try:
                    await workflow.wait_condition(
                        lambda: self._due() or self.sessions.wake,
                        timeout=self.sessions.until_next_idle(),
                    )
                except TimeoutError:
                    self.sessions.close_idle()
        else:  # an entity started before sessions were saved turn by turn
            await workflow.wait_condition(self._due)
        await workflow.wait_condition(workflow.all_handlers_finished)
        self.state.answered_turns = recent(self.state.answered_turns, workflow.now())
        workflow.continue_as_new(
            AgentWorkflowInput(
                state=self._state_for_next_run(),
                continue_as_new_after_events=self.continue_after,
                session_idle_seconds=self.idle_after,
                patch_bundle=self.patch_bundle,  # as it was started: a rollback stays safe
            )
        )

    # -- queries --------------------------------------------------------------------------------

    @workflow.query(name=names.LAST_DEBRIEF_QUERY)
    def last_debrief(self) -> AgentDebrief | None:
        """The last run's debrief as last read (`read_last_run` reads it first)."""
        return self.state.last_debrief

    @workflow.update(name=names.READ_LAST_RUN_UPDATE)
    @notes_lifetime
    async def read_last_run(self) -> AgentDebrief | None:
        """The last run's debrief, read from Postgres where runs keep themselves as they end
        (the agent learns of the run as a `run_finished` signal would have told it)."""
        read: ReadLastRunResult = await workflow.execute_activity(
            names.READ_LAST_RUN,
            ReadLastRunInput(agent_id=self.state.agent.agent_id),
            result_type=ReadLastRunResult,
            **RUN_QUERY,
            summary="read the last run",
        )
        if read.last_run is not None:
            self.run_finished(read.last_run)
        return self.state.last_debrief

    @read_last_run.validator
    def _validate_read_last_run(self) -> None:
        self._refuse_while_leaving()

    @workflow.query(name=names.SESSION_BUSY_QUERY)
    def session_busy(self, ref: SessionRef) -> SessionBusy:
        """The tool-path run the session's turn in progress runs as, and the turns waiting."""
        return self.turns.busy(ref.session_id)

    @workflow.query(name=names.HISTORY_QUERY)
    def history(self, ref: SessionRef) -> SessionHistory:
        """An open session's messages here, as copies (callers never reach the state).

        All of them, or its latest window with the position it starts at (the rest is in
        Postgres: `read_session`).
        """
        sid = ref.session_id
        messages = [m.model_copy() for m in self.state.sessions.get(sid, [])]
        meta = self.state.session_meta.get(sid)
        if meta is not None:
            return SessionHistory(
                session_id=sid,
                messages=messages,
                total_messages=meta.total,
                first_position=meta.total - len(messages),
            )
        whole = sid in self.state.sessions and self._saved_per_turn is False  # held whole here
        return SessionHistory(
            session_id=sid, messages=messages, total_messages=len(messages) if whole else None
        )

    @workflow.update(name=names.READ_SESSION_UPDATE)
    @notes_lifetime
    async def read_session(self, page: SessionPage) -> SessionHistory:
        """A page of a session from Postgres, from `offset`: any session, open or ended."""
        return await self.sessions.load(page.session_id, offset=page.offset)

    @read_session.validator
    def _validate_read(self, page: SessionPage) -> None:
        _require_valid_id(page.session_id)
        self._refuse_while_leaving()

    # -- sessions -------------------------------------------------------------------------------

    @workflow.update(name=names.OPEN_SESSION_UPDATE)
    @notes_lifetime
    async def open_session(self, ref: SessionRef) -> SessionHistory:
        """Open a session, resuming a saved one from Postgres when it is not open here."""
        if self._sessions_saved_per_turn():
            async with self.sessions.lock(ref.session_id):
                await self.sessions.open(ref.session_id)
                self.sessions.bound(keep=ref.session_id)
                return self.history(ref)
        if ref.session_id not in self.state.sessions:
            loaded: SessionHistory = await workflow.execute_activity(
                names.LOAD_SESSION,
                LoadSessionInput(agent_id=self.state.agent.agent_id, session_id=ref.session_id),
                result_type=SessionHistory,
                **SESSION_LOAD,
                summary=f"load session {ref.session_id}",
            )
            self.state.sessions.setdefault(ref.session_id, loaded.messages)
            if ref.session_id in self.state.ended_sessions:
                self.state.ended_sessions.remove(ref.session_id)
        return self.history(ref)

    @open_session.validator
    def _validate_open(self, ref: SessionRef) -> None:
        _require_valid_id(ref.session_id)
        self._refuse_while_leaving()

    @workflow.update(name=names.END_SESSION_UPDATE)
    @notes_lifetime
    async def end_session(self, ref: SessionRef) -> SessionHistory:
        """Save the session to Postgres, then clear it; it can be reopened later by id. Ending
        a session that is not open (never used, or ended already) succeeds."""
        if self._sessions_saved_per_turn():
            async with self.sessions.lock(ref.session_id):
                await self.sessions.save_unsaved(ref.session_id)
                ended = self.history(ref)
                self.sessions.close(ref.session_id)
                return ended
        async with self.sessions.lock(ref.session_id):
            messages = self.state.sessions.get(ref.session_id, [])
            await workflow.execute_activity(
                names.SAVE_SESSION,
                SaveSessionInput(
                    agent_id=self.state.agent.agent_id,
                    session_id=ref.session_id,
                    messages=messages,
                ),
                **STORE,
                summary=f"save session {ref.session_id}",
            )
            saved = SessionHistory(session_id=ref.session_id, messages=list(messages))
            self.state.sessions.pop(ref.session_id, None)
            if ref.session_id == DEFAULT_SESSION:
                self.state.sessions[DEFAULT_SESSION] = []  # the agent's own chat never closes
            else:
                self.state.ended_sessions = [
                    *self.state.ended_sessions[-(KEEP_ENDED_SESSIONS - 1) :],
                    ref.session_id,
                ]
            return saved

    @end_session.validator
    def _validate_end(self, ref: SessionRef) -> None:
        _require_valid_id(ref.session_id)
        if self._saved_per_turn is False:  # before the patch, ending needed an open session
            self._require_open(ref.session_id)
        self._refuse_while_leaving()

    # -- chat -----------------------------------------------------------------------------------

    @workflow.update(name=names.CHAT_UPDATE)
    @notes_lifetime
    async def chat(self, request: ChatRequest) -> ChatReply:
        turn_id = _update_id()
        earlier = answered_before(self.state.answered_turns, turn_id)
        if earlier is not None:  # an earlier run answered it; the server sent it again
            return earlier
        saved_per_turn = self._sessions_saved_per_turn()
        lock = self.sessions.lock(request.session_id)
        async with self.turns.holding(request.session_id, turn_id, lock):
            if saved_per_turn:
                await self.sessions.open(request.session_id)
            history = list(self.state.sessions.get(request.session_id, []))
            live = await self._live_runs_context()  # learns of the last run too
            context = build_context_summary(self.state.last_debrief, self.state.last_observations)
            context = "\n\n---\n\n".join(c for c in (live, context) if c)
            agent = request.agent or self.state.agent
            path = route(request.message, request.use_tools, ascii_words=self._ascii_routing)
            if path == "direct-llm":
                reply = await self._direct(
                    agent, request.message, context, history, request.stream_id, request.session_id
                )
            else:
                reply = await self._with_tools(agent, request, context, history)
            now = workflow.now()
            turn = [
                ChatMessage(role="user", content=request.message, timestamp=now),
                ChatMessage(role="assistant", content=reply.message, timestamp=now),
            ]
            if saved_per_turn:
                await self.sessions.save_turn(request.session_id, turn)
            else:
                self.state.sessions.setdefault(request.session_id, []).extend(turn)
            self.state.chat_turns += 1
            self.state.answered_turns = remember(
                self.state.answered_turns, turn_id, reply, workflow.now()
            )
            workflow.set_current_details(
                f"{self.state.chat_turns} chat turns · {len(self.state.sessions)} open sessions · "
                f"last run {self.state.last_run_id or '—'}"
            )
            return reply

    @chat.validator
    def _validate_chat(self, request: ChatRequest) -> None:
        agent_id = self.state.agent.agent_id
        if problem := chat_request_problem(request, agent_id) or turn_agent_problem(request.agent):
            raise ValueError(problem)
        self._require_open(request.session_id)
        self._refuse_while_leaving()

    def _require_open(self, session_id: str) -> None:
        if session_id in self.state.sessions or session_id == DEFAULT_SESSION:
            return
        if session_id in self.state.ended_sessions:
            raise ValueError(f"session {session_id!r} has ended; open it again to resume it")
        raise ValueError(f"unknown session {session_id!r}; open it first")

    async def _live_runs_context(self) -> str:
        """Mid-run chat: the live state of runs in progress, read with their query. Runs are
        found in Temporal's visibility, and the last finished run is read from Postgres in the
        same activity; entities that learned of runs by `run_started` signals (before that
        patch) replay their own list."""
        from_visibility, from_store = self._runs_read()
        if from_visibility:
            live: ReadLiveRunsResult = await workflow.execute_activity(
                names.READ_LIVE_RUNS,
                ReadLiveRunsInput(agent_id=self.state.agent.agent_id, last_run=from_store),
                result_type=ReadLiveRunsResult,
                **RUN_QUERY,
                summary="read the last run and the runs in progress"
                if from_store
                else "read the runs in progress",
            )
            if live.last_run is not None:
                self.run_finished(live.last_run)
            return "\n\n".join(prompts.live_run_context(p) for p in live.runs)
        parts = []
        for run_id in list(self.state.active_runs):
            read: ReadRunProgressResult = await workflow.execute_activity(
                names.READ_RUN_PROGRESS,
                ReadRunProgressInput(run_id=run_id),
                result_type=ReadRunProgressResult,
                **RUN_QUERY,
                summary=f"read progress of {run_id}",
            )
            if read.progress is None or read.progress.status != "running":
                self.state.active_runs.pop(run_id, None)  # it ended without telling us
                continue
            parts.append(prompts.live_run_context(read.progress))
        return "\n\n".join(parts)


def _update_id() -> str:
    info = workflow.current_update_info()
    if info is None:  # only an update handler calls this
        raise RuntimeError("not in an update handler")
    return info.id


def _require_valid_id(session_id: str) -> None:
    if not SESSION_ID.fullmatch(session_id):
        raise ValueError(
            f"invalid session id {session_id!r}: use letters, digits, '_', '.', ':', '-' "
            "(at most 128 characters)"
        )
