"""A run's state as one model, and how a run ends as one value.

AgentRunWorkflow keeps everything it knows about its run in a `RunState` and changes it only
through the methods here, which are pure (no Temporal, no I/O): the workflow reads as the
loop it is, and every piece of bookkeeping is unit-tested in milliseconds. `RunState` is a
pydantic model, so it can travel whole (a continue-as-new input, a test fixture).

How the run ended is an `Ending`: set once, by the first thing that ends the run (an
accepted final answer, a plain reply, the operator's signal, an LLM failure, the iteration
cap), and never overridden.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import BaseModel, Field

from reactive_temporal.contracts.approvals import ApprovalRecord, PendingApproval
from reactive_temporal.contracts.debrief import (
    RationaleEntry,
    ToolCallRecord,
    ToolStat,
)
from reactive_temporal.contracts.llm_payloads import BilledReplies, LlmStepResult
from reactive_temporal.contracts.result import AgentResult, RunMetadata
from reactive_temporal.contracts.run import (
    FINAL_ANSWER_TOOL,
    AgentConfig,
    FinalAnswerCapture,
    RunProgress,
    ToolCall,
    ToolResult,
)
from reactive_temporal.limits import (
    CONFIDENCE_MAX_CHARS,
    ERROR_RECORD_MAX_CHARS,
    answer_over_budget,
    bound_answer,
    within_bytes,
)
from reactive_temporal.prompts import CUT_SHORT_ENDINGS
from reactive_temporal.sanitize import clip
from workflows.chat_rules import analysis_observation, keep_recent, tool_observation
from workflows.debrief_rules import (
    MAX_DEBRIEF_ERRORS,
    dedupe,
    errors_from_loop,
    merge_tool_stats,
    tool_stats,
)
from workflows.final_answer import (
    META_TOOLS,
    has_tool_work,
    judge_final_answer,
    should_show_final_answer,
)
from workflows.turns import Ending

OBSERVATION_PREVIEW_CHARS = 500
KEEP_RECORDS = 100
"""Tool calls and rationale entries a run carries whole when it continues as new."""


def preview(text: str, limit: int = OBSERVATION_PREVIEW_CHARS) -> str:
    """An observation short enough for the progress query and the Web UI."""
    return text if len(text) <= limit else text[:limit] + "…"


class RunState(BaseModel):
    """Everything AgentRunWorkflow knows about its run."""

    iteration: int = 0
    """Completed LLM turns."""
    seq: int = 0
    """The next free position in the run's transcript (Postgres, keyed by run and seq)."""
    tool_names: list[str] = Field(default_factory=list)
    """The tools this run may call, as `prepare_run` resolved them."""
    tool_timeouts: dict[str, float] = Field(default_factory=dict)
    """Each tool's own timeout (from prepare_run; empty for runs started before it said)."""
    tools_used: list[str] = Field(default_factory=list)
    """Tools called so far, in first-use order; `final-answer` included once called."""
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    """Every executed tool call since the run last continued as new, for the debrief."""
    earlier_tool_stats: list[ToolStat] = Field(default_factory=list)
    """The calls from before the run last continued as new, folded into per-tool stats."""
    earlier_errors: list[str] = Field(default_factory=list)
    """Their distinct errors (at most MAX_DEBRIEF_ERRORS)."""
    rationale: list[RationaleEntry] = Field(default_factory=list)
    """Audit mode: why each tool call was made."""
    observations: list[str] = Field(default_factory=list)
    """What chat may quote of this run: tool results and the analysis after them."""
    last_turn_ran_tools: bool = False
    has_errors: bool = False
    """A tool failed or a finish was refused: `final-answer` stays hidden a while."""
    gap_check_done: bool = False
    """The one-shot completion-gap check has rejected a finish already."""
    steps: int = 0
    """LLM steps plus tool calls executed."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    """Of the completion tokens, those a reasoning model spent thinking."""
    cost: float = 0.0
    last_text: str = ""
    """The model's last non-empty reply text: the answer when nothing better ends the run."""
    cut_short_by: str | None = Field(default=None, exclude=True)
    """Why the model's last reply ended that it did not end itself (`length`,
    `content_filter`), None when it did: said when the run ends at its iteration cap."""
    current_tool: str | None = None
    last_observation: str | None = None
    operator_answer: FinalAnswerCapture | None = None
    """Sent with the `final_answer` signal; ends the run at the next chance."""
    pending_approvals: list[PendingApproval] = Field(default_factory=list)
    """Tool calls parked until a person decides (the run runs no activity meanwhile)."""
    approvals: list[ApprovalRecord] = Field(default_factory=list)
    """Every decision on a tool call, in order, for the debrief."""
    ending: Ending | None = None
    error: str | None = None
    """Why the LLM failed for good, when it did."""

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def ended(self) -> bool:
        return self.ending is not None

    # -- the loop ---------------------------------------------------------------------------

    def claim_seqs(self, count: int) -> int:
        """Reserve `count` transcript positions; returns the first."""
        first = self.seq
        self.seq += count
        return first

    def visible_tools(self, agent: AgentConfig) -> list[str]:
        """The tools offered at this iteration: `final-answer` only once its gate opens."""
        show = should_show_final_answer(
            required_tools=agent.required_tools,
            tools_used=self.tools_used,
            iteration=self.iteration,
            has_errors=self.has_errors,
            has_non_meta_tool_called=has_tool_work(self.tools_used, agent.required_tools),
        )
        return self.tool_names + ([FINAL_ANSWER_TOOL] if show else [])

    def account_for_billed(self, billed: BilledReplies | None) -> None:
        """A failed step's bill (replies with no choices or unreadable, a reply Postgres
        refused): in the run's tokens and cost, though no reply came of it."""
        if billed is None:
            return
        self.prompt_tokens += billed.usage.prompt_tokens
        self.completion_tokens += billed.usage.completion_tokens
        self.reasoning_tokens += billed.usage.reasoning_tokens
        self.cost += billed.cost

    def account_for(self, step: LlmStepResult) -> None:
        """The model's reply is in the transcript: count its tokens, cost and rationale, and
        keep its analysis of the tool results it read."""
        self.seq += 1
        self.steps += 1
        self.prompt_tokens += step.usage.prompt_tokens
        self.completion_tokens += step.usage.completion_tokens
        self.reasoning_tokens += step.usage.reasoning_tokens
        self.cost += step.cost
        if step.content and step.content.strip():
            self.last_text = step.content.strip()
        self.cut_short_by = step.finish_reason if step.finish_reason in CUT_SHORT_ENDINGS else None
        if self.last_turn_ran_tools:
            self.observations = keep_recent(self.observations, [analysis_observation(step.content)])
        self.rationale += [
            RationaleEntry(iteration=self.iteration + 1, tool_name=call.name, rationale=why)
            for position, call in enumerate(step.tool_calls, start=1)
            if (why := step.rationale.get(position)) is not None
        ]

    def note_nudge(self, *, is_error: bool, gap_check_rejected: bool) -> None:
        self.has_errors = self.has_errors or is_error
        self.gap_check_done = self.gap_check_done or gap_check_rejected

    def complete_turn(self, *, ran_tools: bool) -> None:
        self.last_turn_ran_tools = ran_tools
        self.iteration += 1

    # -- tools and final answers ------------------------------------------------------------

    def record_tool_results(self, results: Sequence[ToolResult]) -> None:
        """A turn's tool calls are done (failures are observations too)."""
        for result in results:
            self.tool_calls.append(
                ToolCallRecord(
                    name=result.name,
                    success=result.success,
                    duration_ms=result.duration_ms,
                    iteration=self.iteration + 1,
                    error=None if result.success else clip(result.content, ERROR_RECORD_MAX_CHARS),
                )
            )
            if result.name in self.tool_names and result.name not in self.tools_used:
                self.tools_used.append(result.name)
            self.has_errors = self.has_errors or not result.success
            self.last_observation = preview(result.content)
        self.observations = keep_recent(
            self.observations, [tool_observation(r.content, r.success) for r in results]
        )

    def judge_final_answer(
        self,
        call: ToolCall,
        *,
        task: str,
        agent: AgentConfig,
        limit_answer: bool = False,
        nulls_allowed: Callable[[], bool] = lambda: False,
        budgeted: Callable[[], bool] = lambda: False,
    ) -> str | None:
        """Judge a `final-answer` call: accepted, it ends the run; refused, the model reads why.
        Returns the observation to record for the call, or None when the run already ended
        (a second call in the same turn). `budgeted` (the payload-budget patch, asked only
        where it changes something): an answer past ANSWER_MAX_BYTES is refused, and an
        accepted one's summary and confidence clipped as an operator's are."""
        if FINAL_ANSWER_TOOL not in self.tools_used:
            self.tools_used.append(FINAL_ANSWER_TOOL)
        if self.ended:
            return None
        verdict = judge_final_answer(
            call.arguments,
            task=task,
            required_tools=agent.required_tools,
            tools_used=self.tools_used,
            available_tools=self.tool_names,
            gap_check_done=self.gap_check_done,
            limit_answer=limit_answer,
            nulls_allowed=nulls_allowed,
            bytes_checked=budgeted,
        )
        self.gap_check_done = self.gap_check_done or verdict.gap_check_rejected
        if verdict.accepted and verdict.capture is not None:
            capture = verdict.capture
            if answer_over_budget(capture) and budgeted():
                capture = bound_answer(capture, confidence_max_chars=CONFIDENCE_MAX_CHARS)
            self.ending = Ending("final_answer_tool", capture.output, capture)
            observation = f"✓ final-answer accepted: {preview(capture.output)}"
        else:
            self.has_errors = True
            observation = f"⚠️ {verdict.error}"
        self.last_observation = observation
        return observation

    # -- endings ----------------------------------------------------------------------------

    def end(self, ending: Ending) -> None:
        """End the run here, unless something ended it already."""
        if self.ending is None:
            self.ending = ending

    def end_if_operator_answered(self) -> None:
        if self.operator_answer is not None:
            self.end(Ending("final_answer_tool", self.operator_answer.output, self.operator_answer))

    def fail(self, error: str) -> None:
        """The LLM failed for good."""
        self.error = error
        self.end(Ending("llm_error", self.last_text))

    def fail_on_bug(self, message: str) -> None:
        """The workflow code failed: the run ends as `error` (unless already ended)."""
        self.error = self.error or message
        self.end(Ending("error", self.last_text))

    def refused_by_store(self, message: str) -> None:
        """Postgres refused the run's data for good (workflows/store_refusals.py): the run
        ends as `error` (unless already ended), `message` its error."""
        self.error = self.error or message
        self.end(Ending("error", self.last_text))

    def end_at_iteration_cap(self) -> None:
        # a model whose every reply the provider's filter stopped ran out of iterations with
        # no word of why (`error` None, the output empty)
        note = CUT_SHORT_ENDINGS.get(self.cut_short_by or "")
        self.end(Ending("max_iterations", self.last_text, note=note))

    # -- a long run --------------------------------------------------------------------------

    def loop_errors(self) -> list[str]:
        return dedupe([*self.earlier_errors, *errors_from_loop(self.tool_calls)])

    def compacted(self, keep: int = KEEP_RECORDS) -> RunState:
        """The state to carry into the next Temporal run: the last `keep` tool calls and
        rationale entries kept whole, the older calls folded into stats and distinct errors,
        so the continue-as-new input stays small however long the run."""
        recent = within_bytes(self.tool_calls[-keep:])  # and within RECORDS_MAX_BYTES each
        older = self.tool_calls[: len(self.tool_calls) - len(recent)]
        return self.model_copy(
            update={
                "tool_calls": recent,
                "earlier_tool_stats": merge_tool_stats(self.earlier_tool_stats, tool_stats(older)),
                "earlier_errors": within_bytes(
                    dedupe([*self.earlier_errors, *errors_from_loop(older)])[:MAX_DEBRIEF_ERRORS],
                    latest=False,
                ),
                "rationale": within_bytes(self.rationale[-keep:]),
                "approvals": within_bytes(self.approvals[-keep:]),
                "current_tool": None,
            }
        )

    # -- what the outside sees --------------------------------------------------------------

    def progress(self, run_id: str, agent: AgentConfig) -> RunProgress:
        return RunProgress(
            run_id=run_id,
            agent_id=agent.agent_id,
            status="completed" if self.ended else "running",
            iteration=self.iteration,
            max_iterations=agent.max_iterations,
            current_tool=self.current_tool,
            tools_called=list(self.tools_used),
            tokens=self.tokens,
            last_observation=self.last_observation,
            terminated_by=self.ending.terminated_by if self.ending else None,
            waiting_for="approval" if self.pending_approvals else None,
            pending_approvals=list(self.pending_approvals),
        )

    def result(self, run_id: str, agent: AgentConfig, *, duration_ms: int) -> AgentResult:
        """The run's result (without its debrief), once it has ended."""
        ending = self.ending or Ending("max_iterations", self.last_text)
        capture = ending.capture
        return AgentResult(
            output=ending.output,
            success=ending.succeeded,
            run_id=run_id,
            agent_id=agent.agent_id,
            format=capture.format if capture else "text",
            terminated_by=ending.terminated_by,
            final_answer=capture,
            tools_used=[t for t in self.tools_used if t not in META_TOOLS],
            error=self.error or ending.note,
            metadata=RunMetadata(
                duration_ms=duration_ms,
                tokens_used=self.tokens,
                prompt_tokens=self.prompt_tokens,
                completion_tokens=self.completion_tokens,
                reasoning_tokens=self.reasoning_tokens,
                cost=round(self.cost, 8),
                steps_count=self.steps,
                iterations=self.iteration,
            ),
        )
