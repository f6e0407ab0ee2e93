"""DebriefWorkflow: the rich debrief of one run, written off the run's critical path.

The run starts it as an abandoned child and returns at once with the deterministic debrief.
Here, durably: synthesize (one LLM call, skipped for trivial runs) → merge over the
deterministic facts → persist the `agent_debriefs` row and the lessons → tell the agent.
A synthesis that was billed but gave no rich debrief (prose, or replies that could not be
read until its attempts ran out) leaves the deterministic debrief with the call's bill.
A worker crash anywhere in between resumes where it stopped; nothing is written twice. A
debrief Postgres refuses for good fails the workflow, saying why (workflows/store_refusals.py).
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from reactive_temporal import search_attributes as sa
    from reactive_temporal.contracts import names
    from reactive_temporal.contracts.debrief import (
        AgentDebrief,
        DebriefWorkflowInput,
        SynthesisRequest,
        SynthesisResult,
    )
    from reactive_temporal.contracts.entity import DebriefReady
    from workflows.activity_options import STORE, llm_options
    from workflows.bugs import BUG_EXCEPTIONS
    from workflows.debrief_rules import (
        billed_synthesis,
        build_fallback,
        merge_synthesis,
        persist_input,
        unusable_but_billed,
        with_synthesis_bill,
    )
    from workflows.run_metrics import count_debrief_persisted
    from workflows.run_tools import failure_billed
    from workflows.store_refusals import refusal_failure, store_refusal

SYNTHESIS_ATTEMPTS = 3


@workflow.defn(name=names.DEBRIEF_WORKFLOW, failure_exception_types=BUG_EXCEPTIONS)
class DebriefWorkflow:
    @workflow.run
    async def run(self, input: DebriefWorkflowInput) -> AgentDebrief:
        fallback = input.fallback or build_fallback(input.input)
        debrief = fallback
        workflow.upsert_search_attributes(
            [
                sa.AGENT_NAME.value_set(input.input.agent_id),
                sa.DEBRIEF_STATUS.value_set("synthesizing" if input.synthesize else "trivial"),
            ]
        )
        if input.synthesize:
            workflow.set_current_details("synthesizing the debrief")
            try:
                result: SynthesisResult = await workflow.execute_activity(
                    names.SYNTHESIZE_DEBRIEF,
                    SynthesisRequest(
                        input=input.input,
                        model=input.model,
                        max_attempts=SYNTHESIS_ATTEMPTS,
                        reasoning_effort=input.reasoning_effort,
                    ),
                    result_type=SynthesisResult,
                    **llm_options(input.llm_timeout_seconds, SYNTHESIS_ATTEMPTS),
                    summary=f"debrief synthesis · {input.model}",
                )
                if unusable_but_billed(result) and not self._bill_kept():
                    debrief = fallback  # a debrief from before the patch: its bill was dropped
                else:
                    debrief = merge_synthesis(input.input, fallback, result)
            except ActivityError as err:
                workflow.logger.warning("debrief synthesis failed, keeping the fallback: %s", err)
                billed = billed_synthesis(failure_billed(err))  # replies paid for, unusable
                if billed is not None and self._bill_kept():
                    debrief = with_synthesis_bill(fallback, billed)
        workflow.set_current_details("persisting the debrief")
        try:
            await workflow.execute_activity(
                names.PERSIST_DEBRIEF,
                persist_input(input.input, debrief),
                **STORE,  # Postgres may be down for a while: keep trying, nothing is lost
                summary="persist debrief and lessons",
            )
        except ActivityError as err:
            if (refusal := store_refusal(err)) is None:
                raise
            raise refusal_failure(
                f"the debrief of run {input.input.run_id} was not kept: {refusal}"
            ) from err
        count_debrief_persisted(debrief.synthesized)
        if input.agent_workflow_id:
            try:
                await workflow.get_external_workflow_handle(input.agent_workflow_id).signal(
                    names.DEBRIEF_READY_SIGNAL,
                    DebriefReady(run_id=input.input.run_id, debrief=debrief),
                )
            except Exception as err:  # no agent entity (yet): nothing is waiting for it
                workflow.logger.info("agent not told of the debrief: %s", err)
        status = "synthesized" if debrief.synthesized else "deterministic"
        workflow.upsert_search_attributes(
            [sa.DEBRIEF_STATUS.value_set(status), sa.OUTCOME.value_set(debrief.outcome)]
        )
        workflow.set_current_details(f"done · {debrief.outcome} · {status}")
        return debrief

    @staticmethod
    def _bill_kept() -> bool:
        """Whether a synthesis billed for no rich debrief keeps its bill in the fallback
        (`synthesis-bill-kept`): asked only then, so other debriefs record no marker."""
        return workflow.patched(names.SYNTHESIS_BILL_KEPT_PATCH)
