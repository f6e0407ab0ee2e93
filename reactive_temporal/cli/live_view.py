"""Printing a run's live output: JSON Lines for scripts, or a readable stream for people.

The model's text is printed as it arrives (cleaned: it is untrusted, so escape sequences and
control characters never reach the terminal), tool calls as they start and end, approvals,
and the end of the run.
"""

from __future__ import annotations

import sys
from typing import TextIO

from reactive_temporal.cli.terminal import clean
from reactive_temporal.contracts.events import RunEvent

PREVIEW_CHARS = 120


def _short(text: str | None, limit: int = PREVIEW_CHARS) -> str:
    flat = " ".join(clean(text or "").split())
    return flat if len(flat) <= limit else flat[:limit] + "…"


class LivePrinter:
    """Prints events to `out` as they come; `json_lines` prints one JSON object per event."""

    def __init__(self, out: TextIO | None = None, *, json_lines: bool = False) -> None:
        self.out = out or sys.stdout
        self.json_lines = json_lines
        self.mid_line = False
        """The last thing printed was streamed text without its newline yet."""

    def show(self, event: RunEvent) -> None:
        if self.json_lines:
            self._write(event.model_dump_json(exclude_none=True) + "\n")
            return
        if event.type == "text":
            if event.restart:
                self._line("↻ (the model's reply restarted after a retry)")
            self._write(clean(event.delta or ""))
            self.mid_line = not (event.delta or "").endswith("\n")
            return
        self._line(self._describe(event))

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
        if self.mid_line:
            self._write("\n")
            self.mid_line = False
        self._write(text + "\n")

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
