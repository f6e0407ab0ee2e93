"""What a model turn means for the loop: act, end the run, or nudge and go on.

Pure functions over the model's reply, so the run loop stays a loop and each ending is
unit-tested in milliseconds (reference §1.5, §1.6).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from reactive_temporal.contracts.run import (
    SUCCESSFUL_ENDINGS,
    FinalAnswerCapture,
    TerminatedBy,
    ToolCall,
)
from reactive_temporal.prompts import (
    CUT_SHORT_NUDGES,
    EMPTY_REPLY_NUDGE,
    UNREAD_CALLS_NUDGE,
    completion_guard_nudge,
    unfinished_nudge,
)
from workflows.final_answer import (
    detect_completion_gaps,
    extract_final_answer,
    has_final_answer_marker,
    missing_required_tools,
)


@dataclass(frozen=True)
class Ending:
    """How a run ended: why, the answer it gives, and the final-answer payload when there
    was one (the tool call's or the operator's). A turn that ends the run decides one."""

    terminated_by: TerminatedBy
    output: str
    capture: FinalAnswerCapture | None = None
    note: str | None = None
    """Why an operator or a limit stopped the run (the result's `error`, the debrief's
    first error): "token budget of 5,000 exceeded: 5,412 used"."""

    @property
    def succeeded(self) -> bool:
        return is_success(self.terminated_by, self.output)


@dataclass(frozen=True)
class Nudge:
    """No tools, no answer: tell the model what is missing and take another turn."""

    note: str
    is_error: bool = False
    gap_check_rejected: bool = False


@dataclass(frozen=True)
class Act:
    """Run these tool calls; finish afterwards with `final_text` when the turn also gave one."""

    tool_calls: list[ToolCall] = field(default_factory=list)
    final_text: str | None = None


TurnDecision = Ending | Nudge | Act

CUT_SHORT: frozenset[str] = frozenset(CUT_SHORT_NUDGES)
"""Finish reasons of a reply the model did not end itself: cut off at the output token limit,
or stopped by the provider's content filter. Its text is not an answer."""


def decide_turn(
    content: str | None,
    tool_calls: list[ToolCall],
    *,
    task: str,
    tools_used: Collection[str],
    available_tools: Collection[str],
    gap_check_done: bool,
    anchored_marker: bool = False,
    required_tools: Collection[str] = (),
    finish_reason: str | None = None,
    bare_marker_nudged: Callable[[], bool] = lambda: False,
    unread_calls: bool = False,
) -> TurnDecision:
    """What the reply means. Any ending before every required tool has run — `FINAL ANSWER:`
    text or a plain reply (the final-answer tool has its own gate) — is refused with a nudge
    naming the missing tools.

    `anchored_marker`: `FINAL ANSWER:` counts only at the start of a line, colon required
    (runs started before the `final-answer-line-anchored` patch keep the loose marker).

    `finish_reason`: a reply without tool calls that the model did not end itself
    (`CUT_SHORT`) ends nothing, `FINAL ANSWER:` or not: the released semantics end a turn on
    the model's own `end_turn` only. The model is told why and goes on. Runs started before
    the `cut-short-replies-go-on` patch pass None.

    `bare_marker_nudged` (asked only for a reply that is the marker alone): such a reply is
    empty, and nudged; runs from before ended on it as a success whose answer was the marker.

    `unread_calls`: the reply ended with calls written in its text that could not be read,
    taken out of `content` (`LlmStepResult.unread_calls`): the model is told, an error as a
    call its tool refused is, whatever words came before them (the calls were meant to run
    before any ending). Runs started before the `unread-text-calls-nudged` patch pass False."""
    text = (content or "").strip()
    marker = has_final_answer_marker(text, anchored=anchored_marker)
    if tool_calls:
        return Act(
            tool_calls, extract_final_answer(text, anchored=anchored_marker) if marker else None
        )
    if finish_reason in CUT_SHORT_NUDGES:
        return Nudge(CUT_SHORT_NUDGES[finish_reason])
    if unread_calls:
        return Nudge(UNREAD_CALLS_NUDGE, is_error=True)
    missing = missing_required_tools(required_tools, tools_used)
    if text and missing:
        return Nudge(unfinished_nudge(missing))
    if marker:
        answer = extract_final_answer(text, anchored=anchored_marker)
        gaps = [] if gap_check_done else detect_completion_gaps(task, tools_used, available_tools)
        if gaps:
            return Nudge(completion_guard_nudge(gaps), is_error=True, gap_check_rejected=True)
        if answer:
            return Ending("final_answer", answer)
        if bare_marker_nudged():  # "FINAL ANSWER:" and nothing else: no answer at all
            return Nudge(EMPTY_REPLY_NUDGE)
    if text:
        return Ending("end_turn", text)
    return Nudge(EMPTY_REPLY_NUDGE)


def is_success(terminated_by: TerminatedBy, output: str) -> bool:
    """A run succeeded when the agent finished on its own with a non-empty answer."""
    return terminated_by in SUCCESSFUL_ENDINGS and bool(output.strip())


def goal_achieved(terminated_by: TerminatedBy | None) -> bool | None:
    """The reference's `deriveGoalAchieved`: None when the ending says nothing either way."""
    if terminated_by in ("final_answer_tool", "final_answer"):
        return True
    if terminated_by in (
        "max_iterations",
        "llm_error",
        "cancelled",
        "budget_exceeded",
        "timeout",
        "error",
    ):
        return False
    return None
