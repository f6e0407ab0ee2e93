"""A reply the model gave that its step could not record, carried to the step's next attempt.

A step records the model's reply before returning it, waiting out a Postgres outage until
shortly before its attempt's deadline (`step_records.until_stored`). An outage longer than
that failed the attempt, and the next attempt, finding no record, bought the reply again:
one step billed twice. So the attempt that gives up leaves the reply in its last heartbeat's
details, which Temporal hands to the next attempt of the same activity; that attempt records
it and returns it without calling the model.

Heartbeat details are a payload: the reply fits (`bound_reply` keeps it within every payload
limit), and what the endpoint sent with each call for itself (`ToolCall.extra_content`, which
payloads leave out: Gemini's thought signatures) goes beside it, since the next request must
carry it back. So does the model's thinking, for the step's record (`with_thinking`), up to
HELD_THINKING_MAX_CHARS: the reply's own bound leaves that much room in the payload; and the
state the endpoint attached to the turn (`activities.turn_state`), which the next requests
carry back too, while the details stay within HELD_MAX_BYTES.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic_core import to_json
from temporalio import activity

from activities.heartbeat import last_heartbeat
from reactive_temporal.contracts.llm_payloads import LlmStepResult
from reactive_temporal.sanitize import clip

HELD_THINKING_MAX_CHARS = 16_000
HELD_MAX_BYTES = 1_800_000
"""The held reply's details with the turn's state at most: Temporal refuses a payload over
2 MB. A reply within its own bound (1.5 MB, most far less) leaves most states room; one that
does not fit is left out, with a warning naming the run, and the turn recorded without it
(cut, it would be refused as a missing one is). What the endpoint sent with each call
(Gemini's thought signatures) cannot be left out so: a reply whose details are past it even
without the turn's state is not held (the next attempt asks the model again), with a
warning. Past 2 MiB the heartbeat was refused (TMPRL1103), the attempt failed by the SDK
with its own error, and the reply was not held either."""


class HeldReply(BaseModel):
    """The heartbeat details of an attempt that got a reply and could not record it."""

    held_seq: int
    """The reply's place in the transcript: an attempt at another place ignores it."""
    held: LlmStepResult
    extra_content: list[dict[str, Any] | None] = []
    """Each call's `extra_content`, in order."""
    thinking: str | None = None
    """The model's thinking, for the step's record (never the workflow's)."""
    turn_state: str | None = None
    """The state the endpoint attached to the turn, as recorded (`turn_state.state_text`)."""


def hold(
    run_id: str,
    seq: int,
    result: LlmStepResult,
    thinking: str | None = None,
    turn_state: str | None = None,
) -> None:
    """Leave `result` (the reply at `seq` of run `run_id`), the thinking behind it and the
    turn's state for the next attempt of this step."""
    extra = [call.extra_content for call in result.tool_calls]
    kept = clip(thinking, HELD_THINKING_MAX_CHARS) if thinking else None
    details = HeldReply(
        held_seq=seq, held=result, extra_content=extra, thinking=kept, turn_state=turn_state
    ).model_dump(mode="json")
    if turn_state and len(to_json(details)) > HELD_MAX_BYTES:
        activity.logger.warning(
            "%s #%d: the reply held for the step's next attempt goes without the state its "
            "endpoint attached (%s characters): the details would be over %s bytes",
            run_id,
            seq,
            f"{len(turn_state):,}",
            f"{HELD_MAX_BYTES:,}",
        )
        details["turn_state"] = None
    size = len(to_json(details))
    if size > HELD_MAX_BYTES:
        activity.logger.warning(
            "%s #%d: the reply is not held for the step's next attempt, which asks the model "
            "again: with what its endpoint sent with each call (%s bytes) it is %s bytes, over "
            "%s",
            run_id,
            seq,
            f"{len(to_json(extra)):,}",
            f"{size:,}",
            f"{HELD_MAX_BYTES:,}",
        )
        return
    activity.heartbeat(details)


def held_reply(seq: int) -> tuple[LlmStepResult, str | None, str | None] | None:
    """The reply at `seq` an earlier attempt of this step got and left, its thinking and the
    turn's state, if one did."""
    held = last_heartbeat(HeldReply)
    if held is None or held.held_seq != seq or len(held.extra_content) != len(held.held.tool_calls):
        return None
    calls = [
        call.model_copy(update={"extra_content": extra})
        for call, extra in zip(held.held.tool_calls, held.extra_content, strict=True)
    ]
    return held.held.model_copy(update={"tool_calls": calls}), held.thinking, held.turn_state
