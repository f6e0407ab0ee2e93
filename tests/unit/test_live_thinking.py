"""A reasoning model's thinking told from its answer in a run's live output: split as the
reply streams from its raw text deltas (tags cut across deltas, a `</think>` the chat
template opened, Magistral's `[THINK]`), or sent apart by its endpoint; a retried call shown
once; and printed by `watch` apart from the answer."""

from __future__ import annotations

import asyncio
import io
import json
import random

import pytest

from activities.llm_stream import StreamedReply
from activities.text_stream import LIVE_THINKING_CUT, LIVE_THINKING_MAX_CHARS, TextStream
from reactive_temporal.cli.live_view import THINKING_GUTTER, LivePrinter
from reactive_temporal.contracts.events import NewEvent, RunEvent
from reactive_temporal.live_output import Shown, TextFold
from reactive_temporal.thinking import split_thinking, thinking_so_far
from tests.support.live_text import cuts, folded, view

REPLIES = [
    "<think>The user wants 2+2.\nCheck with the tool.\n</think>\n\nLet me compute.",
    "Two and two.\n</think>\n\nChecking.",  # the template opened the block
    "Two and two.\n  </THINK>  \nChecking.",
    "A line that says </think> is the answer's own words.",
    "[THINK]Magistral thinks here.[/THINK]The answer.",
    "  <thinking>Padded.</thinking>  Answer with trailing space.  ",
    "Quoting <think> then\n</think>\nstill the answer",
    "<think>Cut off while thinking, never closed",
    "<think></think>Only an answer.",
    "Plain answer, no thinking at all.\nTwo lines.",
    "Thinking that ends the reply.\n</think>",
    "<",
    "   ",
    "",
]


def as_split(text: str) -> tuple[str, str]:
    thinking, answer = split_thinking(text)
    return thinking or "", answer or ""


@pytest.mark.parametrize("reply", REPLIES)
def test_the_view_of_a_streamed_reply_ends_as_split_thinking_reads_it(reply: str) -> None:
    rng = random.Random(reply)
    for _ in range(30):
        shown, _ = folded([(1, piece) for piece in cuts(reply, rng)])
        assert view(shown) == as_split(reply)
        restarts = [piece for piece in shown if piece.restart]
        if "Two and two" not in reply and "ends the reply" not in reply:
            assert restarts == []  # only a block the template opened goes back on itself


def test_a_tag_cut_across_deltas_never_shows_a_piece_of_it() -> None:
    shown, _ = folded([(1, "<thi"), (1, "nk>Hmm, 2+2.</th"), (1, "ink>\n\n4")])
    assert shown == [Shown("Hmm, 2+2.", True), Shown("4", False)]
    shown, _ = folded([(1, "[TH"), (1, "INK]Hmm.[/TH"), (1, "INK]4")])
    assert shown == [Shown("Hmm.", True), Shown("4", False)]


def test_a_lone_closing_tag_the_template_opened_turns_the_answer_so_far_to_thinking() -> None:
    shown, _ = folded([(1, "Two and two.\n</th"), (1, "ink>"), (1, "\n\nFour.")])
    assert shown == [
        Shown("Two and two.\n", False),  # shown as the answer until the tag's line ended
        Shown("Two and two.", True, restart=True),
        Shown("Four.", False),
    ]


def test_a_closing_tag_inside_a_line_is_the_answer_s_own_words() -> None:
    shown, _ = folded([(1, "Say </th"), (1, "ink> to end"), (1, " thinking.")])
    assert view(shown) == ("", "Say </think> to end thinking.")
    assert not any(piece.thinking or piece.restart for piece in shown)
    # on a line of its own, but its line goes on: words too
    shown, _ = folded([(1, "Quote:\n</think>"), (1, " is a tag")])
    assert view(shown) == ("", "Quote:\n</think> is a tag")
    assert not any(piece.restart for piece in shown)


def test_a_reply_that_ends_on_a_lone_closing_tag_is_read_when_the_step_ends() -> None:
    fold = TextFold()
    assert fold.take(3, 1, 0, "Only thoughts.\n</think>") == [Shown("Only thoughts.\n", False)]
    assert fold.settle(besides=3) == []  # the reply goes on: nothing settled yet
    assert fold.settle(besides=4) == [(3, Shown("Only thoughts.", True, restart=True))]
    assert fold.settle() == []


def test_a_retried_call_streaming_the_same_reply_shows_each_character_once() -> None:
    reply = "<think>Think it over.</think>\n\nThe answer is 42."
    first, second = reply[:30], reply
    shown, _ = folded([(1, first[:12]), (1, first[12:]), (2, second[:5]), (2, second[5:40]),
                       (2, second[40:])])  # fmt: skip
    assert view(shown) == ("Think it over.", "The answer is 42.")
    assert not any(piece.restart for piece in shown)
    assert "".join(p.text for p in shown) == "Think it over.The answer is 42."


def test_a_retry_that_thinks_differently_restarts_the_step() -> None:
    shown, _ = folded(
        [(1, "<think>Maybe 41.</think>\n41"), (2, "<think>Check: 42."), (2, "</think>\n42")]
    )
    assert view(shown) == ("Check: 42.", "42")
    assert [p for p in shown if p.restart] == [Shown("Check: 42.", True, restart=True)]


def test_thinking_sent_apart_comes_first_and_is_trimmed_as_the_record_keeps_it() -> None:
    fold = TextFold()
    shown = fold.take(1, 1, 0, " The calculator ", thinking=True)
    shown += fold.take(1, 1, 16, "agrees. ", thinking=True)
    shown += fold.take(1, 1, 0, "FINAL ANSWER: 4")
    assert shown == [
        Shown("The calculator", True),
        Shown(" agrees.", True),
        Shown("FINAL ANSWER: 4", False),
    ]


def test_the_view_so_far_only_grows_but_for_a_block_the_template_opened() -> None:
    for reply in REPLIES:
        views = [thinking_so_far(reply[:i]) for i in range(len(reply) + 1)]
        views.append(thinking_so_far(reply, ended=True))
        for before, after in zip(views, views[1:], strict=False):
            grows = after[0].startswith(before[0]) and after[1].startswith(before[1])
            assert grows or "</think>" in reply.lower(), (reply, before, after)


def event(**fields: object) -> RunEvent:
    return RunEvent.model_validate({"type": "text", "run_id": "run-1", "step": 2, **fields})


def printed(*events: RunEvent, terminal: bool = False, hide_thinking: bool = False) -> str:
    out = io.StringIO()
    out.isatty = lambda: terminal  # type: ignore[method-assign]
    printer = LivePrinter(out, hide_thinking=hide_thinking)
    for e in events:
        printer.show(e)
    return out.getvalue()


def test_watch_prints_thinking_behind_a_gutter_and_the_answer_after_it() -> None:
    text = printed(
        event(delta="The user wants", thinking=True),
        event(delta=" 2+2.\nUse the tool.", thinking=True),
        event(delta="Let me compute."),
        RunEvent(type="iteration", run_id="run-1", iteration=2),
    )
    assert text.splitlines() == [
        f"{THINKING_GUTTER}The user wants 2+2.",
        f"{THINKING_GUTTER}Use the tool.",
        "Let me compute.",
        "── iteration 2 ──",
    ]
    styled = printed(event(delta="Hmm.", thinking=True), event(delta="4"), terminal=True)
    assert styled == f"{THINKING_GUTTER}\x1b[2;3mHmm.\x1b[0m\n4"


def test_watch_says_so_when_the_answer_shown_was_thinking_the_template_opened() -> None:
    text = printed(
        event(delta="Two and two.\n"),
        event(delta="Two and two.", thinking=True, restart=True),
        event(delta="Four."),
    )
    assert text.splitlines() == [
        "Two and two.",
        "↑ (that was the model's thinking: the chat template had opened it)",
        "Four.",
    ]
    retried = printed(
        event(delta="<think>", thinking=None),
        event(delta="Another thought.", thinking=True, restart=True),
    )
    assert "↻ (the model's reply restarted after a retry)" in retried


def test_watch_hide_thinking_says_once_a_step_that_the_model_thinks() -> None:
    """`watch --hide-thinking`: a minute of silence read as a hung model; the thinking's
    text, pages of it, was more than an operator follows."""
    text = printed(
        event(delta="The user wants", thinking=True),
        event(delta=" 2+2.\nUse the tool.", thinking=True),
        event(delta="Let me compute."),
        RunEvent(type="iteration", run_id="run-1", iteration=2),
        event(delta="Now the answer.", thinking=True, step=4),
        event(delta="4", step=4),
        hide_thinking=True,
    )
    assert text.splitlines() == [
        f"{THINKING_GUTTER}(the model thinks…)",
        "Let me compute.",
        "── iteration 2 ──",
        f"{THINKING_GUTTER}(the model thinks…)",
        "4",
    ]


def test_json_lines_carry_the_thinking_marker() -> None:
    out = io.StringIO()
    LivePrinter(out, json_lines=True).show(event(delta="Hmm.", thinking=True, offset=4))
    assert json.loads(out.getvalue()) == {
        "type": "text", "run_id": "run-1", "offset": 4, "step": 2, "delta": "Hmm.",
        "thinking": True,
    }  # fmt: skip


def test_thinking_sent_apart_streams_with_its_own_positions_and_bound() -> None:
    reply = StreamedReply()
    added = reply.merge({"choices": [{"index": 0, "delta": {"reasoning_content": "Hmm"}}]})
    assert (added.text, added.thinking) == ("", "Hmm")
    added = reply.merge({"choices": [{"index": 0, "delta": {"reasoning": ", 4", "content": ""}}]})
    assert (added.text, added.thinking) == ("", ", 4")

    class Written:
        def __init__(self) -> None:
            self.events: list[NewEvent] = []

        async def try_append(self, run_id: str, events: list[NewEvent]) -> None:
            self.events += events

    async def stream() -> list[NewEvent]:
        written = Written()
        text = TextStream(written, "run-x", 1, 2, write_interval=0, first_after=0)  # type: ignore[arg-type]
        for _ in range(70):
            text.add_thinking("y" * 1_000)
            await asyncio.sleep(0)
        text.add("The answer.")
        await text.close()
        return written.events

    events = asyncio.run(stream())
    thinking = [e for e in events if e.data.get("thinking")]
    answer = [e for e in events if not e.data.get("thinking")]
    assert "".join(e.data["delta"] for e in thinking) == (
        "y" * LIVE_THINKING_MAX_CHARS + LIVE_THINKING_CUT
    )
    assert [e.position for e in thinking] == sorted(e.position for e in thinking)
    assert [(e.position, e.data) for e in answer] == [(0, {"delta": "The answer.", "attempt": 2})]
    assert all(e.type == "text" and e.data["attempt"] == 2 for e in events)
