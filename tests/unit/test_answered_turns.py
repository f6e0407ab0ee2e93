"""The chat turns the agent entity remembers answering (reactive_temporal.answered_turns)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from reactive_temporal.answered_turns import (
    KEEP_BYTES,
    KEEP_FOR,
    KEEP_TURNS,
    answered_before,
    recent,
    remember,
)
from reactive_temporal.contracts.entity import AgentState, AnsweredTurn, ChatReply
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.limits import REPLY_CONTENT_MAX_CHARS

NOON = datetime(2026, 12, 3, 12, tzinfo=UTC)


def reply(text: str) -> ChatReply:
    return ChatReply(message=text, routed_via="direct-llm", tokens=7)


def answered(count: int, *, every: timedelta = timedelta(seconds=1)) -> list[AnsweredTurn]:
    turns: list[AnsweredTurn] = []
    for i in range(count):
        turns = remember(turns, f"turn-{i}", reply(f"reply {i}"), NOON + i * every)
    return turns


def test_a_turn_answered_before_gets_its_reply_and_a_new_one_none():
    turns = answered(3)
    assert answered_before(turns, "turn-1") == reply("reply 1")
    assert answered_before(turns, "turn-9") is None
    assert answered_before([], "turn-1") is None


def test_replies_are_kept_newest_last():
    assert [t.update_id for t in answered(3)] == ["turn-0", "turn-1", "turn-2"]


def test_replies_older_than_the_window_are_forgotten():
    turns = answered(2)
    later = NOON + timedelta(seconds=1) + KEEP_FOR + timedelta(seconds=1)
    kept = remember(turns, "late", reply("late"), later)
    assert [t.update_id for t in kept] == ["late"]
    assert [t.update_id for t in remember(turns, "soon", reply("x"), NOON + KEEP_FOR)] == [
        "turn-0",
        "turn-1",
        "soon",
    ]


def test_at_most_so_many_replies_are_kept():
    turns = answered(KEEP_TURNS + 5, every=timedelta(milliseconds=10))
    assert len(turns) == KEEP_TURNS
    assert turns[-1].update_id == f"turn-{KEEP_TURNS + 4}"
    assert answered_before(turns, "turn-4") is None


def test_the_replies_kept_fit_their_byte_budget_and_the_newest_is_kept_whatever_its_size():
    big = "é" * (REPLY_CONTENT_MAX_CHARS // 4)  # two bytes a character: 32,000 bytes
    turns: list[AnsweredTurn] = []
    for i in range(5):
        turns = remember(turns, f"big-{i}", reply(big), NOON + timedelta(seconds=i))
    state = AgentState(agent=AgentConfig(agent_id="a", model="m"), answered_turns=turns)
    assert len(state.model_dump_json(include={"answered_turns"}).encode()) <= KEEP_BYTES
    assert [t.update_id for t in turns] == ["big-2", "big-3", "big-4"]
    huge = "é" * (KEEP_BYTES // 2 + 1)  # over the budget alone
    assert [t.update_id for t in remember(turns, "huge", reply(huge), NOON)] == ["huge"]


def test_a_run_carries_only_the_recent_replies_to_the_next():
    turns = answered(3, every=KEEP_FOR / 2)  # at noon, +1 min, +2 min
    assert [t.update_id for t in recent(turns, NOON + KEEP_FOR)] == ["turn-0", "turn-1", "turn-2"]
    assert [t.update_id for t in recent(turns, NOON + KEEP_FOR * 1.5)] == ["turn-1", "turn-2"]
    assert recent(turns, NOON + KEEP_FOR * 3) == []


def test_replies_are_remembered_within_their_budget_as_json():
    """32 replies of 20,000 control characters: 640 KB of UTF-8 passed a 128 KB budget
    counted that way (the newest alone was 20 KB), and 3.8 MB of JSON went into the state."""
    from pydantic_core import to_json

    turns: list[AnsweredTurn] = []
    for i in range(KEEP_TURNS):
        reply = ChatReply(message="\x1b" * 20_000, session_id="s", routed_via="direct-llm")
        turns = remember(turns, f"u{i}", reply, NOON)
    assert len(to_json([t.model_dump() for t in turns])) <= KEEP_BYTES
    assert [t.update_id for t in turns][-1] == f"u{KEEP_TURNS - 1}"
