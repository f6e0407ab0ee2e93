"""The agent entity's state stays bounded whatever the chat volume."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from reactive_temporal.contracts.entity import ChatMessage
from reactive_temporal.session_window import (
    MESSAGE_OVERHEAD_BYTES,
    SESSION_IDLE_TTL,
    STATE_WINDOW_BYTES,
    WINDOW_BYTES,
    next_idle_deadline,
    sessions_to_close,
    sessions_to_page_out,
    trim_window,
    window_bytes,
)

T0 = datetime(2026, 7, 1, tzinfo=UTC)


def _turns(n: int, chars: int = 100, text: str = "x") -> list[ChatMessage]:
    return [
        ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"{i} " + text * chars,
                    timestamp=T0 + timedelta(seconds=i))
        for i in range(n)
    ]  # fmt: skip


def test_the_window_keeps_the_newest_messages_within_both_bounds() -> None:
    messages = _turns(100)
    window = trim_window(messages)
    assert window == messages[-40:]
    big = _turns(10, 5_000)
    window = trim_window(big)
    assert window == big[-len(window) :] and window_bytes(window) <= WINDOW_BYTES
    assert len(window) == 4


def test_bytes_not_characters_bound_the_window() -> None:
    emoji = _turns(40, 1_000, "😀")  # 4 bytes a character
    window = trim_window(emoji)
    assert window_bytes(window) <= WINDOW_BYTES and len(window) < 10


def test_a_single_message_bigger_than_the_window_is_not_kept() -> None:
    assert trim_window(_turns(1, 30_000)) == []


def test_least_recently_used_sessions_are_paged_out_until_the_rest_fit() -> None:
    windows = {f"s{i}": trim_window(_turns(40, 600)) for i in range(20)}
    last_active = {f"s{i}": T0 + timedelta(minutes=i) for i in range(20)}
    out = sessions_to_page_out(windows, last_active, keep={"s0"})
    assert "s0" not in out  # the session being used stays
    assert out[0] == "s1"  # then oldest first
    rest = sum(window_bytes(w) for sid, w in windows.items() if sid not in out)
    assert rest <= STATE_WINDOW_BYTES
    assert sessions_to_page_out({"a": _turns(2)}, {"a": T0}) == []


def test_idle_sessions_close_and_too_many_open_close_oldest_first() -> None:
    last_active = {"old": T0, "new": T0 + SESSION_IDLE_TTL, "kept": T0}
    now = T0 + SESSION_IDLE_TTL + timedelta(minutes=1)
    assert sessions_to_close(last_active, now, keep={"kept"}) == ["old"]
    many = {f"s{i:03}": T0 + timedelta(seconds=i) for i in range(250)}
    closed = sessions_to_close(many, T0 + timedelta(minutes=5), max_open=200)
    assert closed == [f"s{i:03}" for i in range(50)]


def test_the_next_idle_deadline_is_the_oldest_activity_plus_the_ttl() -> None:
    assert next_idle_deadline({}) is None
    assert next_idle_deadline({"a": T0, "b": T0 + timedelta(hours=1)}) == T0 + SESSION_IDLE_TTL


def test_a_window_is_measured_as_the_json_it_travels_as():
    """Control characters are six bytes each as JSON: a window within its budget counted in
    UTF-8 was six times it in the entity's state (2.2 MB, the handover refused for good)."""
    from pydantic_core import to_json

    at = datetime(2026, 1, 1, tzinfo=UTC)
    escaped = [ChatMessage(role="assistant", content="\x1b" * 3_000, timestamp=at)] * 40
    kept = trim_window(escaped)
    assert kept and len(to_json([m.content for m in kept])) <= WINDOW_BYTES
    assert len(kept) == WINDOW_BYTES // (6 * 3_000 + 2 + MESSAGE_OVERHEAD_BYTES)
