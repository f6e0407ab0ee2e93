"""Whether a reply that is still streaming may yet be read as Llama's bare JSON tool call.

Llama 3.1–3.3 write a call as the object alone, `{"name": …, "parameters": {…}}`, with no
marker to say it is one (`text_calls._bare_object`): the reply, whole, is read as a call when
it is that object and names a tool the step offers. While it streams, nothing says which it
will be, and a watcher was shown the call as the model's answer, JSON and all. What can be
told from the text so far is when it can no longer be one: something other than `{` comes
first, the object has a key a call has not, or it has closed and is not a call's shape, or
words follow it. Until then it is held back (`live_output.calls_held_back`), and once the reply
has ended the step's record says whether it was read as calls (the tool it names may not be
offered: then it is the model's answer, and shown).

Told in one pass over the text's JSON tokens, without parsing it until the object closes; a
prefix that can no longer be a call stays so however the text goes on, so what is shown
only grows. Only the object as the reader takes it: a list (`[…]`) is never read as a bare
call.

Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

from reactive_temporal.text_calls import TEXT_CALLS_MAX_CHARS

CALL_KEYS = frozenset({"name", "parameters", "arguments"})
"""The keys of a bare call object: its tool's name and its arguments (`parameters` as Llama
writes them, `arguments` as others do)."""

_TOKEN = re.compile(
    r'"[^"\\]*(?:\\.[^"\\]*)*(?:(?P<closed>")|\\?\Z)'  # a string, closed or cut off
    r"|[{}\[\]:,]"  # structure
    r'|[^\s"{}\[\]:,]+',  # a number, true, false, null (or anything else not JSON)
    re.DOTALL,
)
_STRING_REST = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*(?:(?P<closed>")|\\?\Z)', re.DOTALL)
"""The rest of a string `_TOKEN` found cut off, from a point not inside an escape."""


class BareScan(NamedTuple):
    """How far `bare_call_scan` has read a reply's answer, to go on from as it grows."""

    read: str = ""
    """The text read, up to its last token (which may go on: read again)."""
    depth: int = 0
    """Brackets open there; -1: it can no longer be a call, whatever follows."""
    expect: str = ""
    """What the object takes next at its own level: a key, a colon, a value, what follows."""
    in_string: bool = False
    """`read` ends inside a string whose words do not matter (a value's), not inside an
    escape: the string goes on from there, read no more than once (a value of 600 kB, read
    from its start at each delta, was the fold's quadratic cost)."""


UNREAD = BareScan()
"""Nothing read yet."""


def may_be_bare_call(text: str) -> bool:
    """Whether `text`, a reply's answer so far, may still turn out to be a bare call object
    (`text_calls._bare_object`), whatever follows: it is empty or spacing so far, or one JSON
    object so far whose keys are a call's, or a whole object of a call's shape
    (`bare_call_shaped`) with nothing but spacing after it. False once it can no longer be:
    anything but `{` first, a key a call has not, JSON that breaks, words after the object,
    past TEXT_CALLS_MAX_CHARS (not read for calls)."""
    return bare_call_scan(text)[0]


def bare_call_scan(text: str, since: BareScan = UNREAD) -> tuple[bool, BareScan]:
    """`may_be_bare_call(text)`, going on from where `since` (what it gave for an earlier
    text) stopped when `text` begins with what it read: a reply read again at each delta is
    walked once, not once a delta (a 30 kB call in 2,000 deltas cost 3.7 s walked anew)."""
    if len(text) > TEXT_CALLS_MAX_CHARS:
        return False, BareScan(text, -1)
    if not text.startswith(since.read):
        since = UNREAD
    if since.depth < 0:
        return False, since
    start, depth, expect = len(since.read), since.depth, since.expect
    if since.in_string:
        rest = _STRING_REST.match(text, start)
        assert rest is not None  # it matches any text, the empty one too
        if rest.group("closed") is None:
            return True, BareScan(text[: _string_resume(text, rest.end())], depth, expect, True)
        start, expect = rest.end(), "after" if depth == 1 else expect
    verdict, at, depth, expect, in_string = _walk(text, start, depth, expect)
    if verdict is False:
        return False, BareScan(text, -1)
    return True, BareScan(text[:at], depth, expect, in_string)


def _string_resume(text: str, end: int) -> int:
    """Where to go on reading a string cut off at `end`: there, or before a backslash that
    ends it (the escape it begins is read whole next time)."""
    return end - 1 if text.endswith("\\", 0, end) and _escaping(text, end) else end


def _escaping(text: str, end: int) -> bool:
    """Whether the backslash before `end` begins an escape (an odd run of them ends there)."""
    at = end
    while at > 0 and text[at - 1] == "\\":
        at -= 1
    return (end - at) % 2 == 1


def _walk(
    text: str, start: int, depth: int, expect: str
) -> tuple[bool | None, int, int, str, bool]:
    """`text`'s tokens from `start` on (`depth` brackets open there, `expect`ing what the
    object takes next), read as a call object's: False when it can no longer be one, True
    when it closed as one, else None; and where its last token began, with the depth and
    what was expected there (that token may go on: it is read again), or, for a value's
    string cut off, where it was read to (True last: it goes on from there)."""
    resume: tuple[int, int, str, bool] = (start, depth, expect, False)
    for token in _TOKEN.finditer(text, start):
        piece = token.group(0)
        resume = (token.start(), depth, expect, False)
        if (
            piece.startswith('"')
            and token.group("closed") is None
            and (depth > 1 or expect == "value")
        ):
            return None, _string_resume(text, token.end()), depth, expect, True
        if depth > 1:  # inside a value of the object: only where it closes matters
            if piece in ("{", "["):
                depth += 1
            elif piece in ("}", "]"):
                depth -= 1
                expect = "after" if depth == 1 else expect
        elif depth == 0:
            if piece != "{":
                return False, *resume  # anything but an object first, or words after it
            depth, expect = 1, "key or end"
        elif expect in ("key", "key or end"):
            if piece == "}" and expect == "key or end":
                return _closed_as_call(text, token.end()), *resume
            closed = token.group("closed") is not None
            if not piece.startswith('"') or not _may_be_a_call_key(piece, closed=closed):
                return False, *resume
            expect = "colon"
        elif expect == "colon":
            if piece != ":":
                return False, *resume
            expect = "value"
        elif expect == "value":
            if piece in ("}", "]", ":", ","):
                return False, *resume
            depth, expect = (2, expect) if piece in ("{", "[") else (depth, "after")
        elif piece == ",":  # after a value
            expect = "key"
        elif piece == "}":
            return _closed_as_call(text, token.end()), *resume
        else:
            return False, *resume
    return None, *resume


def bare_call_shaped(value: Any) -> bool:
    """Whether a JSON value is a call object as `text_calls._bare_object` reads one, the tool
    it names aside: an object of a call's keys only, its name text (not spacing alone), its
    arguments an object, none, or the JSON text of an object."""
    if not isinstance(value, dict) or not value.keys() <= CALL_KEYS:
        return False
    name = value.get("name")
    if not isinstance(name, str) or not name.strip():
        return False
    arguments = value.get("arguments", value.get("parameters"))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments.strip())
        except (ValueError, RecursionError):
            return False
        return isinstance(arguments, dict)
    return arguments is None or isinstance(arguments, dict)


def _may_be_a_call_key(piece: str, *, closed: bool) -> bool:
    """Whether a key, written so far as `piece` (a JSON string, `closed` or not yet), may be
    one of CALL_KEYS: decoded when closed; else what is written up to its first escape must
    begin one (what an escape, `\\u006e`, stands for is not read until the key closes)."""
    if closed:
        try:
            return json.loads(piece) in CALL_KEYS
        except ValueError:
            return False
    written = piece[1:].split("\\", 1)[0]
    return any(key.startswith(written) for key in CALL_KEYS)


def _closed_as_call(text: str, end: int) -> bool:
    """The object closed at `end`: a call's shape with nothing but spacing after it."""
    if text[end:].strip():
        return False
    try:
        return bare_call_shaped(json.loads(text.strip()))
    except (ValueError, RecursionError):
        return False
