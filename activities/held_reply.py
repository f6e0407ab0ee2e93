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
HELD_THINKING_MAX_CHARS: the reply's own bound leaves that much room in the payload.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from temporalio import activity

from activities.heartbeat import last_heartbeat
from reactive_temporal.contracts.run import LlmStepResult
from reactive_temporal.sanitize import clip

HELD_THINKING_MAX_CHARS = 16_000


class HeldReply(BaseModel):
    """The heartbeat details of an attempt that got a reply and could not record it."""

    held_seq: int
    """The reply's place in the transcript: an attempt at another place ignores it."""
    held: LlmStepResult
    extra_content: list[dict[str, Any] | None] = []
    """Each call's `extra_content`, in order."""
    thinking: str | None = None
    """The model's thinking, for the step's record (never the workflow's)."""


def hold(seq: int, result: LlmStepResult, thinking: str | None = None) -> None:
    """Leave `result` (the reply at `seq`) and the thinking behind it for the next attempt of
    this step."""
    extra = [call.extra_content for call in result.tool_calls]
    kept = clip(thinking, HELD_THINKING_MAX_CHARS) if thinking else None
    activity.heartbeat(
        HeldReply(held_seq=seq, held=result, extra_content=extra, thinking=kept).model_dump(
            mode="json"
        )
    )


def held_reply(seq: int) -> tuple[LlmStepResult, str | None] | None:
    """The reply at `seq` an earlier attempt of this step got and left, and its thinking, if
    one did."""
    held = last_heartbeat(HeldReply)
    if held is None or held.held_seq != seq or len(held.extra_content) != len(held.held.tool_calls):
        return None
    calls = [
        call.model_copy(update={"extra_content": extra})
        for call, extra in zip(held.held.tool_calls, held.extra_content, strict=True)
    ]
    return held.held.model_copy(update={"tool_calls": calls}), held.thinking
