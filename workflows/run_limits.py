"""The limits a run keeps, so no reply, tool call or answer can push a payload past
Temporal's walls (2 MB per payload, 4 MB per workflow task completion, 50 MB / 51,200 events
of history), and when a long run continues as new.

Pure functions: the run loop asks them, and they are unit-tested without Temporal. What a
limit refuses becomes an observation the model reads (it can do the work in smaller pieces),
never an exception in workflow code.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from reactive_temporal.contracts.run import ToolCall
from reactive_temporal.limits import (
    ANSWER_MAX_CHARS,
    MAX_TOOL_CALLS_PER_TURN,
    answer_bytes_problem,
    arguments_limit,
)

CONTINUE_AS_NEW_EVERY_ITERATIONS = 500
"""Iterations per run before it continues as new even if Temporal has not suggested it: each
iteration adds ~12 history events, so 500 keep a run far below the event limit."""


def admitted_tool_calls(
    calls: Sequence[ToolCall], limit: int = MAX_TOOL_CALLS_PER_TURN
) -> tuple[list[ToolCall], list[ToolCall]]:
    """The calls that may run (the first `limit`, in the model's order) and those refused."""
    return list(calls[:limit]), list(calls[limit:])


def too_many_calls_observation(call: ToolCall, total: int, limit: int) -> str:
    return (
        f"[Tool error: {call.name} was not run: this turn made {total} tool calls and at most "
        f"{limit} run per turn. Call it again in a later turn if you still need it.]"
    )


def oversized_arguments_observation(call: ToolCall) -> str | None:
    """Why a call's arguments are refused (llm_step marked them, or they are over the limit
    anyway), or None when they are fine."""
    size = call.oversized if call.oversized is not None else len(call.arguments)
    if call.oversized is None and size <= arguments_limit(call):
        return None
    return (
        f"[Tool error: {call.name} was not run: its arguments are {size:,} characters, more "
        f"than one call or one reply may carry (at most {arguments_limit(call):,} per call). "
        "Send less data per call.]"
    )


def answer_too_long(
    output: str, *, bytes_checked: Callable[[], bool] = lambda: False
) -> str | None:
    """Why a final answer is refused for its size, or None. `bytes_checked` (asked only for
    an answer within ANSWER_MAX_CHARS but past ANSWER_MAX_BYTES: the payload-budget patch):
    its weight as JSON counts too; runs from before took it."""
    if len(output) <= ANSWER_MAX_CHARS:
        problem = answer_bytes_problem(output)
        return problem if problem is not None and bytes_checked() else None
    return (
        f"The final answer is {len(output):,} characters; the limit is {ANSWER_MAX_CHARS:,}. "
        "Shorten it, or write the full text to a file and answer with a summary."
    )


STORE_UNAVAILABLE = "StoreUnavailable"
"""The failure type of a step that gave up only because Postgres was unreachable
(activities/step_records.py)."""
STORE_OUTAGE_WAIT_SECONDS = 30.0


def failure_types(err: BaseException) -> list[str]:
    """The `type` of every ApplicationError in an exception's cause chain."""
    found: list[str] = []
    cause: BaseException | None = err
    while cause is not None and len(found) < 20:
        kind = getattr(cause, "type", None)
        if isinstance(kind, str):
            found.append(kind)
        cause = cause.__cause__
    return found


def is_store_outage(err: BaseException) -> bool:
    """The step failed because the store was unreachable, not because of the LLM."""
    return STORE_UNAVAILABLE in failure_types(err)


def should_continue_as_new(
    *, suggested: bool, iterations_this_run: int, every: int | None, ended: bool
) -> bool:
    """Continue as new after a turn when the run goes on and Temporal suggests it (history
    near its warning limits) or this run has done `every` iterations."""
    if ended or iterations_this_run <= 0:
        return False
    return suggested or (every is not None and iterations_this_run >= every)
