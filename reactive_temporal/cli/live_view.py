"""Printing a run's live output: JSON Lines for scripts, or a readable stream for people.

The model's text is printed as it arrives (cleaned: it is untrusted, so escape sequences and
control characters never reach the terminal), tool calls as they start and end, approvals,
and the end of the run. A reasoning model's thinking is printed apart from its answer: each
of its lines behind a `┆` gutter, dim and italic on a terminal (`NO_COLOR` turns that off),
the answer on a line of its own after it; or, hidden (`watch --hide-thinking`), one line
saying the model thinks, so a long silence is not taken for a hung model.
"""

from __future__ import annotations

import os
import re
import sys
from typing import TextIO

from reactive_temporal.cli.terminal import clean
from reactive_temporal.contracts.events import RunEvent

PREVIEW_CHARS = 120
THINKING_GUTTER = "┆ "
"""Begins each printed line of the model's thinking (its answer's lines have none)."""
_THINKING_STYLE = ("\x1b[2;3m", "\x1b[0m")
"""Dim and italic, on a terminal: the printer's own sequences, around text already cleaned."""
_RESTARTED = "↻ (the model's reply restarted after a retry)"
_WAS_THINKING = "↑ (that was the model's thinking: the chat template had opened it)"
_THINKS = THINKING_GUTTER + "(the model thinks…)"


def _short(text: str | None, limit: int = PREVIEW_CHARS) -> str:
    flat = " ".join(clean(text or "").split())
    return flat if len(flat) <= limit else flat[:limit] + "…"


class LivePrinter:
    """Prints events to `out` as they come; `json_lines` prints one JSON object per event."""

    def __init__(
        self, out: TextIO | None = None, *, json_lines: bool = False, hide_thinking: bool = False
    ) -> None:
        self.out = out or sys.stdout
        self.json_lines = json_lines
        self.hide_thinking = hide_thinking
        """Thinking is said once a step (`_THINKS`), not printed; JSON Lines carry it all."""
        self.thinks_said: int | None = None
        """The step whose thinking was said (hidden)."""
        self.mid_line = False
        """The last thing printed was streamed text without its newline yet."""
        self.styled = _is_terminal(self.out) and not os.environ.get("NO_COLOR")
        self.streaming: tuple[int | None, bool] | None = None
        """The step and kind (thinking or not) of the text being streamed; None after a line."""
        self.answer = ""
        """The answer printed of the step being streamed (since its last restart)."""

    def show(self, event: RunEvent) -> None:
        if self.json_lines:
            self._write(event.model_dump_json(exclude_none=True) + "\n")
            return
        if event.type == "text":
            self._text(event)
            return
        self._line(self._describe(event))

    def _text(self, event: RunEvent) -> None:
        """A piece of the step's reply: its thinking behind a gutter, its answer as it is.

        A restart that turns the answer printed so far into thinking (a `</think>` the chat
        template had opened) says so instead of printing the same text again."""
        delta = clean(event.delta or "")
        if event.restart:
            if event.thinking and self.answer.strip() and delta.strip() == self.answer.strip():
                self._line(_WAS_THINKING)
                self.streaming, self.answer = (event.step, True), ""
                return
            self._line(_RESTARTED)
        kind = (event.step, bool(event.thinking))
        if self.streaming is not None and self.streaming != kind and self.mid_line:
            self._write("\n")  # the answer begins on a line of its own after the thinking
            self.mid_line = False
        if self.streaming is None or self.streaming[0] != event.step or event.restart:
            self.answer = ""
        self.streaming = kind
        if event.thinking and self.hide_thinking:
            if self.thinks_said != event.step:
                self._line(_THINKS)
                self.thinks_said = event.step
            return
        if event.thinking:
            self._thinking(delta)
            return
        self.answer += delta
        self._write(delta)
        self.mid_line = not delta.endswith("\n")

    def _thinking(self, text: str) -> None:
        """Thinking, each line begun with the gutter, dim and italic on a terminal."""
        for part in re.split(r"(\n)", text):
            if part == "\n":
                self._write(part)
                self.mid_line = False
            elif part:
                if self.styled:
                    part = _THINKING_STYLE[0] + part + _THINKING_STYLE[1]
                self._write(part if self.mid_line else THINKING_GUTTER + part)
                self.mid_line = True

    def _describe(self, e: RunEvent) -> str:
        if e.type == "iteration":
            return f"── iteration {e.iteration} ──"
        if e.type == "tool_start":
            return f"→ {clean(e.tool or '')}({_short(e.arguments)})"
        if e.type == "tool_end":
            mark = "✓" if e.success else "✗"
            return f"← {clean(e.tool or '')} {mark} {_short(e.preview)} ({e.duration_ms or 0} ms)"
        if e.type == "approval":
            who = f" by {clean(e.by)}" if e.by else ""
            why = f": {_short(e.reason)}" if e.reason else ""
            verb = "waits for approval" if e.status == "pending" else f"{e.status}{who}{why}"
            call = f"{clean(e.tool or '')}({_short(e.arguments)}) call {clean(e.call_id or '')}"
            return f"⏸ {call} {verb}"
        if e.result is not None:
            r = e.result
            return f"■ {r.terminated_by} · {'succeeded' if r.success else 'did not succeed'}"
        return f"■ the run ended without a result ({e.status})"

    def _line(self, text: str) -> None:
        self.streaming = None
        if self.mid_line:
            self._write("\n")
            self.mid_line = False
        self._write(text + "\n")

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()


def _is_terminal(out: TextIO) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):  # a stream without a terminal, or closed
        return False
