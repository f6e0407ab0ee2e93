"""A key a hard wrap broke over lines: part of the credential scan
(`reactive_temporal/secrets_scan.py`).

A terminal's capture, `fold -w 80` or `textwrap` with its default `break_long_words` cut a
long key where the line is full: its head ends one line at the wrap's width, its rest begins
the next at its first column. The formats then read the head alone: a key of a fixed length
(`ghp_` + 36, `AKIA` + 16, `AIza` + 35, `npm_` + 36) is too short there and is kept whole, a
longer one (`sk-proj-…`, a JWT) is redacted as far as the line goes and its rest is kept.

A break is joined only where it cannot be chance:
- the line is exactly as long as the text's longest line, and that is 40 or more (every line
  a hard wrap broke is as long as the wrap, and none is longer);
- the line ends in a run of key characters that begins where a key may and the next line
  begins with key characters at its first column (a wrap keeps the text's space: a key that
  ended the line and a word after it leave the next line beginning with that space);
- the run and what goes on from it are a whole key of one format, and it is one only joined:
  the run alone is too short for it, or the rest holds letters and digits both (not
  `JavaScript`, which a word-wrap may put after a key that ended the line).
A full line of key characters between goes with them (a JWT over three lines). A key under a
wrap with an indent, or wrapped at a JSON string's `\\n`, is not joined: nothing says where
its rest is.
"""

from __future__ import annotations

import re
import string
from collections import Counter

from reactive_temporal.secret_formats import FORMATS
from reactive_temporal.secret_rules import marker, mixed

_MIN_WIDTH = 40
_REACH = 8_192
"""The most characters a key's rest is looked for in: longer than any format's key (a JWT
of a few kilobytes)."""
_KEY_CHARS = r"[A-Za-z0-9_.-]"
_KEY_CHAR_SET = string.ascii_letters + string.digits + "_.-"
_LEAD = re.compile(rf"{_KEY_CHARS}+")
_PIECE = re.compile(r"[^\s-]*-?")


def _key(head: str, rest: str) -> tuple[str, int] | None:
    """The format `head + rest` begins with a whole key of, where it is one only joined, and
    how much of `rest` the key takes."""
    joined = head + rest
    for rule in FORMATS:
        whole = rule.pattern.match(joined)
        if whole is None or whole.end() <= len(head) or (kind := rule.judge(whole)) is None:
            continue
        taken = whole.end() - len(head)
        alone = rule.pattern.fullmatch(head)
        if alone is not None and rule.judge(alone) is not None and not mixed(rest[:taken]):
            continue  # a whole key, and a word after it
        if any(other.pattern.match(rest) for other in FORMATS):
            return None  # the next line begins a key of its own: a list of keys, one a line
        return kind, taken
    return None


def _broken(body: str, following: str, width: int) -> bool:
    """Whether a wrap broke the line `body` inside a word: it is full, or it ends at a hyphen
    and the word's next piece did not fit on it (`textwrap`'s `break_on_hyphens`)."""
    if len(body) == width:
        return True
    if not body.endswith("-"):
        return False
    piece = _PIECE.match(following)
    return piece is not None and len(body) + piece.end() > width


def _leads(bodies: list[str], first: int, width: int) -> list[tuple[int, int]]:
    """The lines from `first` a key's rest may go on in, and how far in each: key characters
    from the first column, on through every line they fill that a wrap broke."""
    leads: list[tuple[int, int]] = []
    for line in range(first, len(bodies)):
        lead = _LEAD.match(bodies[line])
        if lead is None:
            break
        leads.append((line, lead.end()))
        whole = lead.end() == len(bodies[line]) and line + 1 < len(bodies)
        if not (whole and _broken(bodies[line], bodies[line + 1], width)):
            break  # the rest ends on this line
        if len(leads) * width > _REACH:
            break
    return leads


def _rest(bodies: list[str], leads: list[tuple[int, int]]) -> str:
    return "".join(bodies[line][:end] for line, end in leads)


def wrapped(text: str, found: Counter[str]) -> str:
    """`text` with every key a hard wrap broke over lines replaced, each piece by its marker."""
    if "\n" not in text:
        return text
    lines = text.split("\n")
    crlf = "\r" in text
    bodies = [line.removesuffix("\r") for line in lines] if crlf else lines
    width = max(map(len, bodies))
    if width < _MIN_WIDTH:
        return text
    candidates = [
        at for at, body in enumerate(bodies[:-1]) if len(body) == width or body.endswith("-")
    ]
    changed = False
    at = 0
    for candidate in candidates:
        if candidate < at or not _broken(bodies[candidate], bodies[candidate + 1], width):
            continue
        at = candidate
        start = len(bodies[at].rstrip(_KEY_CHAR_SET))  # where the line's last run begins
        head = bodies[at][start:]
        leads = _leads(bodies, at + 1, width) if head else []
        key = _key(head, _rest(bodies, leads)) if leads else None
        if key is None:
            # a line the key characters fill goes on from the one before: no key begins it
            last = leads[-1] if leads else None
            at = last[0] + 1 if last and last[1] == len(bodies[last[0]]) else at + 1
            continue
        kind, taken = key
        found[kind] += 1
        if not changed:
            bodies = list(bodies)
            changed = True
        bodies[at] = bodies[at][:start] + marker(kind)
        for line, end in leads:
            if taken <= 0:
                break
            bodies[line] = marker(kind) + bodies[line][min(end, taken) :]
            taken -= end
            at = line
    if not changed:
        return text
    if crlf:
        bodies = [
            body + "\r" if line.endswith("\r") else body
            for body, line in zip(bodies, lines, strict=True)
        ]
    return "\n".join(bodies)
