"""Llama's bare JSON tool call in a run's live output: for a model whose calls are read from
its text, a reply that may still become the call object is held back whole, wherever the
deltas cut it; once it can no longer be one, or the reply has ended and its record read no
call, it is shown, once. And a step that learns mid-way that its model's calls are read from
its text marks the deltas it writes from then on."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from activities.text_stream import TextStream
from reactive_temporal.bare_calls import UNREAD, bare_call_scan, bare_call_shaped, may_be_bare_call
from reactive_temporal.contracts.events import NewEvent
from reactive_temporal.live_output import Shown, TextFold, calls_held_back
from reactive_temporal.text_calls import CALL_MARKERS, read_calls
from tests.support.hostile import json_texts, json_values
from tests.support.live_text import view

CALL = json.dumps({"name": "calculator", "parameters": {"expression": "6*7"}})


def folded(deltas: list[str], *, calls_only: bool = False, ended: bool = True) -> list[Shown]:
    """What a fold shows of one step's deltas (a model whose calls are read from its text),
    its last saying the record read the reply as calls only when `calls_only`; then, when
    `ended`, the reply read as ended."""
    fold, shown, position = TextFold(), list[Shown](), 0
    for n, delta in enumerate(deltas):
        said = calls_only and n == len(deltas) - 1
        shown += fold.take(1, 1, position, delta, calls_in_text=True, calls_only=said)
        position += len(delta)
    return shown + ([piece for _, piece in fold.settle()] if ended else [])


def answer_of(shown: list[Shown]) -> str:
    """The answer a watcher ends up seeing, shown once: never taken back."""
    assert not any(piece.restart for piece in shown)
    return view(shown)[1]


@pytest.mark.parametrize(
    "reply",
    [
        CALL,
        f"  \n{CALL}\n",
        json.dumps({"parameters": {"a": [1, {"b": "}"}]}, "name": "calculator"}, indent=2),
        '{"name": "calculator", "arguments": "{\\"expression\\": \\"6*7\\"}"}',
        '{"name": "final-answer", "parameters": {"output": "{\\"a\\": 1}", "format": "json"}}',
        '{"na\\u006de": "calculator"}',
        f"<think>Use the tool.</think>\n{CALL}",
    ],
)
def test_a_bare_call_cut_anywhere_never_shows_a_piece_of_it(reply: str) -> None:
    for cut in range(len(reply) + 1):
        for deltas in ([reply[:cut], reply[cut:]], [reply[:cut], *reply[cut:]]):
            shown = folded([d for d in deltas if d], calls_only=True)
            assert answer_of(shown) == "", (cut, deltas)


@pytest.mark.parametrize(
    ("reply", "known_at"),
    [
        ('{"result": 42, "why": "6 times 7"}', '{"r'),  # a key no call has
        ('{"name": "Ada", "age": 36}', '{"name": "Ada", "ag'),  # `a` may be `arguments`
        (f"{CALL} is how I would call it.", f"{CALL} i"),  # words after the object
        ('{"name": "calculator", "parameters": [6, 7]}', None),  # no object for arguments
        ('{"name": "  ", "parameters": {}}', None),  # no name
        ("{}", None),
        ('{name: "calculator"}', "{n"),  # not JSON
        ("[1, 2]", "["),  # a list is never read as a bare call
        ("The answer is 42.", "T"),
    ],
)
def test_json_that_can_no_longer_be_a_call_is_shown_from_then_on(
    reply: str, known_at: str | None
) -> None:
    """From the first text that tells, it shows as it comes (`known_at`; None: once the
    object closes), and once the reply has ended, whole."""
    told = len(known_at) if known_at is not None else len(reply)
    assert may_be_bare_call(reply[: told - 1]) and not may_be_bare_call(reply[:told])
    for cut in range(len(reply) + 1):
        assert answer_of(folded([d for d in (reply[:cut], reply[cut:]) if d])) == reply
        streamed = answer_of(folded([reply[:cut]], ended=False))
        if cut < told:
            assert streamed == "", cut
        else:  # as it comes (a `[` or a `<` held until the next delta tells)
            assert streamed in (reply[:cut], reply[:cut].rstrip("[<")), cut


def test_a_call_the_record_did_not_make_is_shown_once_the_reply_ends() -> None:
    """A call's shape naming a tool the step did not offer is the model's words (the record
    keeps them): held while it streams, shown whole once the reply has ended."""
    fold = TextFold()
    streamed = fold.take(1, 1, 0, CALL[:10], calls_in_text=True)
    streamed += fold.take(1, 1, 10, CALL[10:], calls_in_text=True)
    assert streamed == []
    assert [p.text for _, p in fold.settle()] == [CALL]


def test_the_record_saying_calls_only_hides_the_reply_whatever_its_format() -> None:
    assert calls_held_back(CALL, ended=True) == CALL
    assert calls_held_back(CALL, ended=True, calls_only=True) == ""
    assert calls_held_back(CALL[:-1]) == ""
    assert calls_held_back("") == "" and calls_held_back(" \n") == ""
    assert calls_held_back(" \nHi") == " \nHi"


@given(st.data())
def test_any_split_of_the_stream_shows_the_same_text(data: st.DataObject) -> None:
    """However the reply is cut into deltas, the watcher ends up with the same answer; a
    call the record read is never shown, not a piece of it."""
    kind = data.draw(st.sampled_from(["call", "json", "words"]))
    if kind == "call":
        arguments = data.draw(st.dictionaries(st.text(max_size=8), json_values, max_size=3))
        call = {"name": "calculator", "parameters": arguments}
        reply = data.draw(st.sampled_from(["", " ", "\n"])) + json.dumps(call)
    else:
        reply = data.draw(json_texts() if kind == "json" else st.text(max_size=60))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(reply)), max_size=12)))
    deltas = [reply[a:b] for a, b in zip([0, *cuts], [*cuts, len(reply)], strict=True)]
    shown = folded([d for d in deltas if d] or [""], calls_only=kind == "call")
    assert view(shown) == view(folded([reply], calls_only=kind == "call"))
    if kind == "call":
        assert not any(piece.text for piece in shown)


@given(json_values, st.sampled_from(["", " ", "\n  "]), st.booleans())
def test_every_prefix_of_a_call_the_reader_makes_is_held(
    parameters: object, lead: str, indent: bool
) -> None:
    """What `text_calls` reads as a bare call (its tool offered) may be one at every prefix:
    the live output never shows a piece of one, escapes and spacing as they come."""
    call = {"name": "calculator", "parameters": parameters}
    for ensure_ascii in (True, False):
        reply = lead + json.dumps(call, indent=2 if indent else None, ensure_ascii=ensure_ascii)
        read = read_calls(reply, {"calculator": "calculator"}, id_prefix="t")
        made = read is not None and bool(read.calls) and read.before is None
        shaped = bare_call_shaped(json.loads(reply))
        if not any(m in reply for m in (*CALL_MARKERS, "<|channel|>", "commentary")):
            assert made == shaped, reply  # else a marker inside may be read first
        if made:
            assert shaped
            assert all(may_be_bare_call(reply[:n]) for n in range(len(reply) + 1)), reply


@given(json_texts())
@example('{"0\\')  # a key no call has, then an escape: still none
def test_once_no_call_a_longer_text_is_none_either(reply: str) -> None:
    """What is shown only grows: a text that can no longer be a call stays so."""
    step = max(1, len(reply) // 40)
    verdicts = [may_be_bare_call(reply[:n]) for n in [*range(0, len(reply), step), len(reply)]]
    assert verdicts == sorted(verdicts, reverse=True)


@given(json_texts() | st.text(max_size=40), st.lists(st.integers(0, 200), max_size=12))
@example('{"0\\', [3, 4])
def test_a_reply_read_as_it_grows_reads_as_it_does_whole(reply: str, cuts: list[int]) -> None:
    """The fold reads each answer once as it grows (`bare_call_scan` goes on from where it
    stopped): at every delta, the verdict of the whole text so far."""
    scan = UNREAD
    for end in sorted({min(c * max(1, len(reply) // 100), len(reply)) for c in cuts}):
        verdict, scan = bare_call_scan(reply[:end], scan)
        assert verdict == may_be_bare_call(reply[:end]), end
    other = " " + reply  # a text that is not the one read: read anew
    assert bare_call_scan(other, scan)[0] == may_be_bare_call(other)


class Written:
    """A stand-in for `RunEvents`: what a stream writes, kept."""

    def __init__(self) -> None:
        self.events: list[NewEvent] = []

    async def try_append(self, run_id: str, events: list[NewEvent]) -> None:
        self.events += events


def test_the_record_s_word_rides_on_the_last_text_delta_when_there_is_one() -> None:
    async def stream() -> list[NewEvent]:
        text = TextStream(None, "run-x", 1, 1, calls_in_text=True)  # type: ignore[arg-type]
        text.add_thinking("Hmm.")
        text.add(CALL)
        await text.close(write=False)
        assert text.last_of_reply() == text.last  # not read as calls only: as it was
        return text.last_of_reply(calls_only=True)

    last = asyncio.run(stream())
    assert [e.data.get("calls_only") for e in last] == [None, True]


def test_with_no_text_left_the_record_s_word_is_an_empty_delta_at_the_reply_s_end() -> None:
    async def stream() -> tuple[list[NewEvent], list[NewEvent]]:
        written = Written()
        text = TextStream(
            written,  # type: ignore[arg-type]
            "run-x", 1, 1, write_interval=0, first_after=0, calls_in_text=True,
        )  # fmt: skip
        text.add(CALL)
        await asyncio.sleep(0.01)  # written: nothing is left for the record's write
        await text.close(write=False)
        return written.events, text.last_of_reply(calls_only=True)

    written, last = asyncio.run(stream())
    assert [e.data["delta"] for e in written] == [CALL]
    assert [(e.position, e.data) for e in last] == [
        (len(CALL), {"delta": "", "attempt": 1, "calls_in_text": True, "calls_only": True})
    ]
    fold = TextFold()
    for event in [*written, *last]:
        data = event.data
        assert fold.take(1, 1, event.position, data["delta"], calls_in_text=True,
                         calls_only=data.get("calls_only") is True) == []  # fmt: skip
    assert fold.settle() == []


def test_a_step_that_learns_mid_way_marks_its_deltas_from_then_on() -> None:
    learned = [False]

    async def stream() -> list[NewEvent]:
        written = Written()
        text = TextStream(
            written,  # type: ignore[arg-type]
            "run-x", 1, 1, write_interval=0, first_after=0, calls_in_text=lambda: learned[0],
        )  # fmt: skip
        text.add("Refused: ")
        await asyncio.sleep(0.01)  # written, unmarked (nothing learned yet)
        learned[0] = True
        text.add(CALL)
        await text.close()
        return written.events

    said = [(e.data["delta"], e.data.get("calls_in_text")) for e in asyncio.run(stream())]
    assert said == [("Refused: ", None), (CALL, True)]
