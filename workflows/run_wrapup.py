"""How a run ends: its result, its debrief kept, its agent told, its search attributes set.

A mixin of AgentRunWorkflow, kept apart so the run loop in workflows/agent_run.py stays a
loop. A trivial run keeps its deterministic debrief in its own wrap-up (one local activity
that also tells the agent); any other starts an abandoned DebriefWorkflow child to
synthesize the rich one, so the run never waits for it. The agent is told by keeping the run
as its last run in Postgres, which the agent reads when chat needs it: no signal per run.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from reactive_temporal import search_attributes as sa
    from reactive_temporal.contracts import names
    from reactive_temporal.contracts.debrief import (
        DebriefInput,
        DebriefWorkflowInput,
        PersistDebriefInput,
    )
    from reactive_temporal.contracts.entity import NotifyAgentInput, RunFinished
    from reactive_temporal.contracts.result import AgentResult
    from reactive_temporal.contracts.run import AgentConfig, AgentRunInput
    from reactive_temporal.ui_text import literal
    from workflows.activity_options import AGENT_SIGNAL
    from workflows.agent_debrief import DebriefWorkflow
    from workflows.debrief_rules import (
        build_fallback,
        collect_debrief_input,
        derive_outcome,
        ending_cause,
        is_trivial,
    )
    from workflows.final_answer import missing_required_tools
    from workflows.run_metrics import count_approvals_decided, count_run_ended
    from workflows.run_state import RunState
    from workflows.store_refusals import store_refusal, wrap_up_refused


class RunWrapUp:
    """The end of AgentRunWorkflow (which provides the state and patch flags declared here)."""

    input: AgentRunInput
    agent: AgentConfig
    run_id: str
    state: RunState
    trivial_debrief_in_run: bool
    """A trivial run keeps its debrief itself (the costs patch)."""
    last_run_in_store: bool
    """The agent is told through Postgres, not with a signal."""
    failed_runs_teach: bool
    attributes_on_change: bool
    calls_abandoned: bool
    """Calls were left in flight: the wrap-up tells every worker to stop them."""
    refused: str | None
    """Why Postgres refused the run's data for good; the workflow fails with it."""

    async def _finish(self, started: datetime) -> AgentResult:
        """The result, its debrief kept (in the run's wrap-up when there is nothing to
        synthesize, else by a DebriefWorkflow child), the agent told, the search attributes
        set. When Postgres refuses what the wrap-up keeps, the rest still happens and the run
        returns its result (workflows/store_refusals.py)."""
        self.state.current_tool = None
        abandoned = self._abandon_approvals()
        result = self.state.result(
            self.run_id,
            self.agent,
            duration_ms=int((workflow.now() - started).total_seconds() * 1000),
        )
        self._publish_details(result.terminated_by)
        debrief_input: DebriefInput | None = None
        if self.agent.memory:
            debrief_input = self._debrief_input(result)
            result.debrief = build_fallback(debrief_input)
        kept_here = (
            self.trivial_debrief_in_run
            and debrief_input is not None
            and result.debrief is not None
            and is_trivial(debrief_input, failed_runs_teach=self.failed_runs_teach)
        )
        kept_for_reset = False
        try:
            kept_for_reset = await self._notify_agent(
                started, result, debrief_input, kept_here=kept_here
            )
        except (ActivityError, ApplicationError) as err:  # a local activity's: its own error
            if (refusal := store_refusal(err)) is None:
                raise
            # the ending and its answer stand (the caller gets them); the debrief gets a try
            # of its own, in a child that fails visibly if it is refused too
            workflow.logger.error(
                "run %s: %s", self.run_id, wrap_up_refused(result.terminated_by, refusal)
            )
            kept_here = False
        if debrief_input is not None and result.debrief is not None and not kept_here:
            await self._start_debrief(debrief_input)
        outcome = (
            result.debrief.outcome
            if result.debrief
            else derive_outcome(result.terminated_by, self.state.loop_errors())
        )
        debrief_status = "none"
        if result.debrief is not None:
            # kept by the wrap-up, or by its notify for a reset run whose old timeline's
            # debrief holds the id: no debrief of its own follows to say otherwise
            debrief_status = "deterministic" if kept_here or kept_for_reset else "pending"
        attributes = [
            sa.TERMINATED_BY.value_set(result.terminated_by),
            sa.OUTCOME.value_set(outcome),
            sa.DEBRIEF_STATUS.value_set(debrief_status),
        ]
        if self.attributes_on_change:
            attributes += self._progress_attributes()
        if abandoned:
            attributes.append(sa.WAITING_FOR.value_unset())
        workflow.upsert_search_attributes(attributes)
        count_run_ended(self.agent.agent_id, result.terminated_by, debrief_kept=kept_here)
        return result

    def _abandon_approvals(self) -> bool:
        """Let go of calls still parked as the run ends; whether there were any.

        A run stopped (a cancel, its deadline) while it announced the calls it parks, before
        its wait for them began, ended with them still pending: its closed execution kept
        WaitingFor = 'approval', its `progress` said it waited for them, and they were never
        counted as abandoned. The wait clears them itself otherwise. Changes what the final
        upsert holds, not which commands the run makes: runs that ended so replay alike.
        """
        pending = self.state.pending_approvals
        if not pending:
            return False
        count_approvals_decided(
            self.agent.agent_id,
            self.state.iteration,
            [(p.call_id, p.tool) for p in pending],
            "abandoned",
        )
        self.state.pending_approvals = []
        return True

    async def _notify_agent(
        self,
        started: datetime,
        result: AgentResult,
        debrief_input: DebriefInput | None,
        *,
        kept_here: bool,
    ) -> bool:
        """Keep the debrief (when the run keeps its own) and tell the agent, in one local
        activity; a `StoreDataError` when Postgres refuses what it keeps.

        Whether the activity kept the debrief because it found the debrief's id held by an
        earlier timeline's (`debrief_if_taken`, a reset run): its result, recorded in the
        local activity's marker, so the final upsert says `deterministic` rather than a
        `pending` no debrief will ever settle. Which commands the run makes is unchanged (the
        result only changes what the last upsert holds): runs that ended before, whose
        markers hold no result, replay alike and read False.
        """
        kept = await workflow.execute_local_activity(
            names.NOTIFY_AGENT,
            NotifyAgentInput(
                agent=self.agent,
                signal=names.RUN_FINISHED_SIGNAL,
                run_finished=RunFinished(
                    run_id=self.run_id,
                    started_at=started,
                    agent=self.agent,
                    debrief=result.debrief,
                    observations=self.state.observations,
                ),
                persist=(
                    PersistDebriefInput(input=debrief_input, debrief=result.debrief)
                    if kept_here and debrief_input is not None and result.debrief is not None
                    else None
                ),
                keep_last_run=self.last_run_in_store,
                calls_in_flight=self.calls_abandoned,
                debrief_if_taken=(
                    PersistDebriefInput(input=debrief_input, debrief=result.debrief)
                    if not kept_here
                    and debrief_input is not None
                    and result.debrief is not None
                    and not_its_first_execution()
                    else None
                ),
                earlier_timeline=kept_here and not_its_first_execution(),
            ),
            **AGENT_SIGNAL,
            summary="keep the debrief, tell the agent"
            if kept_here
            else "tell the agent the run finished",
        )
        return not kept_here and kept is True

    def _progress_attributes(self) -> list[Any]:
        return [
            sa.ITERATIONS.value_set(self.state.iteration),
            sa.TOKENS_USED.value_set(self.state.tokens),
        ]

    async def _start_debrief(self, debrief_input: DebriefInput) -> None:
        """The rich debrief, in an abandoned child the run does not wait for; the child builds
        the deterministic debrief it starts from out of the same input, as the run did.
        Replay does not compare a child's input, so runs that passed it replay either way."""
        try:
            await workflow.start_child_workflow(
                DebriefWorkflow.run,
                DebriefWorkflowInput(
                    input=debrief_input,
                    synthesize=not is_trivial(
                        debrief_input, failed_runs_teach=self.failed_runs_teach
                    ),
                    model=self.agent.debrief_model or self.agent.model,
                    llm_timeout_seconds=self.agent.llm_timeout_seconds,
                    agent_workflow_id=self._debrief_signal_to(),
                    reasoning_effort=self.agent.reasoning_effort,
                ),
                id=names.debrief_workflow_id(self.run_id),
                parent_close_policy=ParentClosePolicy.ABANDON,
                static_summary=f"debrief of {self.run_id}",
            )
        except WorkflowAlreadyStartedError:
            workflow.logger.info("debrief of %s already started (a reset run)", self.run_id)

    def _debrief_signal_to(self) -> str | None:
        """The agent the debrief child signals with the rich debrief: none once runs keep
        themselves in the store, where the child's `persist_debrief` upgrades the agent's last
        run (a signal would only add an action, the debrief twice more in histories, and a
        workflow task on the agent). Replay does not compare a child's input, so runs from
        before that change replay either way."""
        if self.last_run_in_store:
            return None
        return names.agent_workflow_id(self.agent.agent_id)

    def _debrief_input(self, result: AgentResult) -> DebriefInput:
        """What the debrief is made from; a failed run's cause joins its errors."""
        cause = None
        if self.failed_runs_teach:
            missing = missing_required_tools(self.agent.required_tools, self.state.tools_used)
            cause = ending_cause(
                result, max_iterations=self.agent.max_iterations, missing_required=missing
            )
        return collect_debrief_input(
            result,
            self.input.task,
            self.state.tool_calls,
            self.state.rationale,
            self.state.approvals,
            cause=cause,
            earlier_stats=self.state.earlier_tool_stats,
            earlier_errors=self.state.earlier_errors,
        )

    def _publish_details(self, terminated_by: str | None = None) -> None:
        tokens = tokens_label(self.state.tokens)
        status = f"ended: {terminated_by}" if terminated_by else "running"
        waiting = self.state.pending_approvals
        if waiting and not terminated_by:
            calls = ", ".join(f"{literal(p.tool)} (call {literal(p.call_id)})" for p in waiting[:5])
            status = f"waiting for approval: {calls}"
        tools_used = self.state.tools_used
        workflow.set_current_details(
            f"**{status}** · iteration {self.state.iteration}/{self.agent.max_iterations} · "
            f"last tool: {literal(tools_used[-1]) if tools_used else '—'} · {tokens} tokens"
        )


def not_its_first_execution() -> bool:
    """The run's execution is not the one it started as: reset since (or continued as new),
    so an earlier timeline's debrief may hold the debrief's id. Runs as they started pay no
    look-up for that in their wrap-up."""
    info = workflow.info()
    return info.run_id != info.first_execution_run_id


def tokens_label(n: int) -> str:
    """A token count as the Web UI shows it: 1234 → 1.2k."""
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)
