"""Live output rules every reader of a run's events shares (pure, no I/O).

- `channel_for(run_id)`: the Postgres NOTIFY channel a run's writers signal and its
  watchers LISTEN on (one per run, so a watcher wakes only for its run);
- `TextFold`: turns the stored text deltas into what a person should see, each character
  of a reply once: a retried LLM call streams its reply again from the start, and the fold
  shows only what is new; if the retry's text differs from what was shown, it says so with
  one `restart` carrying the retry's text so far.
"""

from __future__ import annotations

import hashlib

CHANNEL_PREFIX = "rt_run_"


def channel_for(run_id: str) -> str:
    """`rt_run_` + 16 hex digits of the run id's SHA-256 (a Postgres identifier, any id)."""
    return CHANNEL_PREFIX + hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class TextFold:
    """What to show of each step's streamed reply, given its deltas in log order."""

    def __init__(self) -> None:
        self._shown: dict[int, str] = {}
        self._attempts: dict[tuple[int, int], str] = {}

    def take(self, step: int, attempt: int, position: int, delta: str) -> tuple[str, bool] | None:
        """(text to show, is it a restart) for this delta, or None when it shows nothing new.

        A restart's text replaces the step's text shown so far; otherwise it is appended.
        """
        so_far = self._attempts.get((step, attempt), "")
        text = so_far[:position] + delta if position <= len(so_far) else so_far + delta
        self._attempts[(step, attempt)] = text
        shown = self._shown.get(step, "")
        if text.startswith(shown):
            fresh = text[len(shown) :]
            if not fresh:
                return None
            self._shown[step] = text
            return fresh, False
        if shown.startswith(text):
            return None  # a retry catching up with what was shown: nothing new yet
        self._shown[step] = text
        return text, True
