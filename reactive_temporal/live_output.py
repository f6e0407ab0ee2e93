"""Live output rules every reader of a run's events shares (pure, no I/O).

- `channel_for(run_id)`: the Postgres NOTIFY channel a run's writers signal and its
  watchers LISTEN on (one per run, so a watcher wakes only for its run);
- `TextFold`: turns the stored text deltas into what a person should see, each character
  of a reply once, its thinking told from its answer: a retried LLM call streams its reply
  again from the start, and the fold shows only what is new; if the retry's text differs
  from what was shown, it says so with a `restart` carrying the retry's text so far (and
  so when thinking the chat template opened turns out to be what was shown as the answer);
- `calls_held_back`: a reply's answer without the tool calls it writes in its text, for a
  model whose calls are read from there (`ModelCapabilities.calls_in_text`), Llama's bare
  JSON object, which no marker announces, included (`bare_calls`).
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

from reactive_temporal.bare_calls import UNREAD, BareScan, bare_call_scan, may_be_bare_call
from reactive_temporal.text_calls import CALL_MARKERS, without_text_calls
from reactive_temporal.thinking import PlainScan, thinking_so_far, thinking_so_far_from

CHANNEL_PREFIX = "rt_run_"


def channel_for(run_id: str) -> str:
    """`rt_run_` + 16 hex digits of the run id's SHA-256 (a Postgres identifier, any id)."""
    return CHANNEL_PREFIX + hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]


_LONGEST_MARKER = max(len(marker) for marker in CALL_MARKERS)


def calls_held_back(
    answer: str,
    *,
    ended: bool = False,
    calls_only: bool = False,
    bare: bool | None = None,
    marked: int | None = None,
) -> str:
    """What to show of the answer so far of a reply whose calls are read from its text.

    A call written in Hermes', Mistral's or Llama's format (`text_calls`) was shown as the
    model's answer while it streamed, JSON and all; the run's tool step shows the call. From
    the first marker on, nothing is shown while the reply streams, and text that may be a
    marker part-way is held until the next delta tells (as a harmony or a think tag is).
    Llama's bare JSON call has no marker: a reply that may still be one (`{` first, a call's
    keys so far: `bare_calls.may_be_bare_call`, or `bare` when worked out already) is held
    whole until it can no longer be.
    Once the reply has `ended`, it is the record's reading: nothing when the step's record
    read it as calls only (`calls_only`, which the writer says with the reply's last text:
    whether a bare object is a call depends on the tools the step offered, which only the
    record knew), else `text_calls.without_text_calls`: a block with words after it was
    quoted, and a bare object that was no call is the model's answer; both are shown then.
    Only for such a model: one whose calls are not read from its text may quote the format,
    and is shown as written. `marked`: where the first marker is (-1: none), when worked out
    already (`first_marker`)."""
    if ended:
        if calls_only:
            return ""
        kept = without_text_calls(answer) or ""
        lead = len(answer) - len(answer.lstrip())  # kept as it was shown while streaming
        return answer[:lead] + kept if kept and answer[lead:].startswith(kept) else kept
    if may_be_bare_call(answer) if bare is None else bare:
        return ""
    at = first_marker(answer)[0] if marked is None else marked
    if at >= 0:
        return answer[:at].rstrip()
    for size in range(min(_LONGEST_MARKER - 1, len(answer)), 0, -1):
        if any(marker.startswith(answer[-size:]) for marker in CALL_MARKERS):
            return answer[:-size]
    return answer


def first_marker(answer: str, since: tuple[int, int] = (-1, 0)) -> tuple[int, int]:
    """Where the first of CALL_MARKERS is in `answer` (-1: none), and how far it was read: a
    pair to go on from (`since`) for an answer that begins with the one it was read for,
    which then costs its new characters (a long reply was searched whole at each delta)."""
    at, read = since
    if at >= 0 or read > len(answer):
        found = at >= 0 and answer.startswith(CALL_MARKERS, at)  # the answer may be shorter
        return (at, read) if found else first_marker(answer)
    begin = max(0, read - _LONGEST_MARKER + 1)
    starts = [at for marker in CALL_MARKERS if (at := answer.find(marker, begin)) >= 0]
    return min(starts, default=-1), len(answer)


class Shown(NamedTuple):
    """A piece of a step's reply to show: appended to what was shown of the step, or, with
    `restart`, in place of all of it (the pieces that follow append to it again)."""

    text: str
    thinking: bool
    """The model's thinking, not its answer."""
    restart: bool = False


class TextFold:
    """What to show of each step's streamed reply, given its deltas in log order.

    Each step's view is its thinking, then its answer (`thinking_so_far` of its text, the
    thinking an endpoint sent apart first). The split is made here, on the reader's side,
    from the raw text deltas as stored: the writers stay as they were (one cheap append of
    whatever streamed), replies stored before the split existed read the same way, and the
    one case where the view goes back on itself (a `</think>` the template opened, seen after
    the thinking was shown as the answer) is a `restart`, which readers already handle for
    a retried call that answered differently. A step whose deltas say its model's calls are
    read from its text (`calls_in_text`) has its answer shown without them (`calls_held_back`;
    its last delta may say the record read the reply as calls only, `calls_only`).
    """

    def __init__(self) -> None:
        self._shown: dict[int, tuple[str, str]] = {}
        self._attempts: dict[tuple[int, int, bool], str] = {}
        self._latest: dict[int, int] = {}
        """Steps whose reply may still be read differently once it has ended: their attempt."""
        self._calls_in_text: set[tuple[int, int]] = set()
        """The (step, attempt)s whose model's calls are read from its text."""
        self._calls_only: set[tuple[int, int]] = set()
        """The (step, attempt)s whose record read the reply as calls only, no words."""
        self._bare: dict[tuple[int, int], BareScan] = {}
        """How far each (step, attempt)'s answer was read as a bare call may be (read once)."""
        self._plain: dict[tuple[int, int], PlainScan] = {}
        """How far each (step, attempt)'s text was read for thinking (`thinking_so_far_from`)."""
        self._marked: dict[tuple[int, int], tuple[int, int]] = {}
        """How far each (step, attempt)'s answer was searched for a call's marker."""

    def take(
        self,
        step: int,
        attempt: int,
        position: int,
        delta: str,
        *,
        thinking: bool = False,
        calls_in_text: bool = False,
        calls_only: bool = False,
    ) -> list[Shown]:
        """What to show for this delta (none when it shows nothing new yet); `thinking`: a
        delta of the thinking an endpoint sent apart from the text; `calls_in_text`: the
        model's calls are read from its text (`calls_held_back`); `calls_only`: the reply has
        ended, and its record read it as calls only."""
        if calls_in_text:
            self._calls_in_text.add((step, attempt))
        if calls_only:
            self._calls_only.add((step, attempt))
        key = (step, attempt, thinking)
        so_far = self._attempts.get(key, "")
        text = so_far[:position] + delta if position <= len(so_far) else so_far + delta
        self._attempts[key] = text
        if position < len(so_far) and not thinking:  # read anew, not on from where it was
            self._plain.pop((step, attempt), None)
            self._marked.pop((step, attempt), None)
        self._latest[step] = attempt
        return self._show(step, self._view(step, attempt, ended=False))

    def settle(self, *, besides: int | None = None) -> list[tuple[int, Shown]]:
        """Each step's last pieces, its reply read as ended (text held back while it might
        have been a tag part-way is shown now): for the steps but `besides`, whose reply a
        later event showed has ended, or all at the end of the stream."""
        settled = []
        for step in [s for s in self._latest if s != besides]:
            attempt = self._latest.pop(step)
            settled += [(step, shown) for shown in self._show(step, self._view(step, attempt))]
        return settled

    def _view(self, step: int, attempt: int, *, ended: bool = True) -> tuple[str, str]:
        apart = self._attempts.get((step, attempt, True), "").strip()
        text = self._attempts.get((step, attempt, False), "")
        if ended:
            thought, answer = thinking_so_far(text, ended=True)
        else:
            plain = self._plain.get((step, attempt), PlainScan())
            (thought, answer), plain = thinking_so_far_from(text, plain)
            self._plain[(step, attempt)] = plain
        if (step, attempt) in self._calls_in_text:
            bare = marked = None
            if not ended:
                scan = self._bare.get((step, attempt), UNREAD)
                bare, self._bare[(step, attempt)] = bare_call_scan(answer, scan)
                goes_on = plain.answer_is_start  # else the answer is not the one searched
                since = self._marked.get((step, attempt), (-1, 0)) if goes_on else (-1, 0)
                marked, read = first_marker(answer, since)
                self._marked[(step, attempt)] = (marked, read) if goes_on else (-1, 0)
            calls_only = (step, attempt) in self._calls_only
            answer = calls_held_back(
                answer, ended=ended, calls_only=calls_only, bare=bare, marked=marked
            )
        return "\n\n".join(t for t in (apart, thought) if t), answer

    def _show(self, step: int, view: tuple[str, str]) -> list[Shown]:
        thinking, answer = view
        was_thinking, was_answer = self._shown.get(step, ("", ""))
        grows = thinking.startswith(was_thinking) and answer.startswith(was_answer)
        if grows and (not was_answer or thinking == was_thinking):
            self._shown[step] = view
            pieces = [(thinking[len(was_thinking) :], True), (answer[len(was_answer) :], False)]
            return [Shown(text, is_thinking) for text, is_thinking in pieces if text]
        if was_thinking.startswith(thinking) and was_answer.startswith(answer):
            return []  # a retry catching up with what was shown: nothing new yet
        self._shown[step] = view
        pieces = [(t, is_thinking) for t, is_thinking in ((thinking, True), (answer, False)) if t]
        return [Shown(t, is_thinking, restart=i == 0) for i, (t, is_thinking) in enumerate(pieces)]
