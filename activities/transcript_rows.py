"""A run's transcript rows as the steps read them (`Store.load_transcript`), with what each
model's turn's step recorded beside the message when asked (`ThoughtEntry`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from activities.turn_state import TurnState, read_state
from reactive_temporal.context_window import estimate_tokens
from reactive_temporal.contracts.run import Message, SeqMessage, ToolCall


class ThoughtEntry(SeqMessage):
    """A model's turn with what its step recorded beside it (`ThoughtStep`): the model's
    thinking, for the endpoints that want it back (`ModelCapabilities.thinking_sent_back`),
    and the state the endpoint attached to the turn, which goes back whenever there is one
    (`activities.turn_state`). Activities only: a payload that holds one sends it as a
    `SeqMessage`, without them."""

    thinking: str = ""
    turn_state: TurnState | None = None
    state_chars: int = 0
    """The state's size as recorded (JSON text), for what the transcript cache holds."""


def turn_entry(
    seq: int, message: Message, thinking: str | None = None, turn_state: str | None = None
) -> SeqMessage:
    """The transcript entry of a message with what its step recorded beside it: `thinking`,
    and `turn_state` as recorded (`turn_state.state_text`)."""
    state = read_state(turn_state)
    if not thinking and state is None:
        return SeqMessage(seq=seq, message=message)
    return ThoughtEntry(
        seq=seq,
        message=message,
        thinking=thinking or "",
        turn_state=state,
        state_chars=len(turn_state or "") if state is not None else 0,
    )


_COLUMNS = "seq, role, content, tool_calls, tool_call_id, name"
TRANSCRIPT = (
    f"SELECT {_COLUMNS} FROM run_messages WHERE run_id = %s AND seq >= %s AND seq < %s ORDER BY seq"
)
TRANSCRIPT_RECORDED = (
    f"SELECT {_COLUMNS},"
    " CASE WHEN role = 'assistant' THEN step_result->>'thinking' END AS thinking,"
    " CASE WHEN role = 'assistant' THEN step_result->>'turn_state' END AS turn_state"
    " FROM run_messages WHERE run_id = %s AND seq >= %s AND seq < %s ORDER BY seq"
)
"""TRANSCRIPT with what each model's turn's step recorded beside it (`ThoughtEntry`)."""


def seq_messages(rows: list[dict[str, Any]]) -> list[SeqMessage]:
    """TRANSCRIPT's (or TRANSCRIPT_RECORDED's) rows as entries."""
    return [
        turn_entry(
            r["seq"],
            Message(
                role=r["role"],
                content=r["content"],
                tool_calls=[ToolCall(**c) for c in (r["tool_calls"] or [])],
                tool_call_id=r["tool_call_id"],
                name=r["name"],
            ),
            r.get("thinking"),
            r.get("turn_state"),
        )
        for r in rows
    ]


def thinking_tokens(transcript: Sequence[SeqMessage]) -> dict[int, int]:
    """The estimated tokens of each step's recorded thinking, by its place (for an endpoint
    that wants it sent back, `ModelCapabilities.thinking_sent_back`)."""
    return {
        e.seq: estimate_tokens(e.thinking)
        for e in transcript
        if isinstance(e, ThoughtEntry) and e.thinking
    }
