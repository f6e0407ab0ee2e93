"""Private keys in text: a `-----BEGIN … PRIVATE KEY-----` block with its base64 body and its
`-----END …-----` line, as gitleaks' `private-key` rule; part of the credential scan
(`reactive_temporal/secrets_scan.py`).

A header followed by a body and no end (the text was cut), or a body and an end line with no
header (cut in the middle), is redacted as far as the body goes. Bodies are read forward from
each header and, for an end line with no header, backward (on the reversed text) from it, each
once: linear time on any text.
"""

from __future__ import annotations

import re
from collections import Counter

from reactive_temporal.secret_rules import PRIVATE_KEY, marker

_PEM_BEGIN = re.compile(r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----")
_BREAK = r"(?:[ \t]|\r?\n|\\r|\\n)"
"""Between a key's lines: spaces, line breaks, or the two characters `\\n` of a JSON string."""
_B64 = "[A-Za-z0-9+/]"
_PEM_BODY = re.compile(
    rf"(?:{_BREAK}+(?:{_B64}{{16,}}={{0,2}}|{_B64}{{1,15}}={{1,2}}"
    rf"|{_B64}{{1,15}}(?={_BREAK}*(?:-----END|\u2026|\Z))"
    r"|(?:Proc-Type|DEK-Info|Version|Comment): [^\r\n\\]*))*"
)
"""Lines of base64 after a header, and a legacy PEM's header lines. A short line only with its
padding, or last (before the end line, where the text was cut with an ellipsis, or at the
end): the words after a header named in prose are not taken for a key."""
_PEM_END_AFTER = re.compile(rf"{_BREAK}*" + _PEM_END.pattern)
_BREAK_REVERSED = r"(?:[ \t]|\n\r?|r\\|n\\)"
_PEM_BODY_BACKWARD = re.compile(
    rf"{_BREAK_REVERSED}*(?:={{0,2}}{_B64}{{16,}}|={{0,2}}{_B64}{{1,15}}{_BREAK_REVERSED}+={{0,2}}{_B64}{{16,}})"
    rf"(?:{_BREAK_REVERSED}+={{0,2}}{_B64}{{16,}})*"
)
"""On the reversed text, from an end line back: its last line (any length: where the text
was cut, when a line of 16 or more precedes it), then lines of 16+ base64 characters."""


def private_keys(text: str, found: Counter[str]) -> str:
    if "PRIVATE KEY" not in text:
        return text
    spans = _key_blocks(text)
    spans += _key_tails(text, spans)
    if not spans:
        return text
    pieces: list[str] = []
    at = -1
    for start, stop in sorted(spans):
        if start <= at:  # touching or overlapping the last one: one marker for both
            at = max(at, stop)
            continue
        pieces += [text[max(at, 0) : start], marker(PRIVATE_KEY)]
        found[PRIVATE_KEY] += 1
        at = stop
    pieces.append(text[at:])
    return "".join(pieces)


def _key_blocks(text: str) -> list[tuple[int, int]]:
    """Each header with its body and its end line, or as far as its body goes."""
    spans: list[tuple[int, int]] = []
    for begin in _PEM_BEGIN.finditer(text):
        if spans and begin.start() < spans[-1][1]:
            continue
        body = _PEM_BODY.match(text, begin.end())
        end = body.end() if body else begin.end()
        closing = _PEM_END_AFTER.match(text, end)
        if closing is not None:
            spans.append((begin.start(), closing.end()))
        elif end > begin.end():  # cut before its end
            spans.append((begin.start(), end))
        # else a header alone (a format named in prose): it tells nothing
    return spans


def _key_tails(text: str, blocks: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Each end line no block took, with the body before it (the tail of a key whose head
    was cut away), read backward on the reversed text, never past an earlier end line."""
    tails: list[tuple[int, int]] = []
    taken = iter(blocks)
    block = next(taken, None)
    floor = 0
    reversed_text: str | None = None
    for closing in _PEM_END.finditer(text):
        while block is not None and block[1] <= closing.start():
            floor = max(floor, block[1])
            block = next(taken, None)
        if block is not None and block[0] <= closing.start():
            continue  # inside a block already taken
        if reversed_text is None:
            reversed_text = text[::-1]
        back = _PEM_BODY_BACKWARD.match(reversed_text, len(text) - closing.start())
        if back is not None and back.end() > len(text) - closing.start():
            tails.append((max(len(text) - back.end(), floor), closing.end()))
        floor = closing.end()
    return tails
