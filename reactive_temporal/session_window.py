"""How much of its chat sessions the agent entity keeps in its own state.

The entity's state is its continue-as-new input, and Temporal refuses payloads over 2 MB.
Every chat turn is saved to Postgres as it happens, so the state needs only a window of each
session (what chat sends the model, and a little more); the rest is paged out and read back
from Postgres. Windows are bounded per session and all together, the least recently used
session gives way first, and sessions idle past a TTL are closed (they stay saved and can be
reopened by id).

Pure functions, measured in the bytes of the text as JSON (what the payload weighs: a control
character is six, where UTF-8 counted one, and a state within its budgets by UTF-8 went past
2 MB), tested in milliseconds.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timedelta

from pydantic_core import to_json

from reactive_temporal.contracts.entity import ChatMessage
from reactive_temporal.limits import within_bytes

WINDOW_MESSAGES = 40
"""The most messages of one session kept in state (chat sends at most 40)."""
WINDOW_BYTES = 24_000
"""The most bytes of one session kept in state (chat sends at most 8,000 characters)."""
STATE_WINDOW_BYTES = 192_000
"""All sessions' windows together."""
MAX_OPEN_SESSIONS = 200
"""Open sessions past this close, least recently used first."""
SESSION_IDLE_TTL = timedelta(hours=24)
"""A session with no turn for this long is closed (saved, reopenable)."""
MESSAGE_OVERHEAD_BYTES = 64
"""Role, timestamp and JSON punctuation of one message."""


def message_bytes(message: ChatMessage) -> int:
    return len(to_json(message.content)) + MESSAGE_OVERHEAD_BYTES


def window_bytes(messages: Sequence[ChatMessage]) -> int:
    return sum(message_bytes(m) for m in messages)


def trim_window(
    messages: Sequence[ChatMessage],
    max_messages: int = WINDOW_MESSAGES,
    max_bytes: int = WINDOW_BYTES,
) -> list[ChatMessage]:
    """The newest messages that fit both bounds (possibly none: one message may be bigger)."""
    return within_bytes(messages[-max_messages:], max_bytes, size=message_bytes)


def sessions_to_page_out(
    windows: Mapping[str, Sequence[ChatMessage]],
    last_active: Mapping[str, datetime],
    *,
    keep: Collection[str] = (),
    budget: int = STATE_WINDOW_BYTES,
) -> list[str]:
    """Sessions whose windows leave the state (least recently used first) until the rest fit."""
    sizes = {sid: window_bytes(msgs) for sid, msgs in windows.items() if msgs}
    total = sum(sizes.values())
    out: list[str] = []
    for sid in _least_recent_first(sizes, last_active):
        if total <= budget:
            break
        if sid in keep:
            continue
        out.append(sid)
        total -= sizes[sid]
    return out


def sessions_to_close(
    last_active: Mapping[str, datetime],
    now: datetime,
    *,
    ttl: timedelta = SESSION_IDLE_TTL,
    max_open: int = MAX_OPEN_SESSIONS,
    keep: Collection[str] = (),
) -> list[str]:
    """Sessions idle past the TTL, then the least recently used beyond `max_open`."""
    idle = [sid for sid, at in last_active.items() if now - at >= ttl and sid not in keep]
    remaining = [sid for sid in _least_recent_first(last_active, last_active) if sid not in idle]
    excess = max(0, len(remaining) - max_open)
    crowded = [sid for sid in remaining if sid not in keep][:excess]
    return idle + crowded


def next_idle_deadline(
    last_active: Mapping[str, datetime], *, ttl: timedelta = SESSION_IDLE_TTL
) -> datetime | None:
    """When the next session goes idle; None with no session to watch."""
    return min(last_active.values()) + ttl if last_active else None


def _least_recent_first(
    sessions: Collection[str], last_active: Mapping[str, datetime]
) -> list[str]:
    oldest = datetime.min.replace(tzinfo=None)

    def when(sid: str) -> tuple[datetime, str]:
        at = last_active.get(sid)
        return (at.replace(tzinfo=None) if at else oldest, sid)

    return sorted(sessions, key=when)
