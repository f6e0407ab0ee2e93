"""AgentRunWorkflow: one durable ReAct run.

The loop, as it runs:
  1. The first `llm_step` seeds the transcript in Postgres (system prompt, task, the agent's
     notes) and resolves the run's tools (runs started before the first-step-seeds patch
     did that in a `prepare_run` local activity first).
  2. `llm_step` sends the transcript so far, with the tools visible at this iteration
     (`final-answer` only once the gate opens), and records the model's reply
     (workflows/run_llm_step.py, the mixin that takes a step).
  3. The reply decides the turn (`workflows.turns.decide_turn`): run its tool calls as
     activities (bounded concurrency, failures become observations), judge a `final-answer`
     call (workflows/run_tools.py, the mixin that acts on a turn), finish on `FINAL ANSWER:`
     text or a plain reply (`end_turn`), or nudge and go on.
  4. Stop at the iteration cap (`max_iterations`) or when the LLM fails for good (`llm_error`).
     An operator's `final_answer` signal ends the run at once, cancelling an LLM call in flight.
  5. A cancel request, the run's deadline (`timeout_seconds`, a durable timer) or a token or
     cost budget checked after each LLM step stop it early (`cancelled`, `timeout`,
     `budget_exceeded`), and a tool call may wait for a person's approval
     (workflows/run_controls.py, the mixin that holds these controls): what is in flight is
     cancelled, and the run still returns its result, tells its agent and starts its debrief
     (workflows/run_wrapup.py, the mixin that ends a run).

Only references cross into activities: each message is written to Postgres by the activity
that produced it and appears once in this workflow's history, so history grows linearly.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from reactive_temporal import local_retries
    from reactive_temporal import search_attributes as sa
    from reactive_temporal.contracts import names
    from reactive_temporal.contracts.llm_payloads import LlmStepResult
    from reactive_temporal.contracts.result import AgentResult
    from reactive_temporal.contracts.retrying import RetryingStep
    from reactive_temporal.contracts.run import (
        AgentRunInput,
        FinalAnswerCapture,
        Message,
        PrepareRunInput,
        PrepareRunResult,
        RecordMessagesInput,
        RunContinuation,
        RunProgress,
        RunSeed,
        SeqMessage,
    )
    from reactive_temporal.limits import (
        CONFIDENCE_MAX_CHARS,
        answer_over_budget,
        bound_answer,
        run_input_problem,
    )
    from workflows.activity_options import STORE
    from workflows.bugs import BUG_EXCEPTIONS, bug_failure, bug_message
    from workflows.final_answer import (
        operator_answer_problem,
        validate_output,
    )
    from workflows.run_controls import RunControls
    from workflows.run_limits import (
        CONTINUE_AS_NEW_EVERY_ITERATIONS,
        should_continue_as_new,
    )
    from workflows.run_llm_step import RunLlmStep
    from workflows.run_state import RunState
    from workflows.run_tools import RunTools
    from workflows.run_wrapup import RunWrapUp
    from workflows.store_refusals import refusal_failure
    from workflows.turns import CUT_SHORT, Act, Ending, Nudge, decide_turn


@workflow.defn(name=names.AGENT_RUN_WORKFLOW, failure_exception_types=BUG_EXCEPTIONS)
class AgentRunWorkflow(RunWrapUp, RunControls, RunTools, RunLlmStep):
    @workflow.init
    def __init__(self, input: AgentRunInput) -> None:
        self.input = input
        self.agent = input.agent
        self.run_id = workflow.info().workflow_id
        self.state = RunState()
        self.local_store_steps = False
        self.attributes_on_change = False
        self.trivial_debrief_in_run = False
        self.last_run_in_store = False
        self.covered_patches = self._patch_bundle(input.patch_bundle)
        # Decisions changed since runs began that a signal handler may need: asked in the
        # first workflow task too (their markers join its batch), before any signal is handled.
        self.anchored_marker = self.patched(names.FINAL_ANSWER_LINE_PATCH)
        self.check_operator_answer = self.patched(names.OPERATOR_ANSWER_CHECK_PATCH)
        self.limit_tool_calls = self.patched(names.TOOL_CALL_LIMITS_PATCH)
        self.continues = self.patched(names.RUN_CONTINUE_AS_NEW_PATCH)
        self.started: datetime | None = None
        self.finishing_after_bug = False
        self.check_budgets = False
        self.approvals_on = False
        self.approval_events = False
        self.marked_tools: list[str] = []
        self.deadline_hit = False
        self.deadline: asyncio.Task[None] | None = None
        self.in_llm_call = False
        self.reply_cut_off = False
        self.calls_abandoned = False
        """A model call or a tool was left running when the run stopped (its wrap-up stops it)."""
        self.honest_endings = False
        self.failed_runs_teach = False
        self.unseeded: RunSeed | None = None
        """The seed the run's first LLM step writes, until it has (first-step-seeds patch)."""
        self.refused: str | None = None
        self.store_outage: RetryingStep | None = None
        self.stop_after_reply = False

    @staticmethod
    def _patch_bundle(bundle: str | None) -> frozenset[str]:
        """The patches the run takes as on without asking. A run started with a bundle in its
        input asks no patch (no marker, no TemporalChangeVersion upsert); one started without
        (or with a bundle this worker does not know) asks the starters' bundle once, for every
        patch it covers; runs started before bundles replay asking each patch they asked."""
        bundles = list(names.RUN_BUNDLE_COVERS)  # newest first
        replaying = workflow.unsafe.is_replaying()
        if bundle == names.RUN_PATCHES_2026_12:
            if replaying:
                # A worker from before the field (one deploy behind its starter) began the
                # run and asked the bundle: its replay must ask it again, where one begun
                # since finds no marker and records none.
                workflow.patched(names.RUN_PATCHES_2026_12)
            return names.RUN_PATCHES_2026_12_COVERS
        if bundle in names.RUN_BUNDLE_COVERS:
            if replaying:
                # begun by a worker that knew only an earlier bundle (one deploy behind its
                # starter): it asked that bundle and ran with its patches
                for earlier in bundles[bundles.index(bundle) + 1 :]:
                    if workflow.patched(earlier):
                        return names.RUN_BUNDLE_COVERS[earlier]
            return names.RUN_BUNDLE_COVERS[bundle]
        # a replay finds the bundle the run asked, whichever release's worker began it
        for asked in bundles if replaying else [names.RUN_PATCH_BUNDLE]:
            if workflow.patched(asked):
                return names.RUN_BUNDLE_COVERS[asked]
        return frozenset()

    @workflow.run
    async def run(self, input: AgentRunInput) -> AgentResult:
        """The run; a bug in this code, or data Postgres refuses for good, ends it as `error`
        with its debrief, then fails the workflow where people see it (workflows/bugs.py,
        workflows/store_refusals.py) instead of wedging its task or retrying forever."""
        try:
            result = await self._run(input)
        except BUG_EXCEPTIONS as err:
            await self._finish_after_bug(err)
            raise bug_failure(err) from err
        if self.refused is not None:
            raise refusal_failure(self.refused)
        return result

    async def _finish_after_bug(self, err: BaseException) -> None:
        workflow.logger.error("run %s failed on a bug: %s", self.run_id, bug_message(err))
        if self.finishing_after_bug or self.started is None:
            return
        self.finishing_after_bug = True
        self.state.fail_on_bug(bug_message(err))
        try:
            await self._finish(self.started)
        except BUG_EXCEPTIONS as again:  # the wrap-up itself is what is broken
            workflow.logger.error("run %s could not finish: %s", self.run_id, bug_message(again))

    async def _run(self, input: AgentRunInput) -> AgentResult:
        self._refuse_heavy_input(input)
        # A run continuing as new counts its duration (and its deadline) from its first start.
        started = input.continuation.started_at if input.continuation else workflow.now()
        self.started = started
        # Every patch is asked for here, in the first workflow task: its marker then shares
        # that task's marker batch with prepare_run's (one billed action, not one per patch).
        self.attributes_on_change = self.patched(names.SEARCH_ATTRIBUTES_ON_CHANGE_PATCH)
        self.trivial_debrief_in_run = self.patched(names.TRIVIAL_DEBRIEF_IN_RUN_PATCH)
        self.last_run_in_store = self.patched(names.LAST_RUN_IN_STORE_PATCH)
        named_at_start = workflow.info().typed_search_attributes.get(sa.AGENT_NAME) is not None
        if not (self.attributes_on_change and named_at_start):
            workflow.upsert_search_attributes([sa.AGENT_NAME.value_set(self.agent.agent_id)])
        self.local_store_steps = self.patched(names.LOCAL_STORE_STEPS_PATCH)
        self.honest_endings = self.patched(names.HONEST_ENDINGS_PATCH)
        self.failed_runs_teach = self.patched(names.FAILED_RUNS_TEACH_PATCH)
        # Only runs with a budget or a deadline ask for those patches (and record markers).
        agent = self.agent
        has_budget = agent.token_budget is not None or agent.cost_budget is not None
        self.check_budgets = has_budget and self.patched(names.RUN_BUDGETS_PATCH)
        has_deadline = agent.timeout_seconds is not None and self.patched(names.RUN_DEADLINE_PATCH)
        try:
            await self._loop(input, started, has_deadline)
        # a local activity's failure (record_messages) is the activity's own ApplicationError,
        # not one wrapped in an ActivityError
        except (asyncio.CancelledError, ActivityError, ApplicationError) as err:
            if not (self._stopped_by(err) or self._refused_by_store(err, calls_in_flight=True)):
                raise
        if self.deadline is not None:
            self.deadline.cancel()
        self.state.end_if_operator_answered()
        self.state.end_at_iteration_cap()
        return await self._finish_even_if_cancelled(started)

    def _refuse_heavy_input(self, input: AgentRunInput) -> None:
        """Fail the run as it starts when its input (made by a client by hand: the starters
        refuse it) is past RUN_INPUT_MAX_BYTES: carried into each continue-as-new input and
        its agent's news with what the run adds, it would make them too large for Temporal,
        and the run would stop there for good, silently. Runs from before the payload-budget
        patch took it."""
        if input.continuation is not None:
            return  # its first run took it
        problem = run_input_problem(input)
        if problem is not None and self._budgeted():
            raise ApplicationError(
                f"run refused: {problem}", type=names.RUN_INPUT_TOO_LARGE_ERROR, non_retryable=True
            )

    def _budgeted(self) -> bool:
        """The payload-budget patch: asked only where a payload bound in workflow code changes
        what a run decides or carries (no marker otherwise)."""
        return self.patched(names.PAYLOAD_BUDGET_PATCH)

    async def _loop(self, input: AgentRunInput, started: datetime, has_deadline: bool) -> None:
        """Prepare the run (or take up the state it continued as new with), then take turns
        until something ends it, continuing as new when its history grows long."""
        if input.continuation is not None:
            self.state = RunState.model_validate(input.continuation.state)
            self.marked_tools = list(input.continuation.approval_tools)
            self._decide_approvals()
        elif self.patched(names.FIRST_STEP_SEEDS_PATCH):
            self.unseeded = RunSeed.of(input.task, self.agent)  # the first LLM step seeds
        else:
            prepared: PrepareRunResult = await self._store_step(
                names.PREPARE_RUN,
                PrepareRunInput(
                    run_id=self.run_id, task=input.task, agent=self.agent, started_at=started
                ),
                result_type=PrepareRunResult,
                summary="prepare run",
            )
            self._take_prepared(prepared)
        # Started once `prepare_run` (a local activity) is done, counting from the start: a
        # timer started alongside an in-flight local activity leaves that activity to be
        # re-run after an eviction (SDK warning), which stalled the first workflow task.
        if has_deadline:
            self.deadline = self._start_deadline(started)

        first_iteration = self.state.iteration
        while not self.state.ended and self.state.iteration < self.agent.max_iterations:
            self._publish_details()
            step = await self._llm_step()
            if step is None:  # ended by the operator or the LLM failed for good
                break
            await self._take_turn(step)
            self.state.end_if_operator_answered()
            if self.continues and should_continue_as_new(
                suggested=workflow.info().is_continue_as_new_suggested(),
                iterations_this_run=self.state.iteration - first_iteration,
                every=input.continue_as_new_every or CONTINUE_AS_NEW_EVERY_ITERATIONS,
                ended=self.state.ended or self.state.iteration >= self.agent.max_iterations,
            ):
                await self._continue_as_new(input, started)

    def _take_prepared(self, prepared: PrepareRunResult) -> None:
        """The run's tools and where its transcript goes on, as its seed resolved them."""
        self.state.tool_names = prepared.tool_names
        self.state.tool_timeouts = prepared.tool_timeouts
        self.state.seq = prepared.next_seq
        self.marked_tools = prepared.approval_tools
        self._decide_approvals()

    def _decide_approvals(self) -> None:
        if self.agent.approve_tools or self.marked_tools:
            self.approvals_on = self.patched(names.TOOL_APPROVALS_PATCH)
            self.approval_events = self.approvals_on and self.patched(names.APPROVAL_EVENTS_PATCH)

    async def _continue_as_new(self, input: AgentRunInput, started: datetime) -> NoReturn:
        """Hand the run to a fresh Temporal run: same workflow id, its state compacted."""
        await workflow.wait_condition(workflow.all_handlers_finished)
        carried = input.continuation.continued if input.continuation else 0
        workflow.continue_as_new(
            input.model_copy(
                update={
                    "continuation": RunContinuation(
                        state=self.state.compacted().model_dump(mode="json"),
                        started_at=started,
                        continued=carried + 1,
                        approval_tools=self.marked_tools,
                    )
                }
            )
        )

    async def _take_turn(self, step: LlmStepResult) -> None:
        """Account for the model's reply, then act on it: end the run, nudge, or run tools."""
        self.state.account_for(step)
        self.reply_cut_off = step.finish_reason == "length"
        cut_short = (
            step.finish_reason in CUT_SHORT
            and not step.tool_calls
            and self.patched(names.CUT_SHORT_REPLIES_PATCH)  # asked only when it matters
        )
        decision = decide_turn(
            step.content,
            step.tool_calls,
            task=self.input.task,
            tools_used=self.state.tools_used,
            available_tools=self.state.tool_names,
            gap_check_done=self.state.gap_check_done,
            anchored_marker=self.anchored_marker,
            required_tools=self._required_tools(),
            finish_reason=step.finish_reason if cut_short else None,
            bare_marker_nudged=lambda: self.patched(names.BARE_MARKER_PATCH),
            unread_calls=(
                step.unread_calls
                and not step.tool_calls
                and not cut_short
                and self.patched(names.UNREAD_TEXT_CALLS_PATCH)  # asked only when it matters
            ),
        )
        if not isinstance(decision, Ending):
            decision = self._over_budget() or decision
        if self.stop_after_reply and not isinstance(decision, Ending):
            decision = self._stop_ending() or decision  # the stop, held over for the reply
        if isinstance(decision, Ending):
            self.state.end(decision)
        elif isinstance(decision, Nudge):
            self.state.note_nudge(
                is_error=decision.is_error, gap_check_rejected=decision.gap_check_rejected
            )
            await self._record([Message(role="user", content=decision.note)])
        elif isinstance(decision, Act):
            await self._act(decision)
        self.state.complete_turn(ran_tools=isinstance(decision, Act))
        if not self.attributes_on_change:  # runs started before: one upsert per iteration
            workflow.upsert_search_attributes(self._progress_attributes())

    @workflow.signal(name=names.FINAL_ANSWER_SIGNAL)
    def final_answer(self, answer: FinalAnswerCapture) -> None:
        """An operator ends the run with this answer (same payload as the tool); a malformed
        one is ignored, with the reason in the worker's log."""
        if self.check_operator_answer:
            problem = operator_answer_problem(answer, bytes_checked=self._budgeted)
        else:
            problem = validate_output(answer.output, answer.format)
        if problem is not None:
            workflow.logger.warning("final_answer signal ignored: %s", problem)
            return
        # Its summary and confidence travel in the result, the debrief and its markdown:
        # unclipped, a long one made a result over 2 MB, a workflow task that failed forever.
        # Clipping changes no command, so runs that took a long one replay the same.
        bounded = bound_answer(answer)
        if answer_over_budget(bounded) and self._budgeted():  # its confidence, shorter still
            bounded = bound_answer(answer, confidence_max_chars=CONFIDENCE_MAX_CHARS)
        self.state.operator_answer = bounded

    @workflow.query(name=names.PROGRESS_QUERY)
    def progress(self) -> RunProgress:
        """The run's live state: iteration, tools so far, tokens, last observation, and the
        step it keeps retrying that only this worker knows of (a local activity's attempts:
        `reactive_temporal.local_retries`; the LLM step waited out through a Postgres outage)."""
        progress = self.state.progress(self.run_id, self.agent)
        progress.retrying = local_retries.retrying(workflow.info().run_id) or self.store_outage
        return progress

    # -- transcript -----------------------------------------------------------------------

    async def _record(self, messages: list[Message]) -> None:
        first = self.state.claim_seqs(len(messages))
        await self._record_at(
            [SeqMessage(seq=first + i, message=m) for i, m in enumerate(messages)]
        )

    async def _record_at(self, entries: list[SeqMessage]) -> None:
        await self._store_step(
            names.RECORD_MESSAGES,
            RecordMessagesInput(run_id=self.run_id, messages=entries),
            summary="record observation",
        )

    async def _store_step(
        self, name: str, arg: object, *, summary: str, result_type: type | None = None
    ) -> Any:
        """A short Postgres write. New runs make it a local activity (no task-queue round trip:
        6–14 ms less per call, bench/overhead.py); runs started before that change replay as
        the full activities they recorded."""
        execute = (
            workflow.execute_local_activity if self.local_store_steps else workflow.execute_activity
        )
        return await execute(name, arg, result_type=result_type, **STORE, summary=summary)
