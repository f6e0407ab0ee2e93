"""How a run takes one LLM step: the activity, an operator's answer cutting it short, and a
Postgres outage or refusal under it.

A mixin of AgentRunWorkflow, kept apart so the run loop in workflows/agent_run.py stays a
loop. A step that failed only because Postgres stayed down is waited out and taken again (an
outage delays a run, it does not end it as an LLM error), and the `progress` query says so
meanwhile (`store_outage`); one whose data Postgres refuses for good ends the run as `error`
(workflows/store_refusals.py).
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from reactive_temporal.contracts import names
    from reactive_temporal.contracts.llm_payloads import LlmStepInput, LlmStepResult
    from reactive_temporal.contracts.retrying import LAST_FAILURE_CHARS, RetryingStep
    from reactive_temporal.contracts.run import AgentConfig, PrepareRunResult, RunSeed
    from reactive_temporal.sanitize import one_line
    from workflows.activity_options import llm_options
    from workflows.run_limits import STORE_OUTAGE_WAIT_SECONDS, is_store_outage
    from workflows.run_state import RunState
    from workflows.run_tools import failure_billed, failure_message, failure_type
    from workflows.run_wrapup import tokens_label
    from workflows.store_refusals import run_refused, store_refusal


class StoreOutage:
    """What an LLM attempt returns when Postgres, not the LLM, made it fail."""

    def __init__(self, message: str, since: datetime) -> None:
        self.message = message
        self.since = since
        """When the step that gave up was scheduled."""


class RunLlmStep:
    """The LLM step of AgentRunWorkflow's turns (which provides the state, the patch flags and
    what a step's seed resolved, declared here)."""

    agent: AgentConfig
    run_id: str
    state: RunState
    unseeded: RunSeed | None
    in_llm_call: bool
    calls_abandoned: bool
    refused: str | None
    """Why Postgres refused the run's data for good: the run ends as `error`, then its
    workflow fails with this (workflows/store_refusals.py)."""
    store_outage: RetryingStep | None
    """The LLM step given up on Postgres and waited out, until one lands (the `progress`
    query's `retrying`; no command depends on it)."""
    stop_after_reply: bool
    """A stop came with the step's reply already in: the turn ends the run."""

    def patched(self, patch_id: str) -> bool:
        raise NotImplementedError

    def _take_prepared(self, prepared: PrepareRunResult) -> None:
        raise NotImplementedError

    async def _llm_step(self) -> LlmStepResult | None:
        """The model's next reply; None when the operator ended the run or the LLM failed.
        A step that failed only because Postgres stayed down is waited out and taken again:
        an outage delays a run, it does not end it as an LLM error."""
        while True:
            step = await self._llm_attempt()
            if not isinstance(step, StoreOutage):
                self.store_outage = None
                return step
            self.store_outage = RetryingStep(
                step=names.LLM_STEP,
                summary="Postgres unreachable: waiting to take the LLM step again",
                attempt=self.store_outage.attempt + 1 if self.store_outage else 2,
                since=self.store_outage.since if self.store_outage else step.since,
                last_failure=one_line(step.message, LAST_FAILURE_CHARS),
            )
            await workflow.sleep(
                timedelta(seconds=STORE_OUTAGE_WAIT_SECONDS),
                summary="Postgres unreachable: waiting to take the LLM step again",
            )

    async def _llm_attempt(self) -> LlmStepResult | StoreOutage | None:
        state = self.state
        state.current_tool = None
        scheduled_at = workflow.now()
        handle = workflow.start_activity(
            names.LLM_STEP,
            LlmStepInput(
                run_id=self.run_id,
                seq=state.seq,
                iteration=state.iteration,
                model=self.agent.model,
                tool_names=state.visible_tools(self.agent),
                temperature=self.agent.temperature,
                audit_rationale=self.agent.audit_rationale,
                max_attempts=self.agent.llm_max_attempts,
                reasoning_effort=self.agent.reasoning_effort,
                stream=self.agent.live_output,
                cost_budget=self.agent.cost_budget is not None,
                seed=self.unseeded,
            ),
            result_type=LlmStepResult,
            **llm_options(self.agent.llm_timeout_seconds, self.agent.llm_max_attempts),
            summary=f"llm · iteration {state.iteration + 1} · {tokens_label(state.tokens)} tokens "
            "so far",
        )
        self.in_llm_call = True
        try:
            await workflow.wait_condition(
                lambda: handle.done() or state.operator_answer is not None
            )
        except asyncio.CancelledError:
            if not self._reply_came_before_stop(handle):
                handle.cancel()  # a cancel request or the deadline: the wrap-up stops the call
                raise
        self.in_llm_call = False
        if not handle.done():
            handle.cancel()  # the operator answered
            self.calls_abandoned = True
        try:
            step = await handle
        except ActivityError as err:
            if self.unseeded is not None and failure_type(err) == "UnknownToolError":
                raise  # the run names tools the worker lacks: refused, as prepare_run did
            billed = failure_billed(err)  # spent, though no reply of it goes on
            if state.operator_answer is not None or self._refused_by_store(err):
                state.account_for_billed(billed)
                return None
            if is_store_outage(err) and self.patched(names.STORE_OUTAGE_WAITS_PATCH):
                workflow.logger.warning("LLM step waits for Postgres: %s", failure_message(err))
                return StoreOutage(failure_message(err), scheduled_at)
            state.account_for_billed(billed)
            state.fail(failure_message(err))
            return None
        except asyncio.CancelledError:
            return None
        if step.prepared is not None:
            self.unseeded = None
            self._take_prepared(step.prepared)
        return step

    def _reply_came_before_stop(self, handle: workflow.ActivityHandle[LlmStepResult]) -> bool:
        """Whether the step's reply was in when the stop interrupted the wait for it (one
        activation held both): then the stop is held over (`stop_after_reply`) and the turn
        decides on the reply (the reply-before-stop patch, asked only then)."""
        if not handle.done() or handle.cancelled() or handle.exception() is not None:
            return False
        if not self.patched(names.REPLY_BEFORE_STOP_PATCH):
            return False
        self.stop_after_reply = True
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()  # held over: the turn ends the run, with its answer or the stop
        return True

    def _refused_by_store(self, err: BaseException, *, calls_in_flight: bool = False) -> bool:
        """Postgres refused the run's data for good (a `StoreDataError`): the run ends as
        `error` saying so, and goes on to its wrap-up. False for any other failure.
        `calls_in_flight`: the loop was interrupted where tool calls may still run (the
        wrap-up stops them)."""
        refusal = store_refusal(err)
        if refusal is None:
            return False
        message = run_refused(refusal)
        workflow.logger.error("run %s: %s", self.run_id, message)
        self.refused = self.refused or message
        self.state.refused_by_store(message)
        self.calls_abandoned = self.calls_abandoned or calls_in_flight
        return True
