"""Passwords told in a sentence, with no `:` or `=` to mark them: `the password is hunter2`,
`my password was hunter2`, `pw is hunter2`, `reset the root password to Hunter2!`,
`passphrase hunter2`; part of the credential scan (`reactive_temporal/secrets_scan.py`).

A sentence about a password says what it is as often as what it holds: `the password is
wrong`, `the password is required`, `password is stored in Vault`, `the password is
base64-encoded`. No quote or field marks the value here, so its shape must: a value counts
only where it could not be a word, a number or a name (`secret_labels.shaped`: a digit or a
symbol, and not a hyphenated word, a date, a version, an acronym or a snake_case name).
A password that is a plain word (`the password is swordfish`) is left: nothing tells it
from `the password is correct`. After the name alone (`passphrase hunter2`) the value must
also hold a lower-case letter (`password SHA256 hashing`, `password PBKDF2` name schemes).

Only a password's names (`password`, `passwd`, `passphrase`, `passcode`, `pwd`, `pw`): `the
secret is out`, `the token is 2048 long` and `the key is ssh-ed25519` are sentences too.
"""

from __future__ import annotations

import re

from reactive_temporal.secret_labels import shaped
from reactive_temporal.secret_rules import PASSWORD, Rule

_LOWER = re.compile(r"[a-z]")
_VALUE_CHARS = r"""[^\s"'\x60<>(){}\[\]|\\,;]"""
_VALUE = rf"""(?P<secret>{_VALUE_CHARS}{{0,199}}[^\s"'\x60<>(){{}}\[\]|\\,;.:?])"""
"""A value up to the sentence's end: a full stop, a colon or a question mark after it is
the sentence's, not the password's."""
_COPULA = (
    r"(?:(?:is|was|has[ \t]+been|will[ \t]+be)"
    r"(?:[ \t]+(?:now|still|(?:set|changed|reset|updated)[ \t]+to))?"
    r"|(?:set|changed|reset|updated)[ \t]+to|to|->|[-–—→])[ \t]*:?"
)
"""`is`, `was`, `is now`, `was changed to`, `to` (`set the password to x`), a dash or an
arrow (`Password – hunter2`, `password → hunter2`)."""


def _told(m: re.Match[str]) -> str | None:
    value = m.group("secret") if m.group("secret") is not None else m.group("quoted")
    if not shaped(value):
        return None
    if m.group("copula") is None and _LOWER.search(value) is None:
        return None  # after the name alone: `password SHA256`, not `passphrase hunter2`
    return PASSWORD


PROSE: tuple[Rule, ...] = (
    Rule(
        re.compile(
            r"(?i)(?<![A-Za-z0-9_-])(?P<name>pass(?:word|wd|phrase|code)|pwd|pw)(?![A-Za-z0-9_-])"
            r"(?:(?:[ \t]+(?:for|of|to)(?:[ \t]+[\w@.-]{1,40}){1,3}?)?"
            rf"[ \t]+(?P<copula>{_COPULA}))?"
            rf"[ \t]+(?:(?P<q>[\"'\x60])(?P<quoted>{_VALUE_CHARS}{{1,200}})(?P=q)|{_VALUE})"
            r"(?=[.:?]*(?:[\s\"'\x60<>(){}\[\]|\\,;]|$))"
        ),
        _told,
        needles=("pass", "pw"),  # each of the names holds one
        folded=True,
    ),
)
"""After the labels' rules: a value a label has taken is a marker by then, and no shape."""
