"""Which chat turns the agent entity remembers having answered, so none is answered twice.

A chat turn is a workflow update, and Temporal runs an update id once — within one run. When
the entity continues as new, the server can hand a turn the old run already answered to the
new run again: an update completed in the task that continued as new
(temporalio/temporal#6375), or one whose caller was told "workflow update was aborted" and
sent it again under its id (`reactive_temporal.refusals`). The new run has never seen that
id, so it would ask the model again: a second billed call, and the turn saved twice. Measured
in `tests/workflow/test_busy_server.py`'s crowd (20 turns, an entity run every 12 updates):
1 turn in about 35 crowds, under CPU load.

So the entity keeps the latest turns' replies by update id in its state, which it carries
across continue-as-new, and a turn it finds there gets the same reply without being run
again. A turn is sent again within seconds of its run's end, so only the recent ones are
kept, bounded in number and bytes (the state is a payload, and Temporal refuses one over
2 MB: `reactive_temporal.session_window` has the budget's other part).

Pure functions, tested in milliseconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from pydantic_core import to_json

from reactive_temporal.contracts.entity import AnsweredTurn, ChatReply

KEEP_FOR = timedelta(minutes=2)
"""How long a reply is remembered (a turn sent again comes within seconds)."""
KEEP_TURNS = 32
"""The most replies remembered."""
KEEP_BYTES = 128_000
"""The most bytes of remembered replies (the newest is kept whatever its size: a reply is
bounded by `limits.REPLY_CONTENT_MAX_CHARS`)."""
TURN_OVERHEAD_BYTES = 256
"""The update id, time, route, tokens and JSON punctuation of one remembered reply."""


def answered_before(turns: Sequence[AnsweredTurn], update_id: str) -> ChatReply | None:
    """The reply to the turn with this update id, when it was answered already."""
    return next((t.reply for t in turns if t.update_id == update_id), None)


def remember(
    turns: Sequence[AnsweredTurn], update_id: str, reply: ChatReply, now: datetime
) -> list[AnsweredTurn]:
    """`turns` with this turn's reply added, newest last; those older than KEEP_FOR, and the
    oldest past KEEP_TURNS or KEEP_BYTES, forgotten."""
    kept = [AnsweredTurn(update_id=update_id, at=now, reply=reply)]
    size = turn_bytes(kept[0])
    for turn in reversed(recent(turns, now)[-(KEEP_TURNS - 1) :]):
        size += turn_bytes(turn)
        if size > KEEP_BYTES:
            break
        kept.append(turn)
    return kept[::-1]


def recent(turns: Sequence[AnsweredTurn], now: datetime) -> list[AnsweredTurn]:
    """`turns` without those older than KEEP_FOR (what a run carries to the next)."""
    return [t for t in turns if now - t.at <= KEEP_FOR]


def turn_bytes(turn: AnsweredTurn) -> int:
    """What a remembered reply weighs in the entity's state, about."""
    return len(to_json(turn.reply.message)) + TURN_OVERHEAD_BYTES  # as JSON: `session_window`
