"""What an operator or a limit does to a running run: cancel it, stop it at its deadline or
budget, and park its tool calls until a person approves or denies them.

A mixin of AgentRunWorkflow, kept apart so the run loop in workflows/agent_run.py stays a
loop; every decision here is a pure rule (workflows/stop_rules.py, approval_rules.py).

- A cancel request and the deadline both interrupt the loop where it awaits (an LLM call,
  tools, an approval): the loop's caller catches that and ends the run gracefully with
  `cancelled` or `timeout` (`_stopped_by`), and the finish runs even if a cancel arrives
  meanwhile (`_finish_even_if_cancelled`). Budgets are checked after each LLM step.
- Tool calls that need approval wait in `RunState.pending_approvals` with no activity
  running until the validated `decide_tool_calls` update (or the approval timeout) decides.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from reactive_temporal import search_attributes as sa
    from reactive_temporal.contracts import names
    from reactive_temporal.contracts.approvals import ApprovalDecision, ApprovalOutcome
    from reactive_temporal.contracts.events import NewEvent, RecordRunEventsInput, once_key
    from reactive_temporal.contracts.result import AgentResult
    from reactive_temporal.contracts.run import AgentConfig, Message, SeqMessage, ToolCall
    from workflows.activity_options import STORE
    from workflows.approval_rules import (
        apply_decision,
        approval_event_data,
        approval_id,
        decision_problem,
        denial_observation,
        free_id,
        needs_approval,
        pending_approval,
        timed_out,
    )
    from workflows.run_metrics import count_approvals_asked, count_approvals_decided
    from workflows.run_state import RunState
    from workflows.stop_rules import budget_ending, cancel_ending, timeout_ending
    from workflows.turns import Ending


class RunControls:
    """Cancel, deadline, budgets and approvals for AgentRunWorkflow (which provides the
    state, the agent and the transcript writes declared here)."""

    state: RunState
    agent: AgentConfig
    run_id: str
    marked_tools: list[str]
    """The run's tools marked `@tool(approve=True)` (from `prepare_run`)."""
    approval_events: bool
    """Approvals go to the live output (the `approval-events` patch)."""
    check_budgets: bool
    deadline_hit: bool
    in_llm_call: bool
    calls_abandoned: bool
    covered_patches: frozenset[str]
    """The patches the run's bundle stands for (`AgentRunWorkflow._patch_bundle`): on, unasked."""

    def patched(self, patch_id: str) -> bool:
        """`workflow.patched(patch_id)`, unless the run was started with a patch bundle that
        covers the patch: then True without asking (no marker, no TemporalChangeVersion
        upsert of its own). A later patch is always asked."""
        if patch_id in self.covered_patches:
            return True
        return workflow.patched(patch_id)

    async def _record_at(self, entries: list[SeqMessage]) -> None:
        raise NotImplementedError

    async def _finish(self, started: datetime) -> AgentResult:
        raise NotImplementedError

    def _publish_details(self, terminated_by: str | None = None) -> None:
        raise NotImplementedError

    # -- stopping early: cancel requests, the deadline, budgets ---------------------------

    def _start_deadline(self, started: datetime) -> asyncio.Task[None]:
        """A durable timer for `timeout_seconds` from the start that interrupts the loop when
        it fires (cancelling the LLM call or tools in flight)."""
        timeout = self.agent.timeout_seconds or 0
        loop_task = asyncio.current_task()
        remaining = timeout - (workflow.now() - started).total_seconds()

        async def deadline() -> None:
            await workflow.sleep(timedelta(seconds=max(remaining, 0)), summary="run deadline")
            self.deadline_hit = True
            if loop_task is not None:
                loop_task.cancel()

        return asyncio.create_task(deadline())

    def _stopping(self) -> bool:
        """A cancel was requested or the deadline fired: a cancelled step is not a failure."""
        return self.deadline_hit or workflow.cancellation_reason() is not None

    def _stopped_by(self, err: BaseException) -> bool:
        """The loop was interrupted by a cancel request or the deadline: end the run with
        the matching ending and go on to finish it. False when the exception is not such an
        interruption, or when the run predates graceful cancels (it then ends cancelled)."""
        if not is_cancelled_exception(err):
            return False
        state = self.state
        ending = self._stop_ending()
        if ending is None:
            return False
        state.end(ending)
        self.calls_abandoned = True  # whatever was in flight (a model call, tools) was cancelled
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()  # the interruption is handled: later awaits must not re-raise it
        return True

    def _stop_ending(self) -> Ending | None:
        """The ending of a stop: `timeout` once the deadline fired, `cancelled` on a cancel
        request; None when neither (or the run predates graceful cancels)."""
        state = self.state
        if self.deadline_hit:
            doing = f"tool {state.current_tool}" if state.current_tool else None
            doing = "an LLM call" if self.in_llm_call else doing
            return timeout_ending(
                self.agent.timeout_seconds or 0, last_text=state.last_text, doing=doing
            )
        if workflow.cancellation_reason() is not None and self.patched(names.GRACEFUL_CANCEL_PATCH):
            return cancel_ending(workflow.cancellation_reason(), last_text=state.last_text)
        return None

    async def _finish_even_if_cancelled(self, started: datetime) -> AgentResult:
        """`_finish`, which a cancel request arriving meanwhile does not interrupt: the
        ending is decided, so the result, the agent and the debrief must all happen."""
        finishing = asyncio.create_task(self._finish(started))
        try:
            return await asyncio.shield(finishing)
        except asyncio.CancelledError:
            if workflow.cancellation_reason() is None or not self.patched(
                names.GRACEFUL_CANCEL_PATCH
            ):
                raise
            return await finishing

    def _over_budget(self) -> Ending | None:
        """The `budget_exceeded` ending when a token or cost budget is spent (checked after
        every LLM step; a turn that ends the run anyway ends it as it would have)."""
        if not self.check_budgets:
            return None
        state = self.state
        return budget_ending(
            self.agent, tokens=state.tokens, cost=state.cost, last_text=state.last_text
        )

    # -- approval of tool calls --------------------------------------------------------------

    async def _approval_events(self, events: list[tuple[int, dict[str, object]]]) -> None:
        """Approvals asked and decided, into the run's live output (runs since the patch).

        A regular activity, not a local one (runs since `approval-events-as-activity`): a
        local activity right before the run blocks on its approvals met a bug of the SDK's
        core when a query replayed the run meanwhile (~1 parked run in 15, every query a
        replay): the query failed on a patch marker asked after it, or the worker's core
        wedged on the run ("LA marker handling in invalid state"), the run hanging there."""
        if not (self.approval_events and self.agent.live_output and events):
            return
        execute = (
            workflow.execute_activity
            if self.patched(names.APPROVAL_EVENTS_ACTIVITY_PATCH)
            else workflow.execute_local_activity
        )
        await execute(
            names.RECORD_RUN_EVENTS,
            RecordRunEventsInput(
                run_id=self.run_id,
                events=[
                    NewEvent(
                        type="approval",
                        step=seq,
                        data=data,
                        key=once_key(f"approval-{data['status']}", seq, workflow.info().run_id),
                    )
                    for seq, data in events
                ],
            ),
            **STORE,
            summary="approvals into the live output",
        )

    @workflow.update(name=names.DECIDE_TOOL_CALLS_UPDATE)
    def decide_tool_calls(self, decision: ApprovalDecision) -> ApprovalOutcome:
        """Approve or deny tool calls waiting for approval (all of them when no call id is
        given); the run goes on once none is left waiting."""
        state = self.state
        state.pending_approvals, records = apply_decision(
            decision, state.pending_approvals, now=workflow.now()
        )
        state.approvals += records
        count_approvals_decided(
            self.agent.agent_id,
            state.iteration,
            [(r.call_id, r.tool) for r in records],
            "approved" if decision.approve else "denied",
        )
        return ApprovalOutcome(decided=records)

    @decide_tool_calls.validator
    def _validate_decision(self, decision: ApprovalDecision) -> None:
        """Refuse, leaving no trace in history, a decision naming an unknown or already
        decided call, a denial without a reason, or one for a run not waiting."""
        problem = decision_problem(decision, self.state.pending_approvals, self.state.approvals)
        if problem is not None:
            raise ValueError(problem)

    async def _await_approvals(
        self, calls: list[tuple[int, ToolCall]]
    ) -> list[tuple[int, ToolCall]]:
        """Park the calls that need a person's approval until each is decided (by the
        `decide_tool_calls` update, or denied by the approval timeout); no activity runs
        meanwhile, so the wait holds no worker slot and survives worker restarts. Denied
        calls get their denial as their observation; returns the calls that may run."""
        state = self.state
        asking = [
            (seq, call)
            for seq, call in calls
            if needs_approval(
                call.name, self.agent.approve_tools, self.marked_tools, state.tool_names
            )
        ]
        if not asking:
            return calls
        keys: dict[int, str] = {}
        for seq, call in asking:
            taken = [*keys.values(), *(r.call_id for r in state.approvals)]
            key = approval_id(call, seq, taken)
            # asked only when it matters: runs from before took the taken id
            if key in taken and self.patched(names.UNIQUE_APPROVAL_IDS_PATCH):
                key = free_id(key, taken)
            keys[seq] = key
            state.pending_approvals.append(
                pending_approval(
                    call, keys[seq], since=workflow.now(), iteration=state.iteration + 1
                )
            )
        workflow.upsert_search_attributes([sa.WAITING_FOR.value_set("approval")])
        count_approvals_asked(
            self.agent.agent_id, state.iteration, [(keys[seq], call.name) for seq, call in asking]
        )
        self._publish_details()
        asked = {keys[seq]: seq for seq, _ in asking}
        await self._approval_events(
            [(asked[p.call_id], approval_event_data(p)) for p in state.pending_approvals]
        )
        timeout = self.agent.approval_timeout_seconds
        # an operator's answer ends the wait (the run ends with it; what waits never runs)
        answer_ends = self.patched(names.ANSWER_ENDS_APPROVAL_WAIT_PATCH)
        try:
            await workflow.wait_condition(
                lambda: (
                    not state.pending_approvals
                    or (answer_ends and state.operator_answer is not None)
                ),
                timeout=timedelta(seconds=timeout),
                timeout_summary="approval timeout",
            )
        except TimeoutError:
            expired = timed_out(
                state.pending_approvals, now=workflow.now(), timeout_seconds=timeout
            )
            state.approvals += expired
            state.pending_approvals = []
            count_approvals_decided(
                self.agent.agent_id,
                state.iteration,
                [(r.call_id, r.tool) for r in expired],
                "timed_out",
            )
        finally:
            # still pending: the run stopped waiting (an operator's answer, a cancel, its deadline)
            if state.pending_approvals:
                waiting = [(p.call_id, p.tool) for p in state.pending_approvals]
                count_approvals_decided(self.agent.agent_id, state.iteration, waiting, "abandoned")
            state.pending_approvals = []
            workflow.upsert_search_attributes([sa.WAITING_FOR.value_unset()])
        if answer_ends and state.operator_answer is not None:
            return []
        decided = {r.call_id: r for r in state.approvals}
        await self._approval_events(
            [
                (seq, approval_event_data(decided[key]))
                for key, seq in asked.items()
                if key in decided
            ]
        )
        denied = {
            seq: decided[keys[seq]]
            for seq, _ in asking
            if keys[seq] in decided and decided[keys[seq]].decision == "denied"
        }
        if denied:
            await self._record_at(
                [
                    SeqMessage(seq=seq, message=tool_message(call, denial_observation(denied[seq])))
                    for seq, call in asking
                    if seq in denied
                ]
            )
            state.last_observation = denial_observation(next(iter(denied.values())))
        return [(seq, call) for seq, call in calls if seq not in denied]


def tool_message(call: ToolCall, content: str) -> Message:
    """A tool call's observation as a transcript message."""
    return Message(role="tool", content=content, tool_call_id=call.id, name=call.name)
