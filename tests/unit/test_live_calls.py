"""A tool call a model writes into its text, in a run's live output: for a model whose calls
are read from its text (`calls_in_text`), the words before the block stream as its answer and
nothing of the block ever does, wherever the deltas cut it (the call shows as the tool step it
becomes); a model whose calls are not read from its text is shown as it wrote. And a reply
whose calls could not be read is counted."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from activities.reply_calls import ReadReply
from activities.reply_notes import note_reply
from activities.text_stream import TextStream
from reactive_temporal.contracts.events import NewEvent
from reactive_temporal.live_output import TextFold, calls_held_back
from tests.support.live_text import adaptations, folded, view

CALL = json.dumps({"name": "calculator", "arguments": {"expression": "6*7"}})
CALLS = [
    # (reply, its answer as the record keeps it, its thinking)
    (f"I will multiply.\n<tool_call>\n{CALL}\n</tool_call>", "I will multiply.", ""),
    (f"<tool_call>{CALL}</tool_call>\n<tool_call>{CALL}</tool_call>", "", ""),
    ('Let me.\n<tool_call>\n{name: "calculator"}\n</tool_call>', "Let me.", ""),  # unread
    ('Cut off <tool_call>\n{"name": "calculator", "argu', "Cut off", ""),
    (f"Mistral says [TOOL_CALLS][{CALL}]", "Mistral says", ""),
    ('[TOOL_CALLS]calculator[ARGS]{"expression": "6*7"}', "", ""),
    (f"Llama: <|python_tag|>{CALL}", "Llama:", ""),
    (f"<think>6*7: use the tool.</think>\nOn it.\n<tool_call>{CALL}</tool_call>", "On it.",
     "6*7: use the tool."),
]  # fmt: skip


@pytest.mark.parametrize(("reply", "answer", "thinking"), CALLS)
def test_a_call_block_cut_anywhere_never_shows_a_piece_of_it(
    reply: str, answer: str, thinking: str
) -> None:
    for cut in range(len(reply) + 1):
        for deltas in ([reply[:cut], reply[cut:]], [reply[:cut], *reply[cut:]]):
            shown, _ = folded([(1, d) for d in deltas if d], calls_in_text=True)
            seen_thinking, seen_answer = view(shown)
            assert (seen_thinking, seen_answer.rstrip()) == (thinking, answer), (cut, deltas)
            assert not any(piece.restart for piece in shown)


@pytest.mark.parametrize(("reply", "answer", "thinking"), CALLS)
def test_a_model_whose_calls_are_not_read_from_its_text_is_shown_as_it_wrote(
    reply: str, answer: str, thinking: str
) -> None:
    for cut in range(len(reply) + 1):
        shown, _ = folded([(1, d) for d in (reply[:cut], reply[cut:]) if d])
        seen_thinking, seen_answer = view(shown)
        assert seen_thinking == thinking
        assert "calculator" in seen_answer


def test_the_words_before_the_block_stream_as_they_come() -> None:
    fold = TextFold()
    deltas = ["I will", " multiply.\n<", "tool_c", 'all>\n{"name"', ": 1}</tool_call>"]
    shown, position = [], 0
    for delta in deltas:
        shown.append("".join(p.text for p in fold.take(1, 1, position, delta, calls_in_text=True)))
        position += len(delta)
    assert shown == ["I will", " multiply.\n", "", "", ""]
    assert [p.text for _, p in fold.settle()] == []


def test_a_block_quoted_before_words_is_shown_once_the_reply_ends() -> None:
    """A block with words after it is quoted, not made (the record keeps it as words): held
    while it might be a call, shown whole when the reply has ended."""
    reply = f"Write <tool_call>{CALL}</tool_call> and it runs."
    fold = TextFold()
    streamed = fold.take(1, 1, 0, reply, calls_in_text=True)
    assert [p.text for p in streamed] == ["Write"]
    settled = [p for _, p in fold.settle()]
    assert [(p.text, p.restart) for p in settled] == [(reply[len("Write") :], False)]


def test_text_that_only_began_like_a_marker_is_shown_when_the_next_delta_tells() -> None:
    assert calls_held_back("See [") == "See "
    assert calls_held_back("See [1]") == "See [1]"
    assert calls_held_back("a <") == "a "
    assert calls_held_back("a < b") == "a < b"
    assert calls_held_back("[TOOL_CALLS] comes first", ended=True) == "[TOOL_CALLS] comes first"
    assert calls_held_back(f"  Hi <tool_call>{CALL}", ended=True) == "  Hi"
    assert calls_held_back(f"\n<tool_call>{CALL}", ended=True) == ""


def test_the_text_deltas_of_such_a_model_say_so() -> None:
    class Written:
        def __init__(self) -> None:
            self.events: list[NewEvent] = []

        async def try_append(self, run_id: str, events: list[NewEvent]) -> None:
            self.events += events

    async def stream(calls_in_text: bool) -> list[NewEvent]:
        written = Written()
        text = TextStream(
            written,  # type: ignore[arg-type]
            "run-x",
            1,
            1,
            write_interval=0,
            first_after=0,
            calls_in_text=calls_in_text,
        )
        text.add_thinking("Hmm.")
        text.add("Hi.")
        await text.close()
        return written.events

    said = {e.data["delta"]: e.data.get("calls_in_text") for e in asyncio.run(stream(True))}
    assert said == {"Hmm.": None, "Hi.": True}
    assert all("calls_in_text" not in e.data for e in asyncio.run(stream(False)))


def test_a_reply_whose_calls_could_not_be_read_is_counted_and_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = "unread-counted-model"
    read = ReadReply(content="Let me.", calls=[], unread_calls='<tool_call>{name: "x"}')
    with caplog.at_level(logging.WARNING):
        note_reply(model, "run-1", read, tools_in_prompt=True)
        note_reply(model, "run-2", read, tools_in_prompt=True)
        note_reply(model, "run-3", ReadReply(content="Fine.", calls=[]))
    assert adaptations(model, "unread_text_calls") == 2
    said = [r for r in caplog.records if "could not be read" in r.getMessage()]
    assert len(said) == 1 and model in said[0].getMessage()
