"""The live output's fold reads each delta once: its cost per delta is the delta's, not the
reply's so far (a 600 kB reply, folded anew at each of its 20-character deltas, cost a
watcher 102 s of CPU). Told without timing, by the characters its readers are given; and
whatever the split, long replies (past the lead that settles how a reply reads) are shown
exactly as reading the whole text at each delta showed them."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from reactive_temporal import bare_calls, live_output, thinking
from reactive_temporal.bare_calls import may_be_bare_call
from reactive_temporal.live_output import Shown, TextFold, calls_held_back
from reactive_temporal.thinking import thinking_so_far

SIZE = 200_000


def call_reply(size: int) -> str:
    """A bare call whose one argument is `size` characters: a file written whole."""
    body = ("lorem ipsum dolor sit amet, \\n \\\\ \\u00e9 " * (size // 40 + 1))[:size]
    return '{"name": "write_file", "parameters": {"path": "a.txt", "content": "' + body + '"}}'


def prose_reply(size: int) -> str:
    line = "The quick brown fox jumps over the lazy dog; [1] a < b.\n"
    return (line * (size // len(line) + 1))[:size]


def fold_in(text: str, size: int, *, calls_in_text: bool) -> list[Shown]:
    fold, shown, at, rng = TextFold(), list[Shown](), 0, random.Random(7)
    while at < len(text):
        end = at + rng.randint(15, size)
        shown += fold.take(1, 1, at, text[at:end], calls_in_text=calls_in_text)
        at = end
    return shown + [piece for _, piece in fold.settle()]


class Counted:
    """The characters given to the fold's readers of a reply's text, from where each reads."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.chars = 0
        whole = thinking.thinking_so_far
        monkeypatch.setattr(thinking, "thinking_so_far", self.counting(whole, lambda t: len(t)))
        monkeypatch.setattr(live_output, "thinking_so_far", self.counting(whole, len))
        monkeypatch.setattr(
            bare_calls, "_walk", self.counting(bare_calls._walk, lambda t, at, *_: len(t) - at)
        )
        rest = getattr(bare_calls, "_STRING_REST", None)
        if rest is not None:
            monkeypatch.setattr(bare_calls, "_STRING_REST", self.Pattern(self, rest))
        marker = getattr(live_output, "first_marker", None)
        if marker is not None:
            read: Callable[..., int] = lambda a, since=(-1, 0): len(a) - since[1]  # noqa: E731
            monkeypatch.setattr(live_output, "first_marker", self.counting(marker, read))

    def counting(self, reader: Callable[..., Any], chars: Callable[..., int]) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.chars += max(chars(*args), 0)
            return reader(*args, **kwargs)

        return counted

    class Pattern:
        def __init__(self, counted: Counted, pattern: Any) -> None:
            self.counted, self.pattern = counted, pattern

        def match(self, text: str, at: int) -> Any:
            self.counted.chars += len(text) - at
            return self.pattern.match(text, at)


@pytest.mark.parametrize("calls_in_text", [True, False])
@pytest.mark.parametrize("reply", [call_reply(SIZE), prose_reply(SIZE)], ids=["call", "prose"])
def test_a_long_reply_is_read_about_once(
    monkeypatch: pytest.MonkeyPatch, reply: str, calls_in_text: bool
) -> None:
    counted = Counted(monkeypatch)
    fold_in(reply, 20, calls_in_text=calls_in_text)
    # the reply read as ended (once, whole: `settle`) and each delta with a few characters
    # of look-behind; read anew at each delta, it was about len²/40: 10⁹ characters
    assert counted.chars <= 4 * len(reply), counted.chars


class WholeFold(TextFold):
    """The fold as it was: each reply's whole text read at each delta (the reference)."""

    def _view(self, step: int, attempt: int, *, ended: bool = True) -> tuple[str, str]:
        apart = self._attempts.get((step, attempt, True), "").strip()
        text = self._attempts.get((step, attempt, False), "")
        thought, answer = thinking_so_far(text, ended=ended)
        if (step, attempt) in self._calls_in_text:
            bare = None if ended else may_be_bare_call(answer)
            calls_only = (step, attempt) in self._calls_only
            answer = calls_held_back(answer, ended=ended, calls_only=calls_only, bare=bare)
        return "\n\n".join(t for t in (apart, thought) if t), answer


PIECES = [
    "a", "K", "\u212a", "İ", " ", "\t", "\n", "<", "/", "[", "]", "think", "THINK", "<think>",
    "</think>", "[/THINK]", "</", "[/", "<tool_call>", "[TOOL_CALLS]", "<|python_tag|>",
    "{", "}", '"', "\\", ":", ",", '"name"', '"parameters"', "<|channel|>", "analysis",
]  # fmt: skip
LEADS = [
    "x" * 300,
    " \n" + "Words " * 60,
    '{"name": "write_file", "parameters": {"content": "' + "w" * 300,
    '{"name": "write_file", "parameters": {"content": "' + "\\" * 301,
    "<think>" + "t" * 300,
    "</think>\n" + "y" * 300,
]


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(LEADS),
    st.lists(st.sampled_from(PIECES), max_size=60),
    st.lists(st.integers(1, 12), min_size=1, max_size=40),
    st.booleans(),
    st.integers(0, 400),
)
@example("x" * 300, ["\n", "<", "a"], [301, 1, 1], False, 400)  # a line that may be </think>
@example("x" * 300, ["ab ", "<tool_call>", "{}"], [305, 20], True, 400)  # a marker cut
def test_a_long_reply_shows_what_reading_it_whole_showed(
    lead: str, pieces: list[str], sizes: list[int], calls_in_text: bool, retried_at: int
) -> None:
    """Every split, and a call retried part-way that streams its reply again from the start
    (read anew, not on from where the first try was)."""
    text = lead + "".join(pieces) + json.dumps("end")[:2]
    folds: tuple[TextFold, TextFold] = (TextFold(), WholeFold())
    at, n, retried = 0, 0, False
    while at < len(text):
        end = at + sizes[n % len(sizes)]
        new, old = (f.take(1, 1, at, text[at:end], calls_in_text=calls_in_text) for f in folds)
        assert new == old, (at, end)
        at, n = end, n + 1
        if at >= retried_at and not retried:
            at, retried, text = 0, True, text[: retried_at // 2] + "".join(reversed(pieces)) + text
    assert folds[0].settle() == folds[1].settle()
