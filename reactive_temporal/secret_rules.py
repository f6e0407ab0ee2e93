"""What the credential scan's rules share: the kinds a marker names, the marker, and how a rule
replaces what it found (`reactive_temporal/secrets_scan.py` is the whole and says why).

A rule is a pattern and a judge. The pattern finds a candidate in one pass; the judge, given
the match, says which kind it is or that it is none (a placeholder, a word, a page's cursor).
A match the judge leaves is still consumed: the engine goes on after it, never back into it,
which is what keeps every rule linear on any text.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

OPENAI = "OpenAI API key"
ANTHROPIC = "Anthropic API key"
AWS_KEY_ID = "AWS access key ID"
AWS_SECRET = "AWS secret access key"
GITHUB = "GitHub token"
GITLAB = "GitLab token"
SLACK = "Slack token"
SLACK_WEBHOOK = "Slack webhook URL"
STRIPE = "Stripe key"
GOOGLE = "Google API key"
HUGGING_FACE = "Hugging Face token"
NPM = "npm token"
PYPI = "PyPI token"
SENDGRID = "SendGrid API key"
TWILIO = "Twilio API key"
TELEGRAM = "Telegram bot token"
DIGITALOCEAN = "DigitalOcean token"
SHOPIFY = "Shopify token"
VAULT = "HashiCorp Vault token"
DATABRICKS = "Databricks token"
GRAFANA = "Grafana token"
SENTRY = "Sentry token"
POSTMAN = "Postman API key"
PULUMI = "Pulumi token"
LINEAR = "Linear API key"
DOPPLER = "Doppler token"
PLANETSCALE = "PlanetScale token"
JWT = "JSON Web Token"
PRIVATE_KEY = "private key"
URL_PASSWORD = "password in URL"
AUTHORIZATION = "authorization credential"
BEARER = "bearer token"
PASSWORD = "password"
CREDENTIAL = "credential"
UNSCANNED = "text that could not be scanned"
KINDS = (
    PRIVATE_KEY, ANTHROPIC, OPENAI, AWS_KEY_ID, AWS_SECRET, GITHUB, GITLAB, SLACK,
    SLACK_WEBHOOK, STRIPE, GOOGLE, HUGGING_FACE, NPM, PYPI, SENDGRID, TWILIO, TELEGRAM,
    DIGITALOCEAN, SHOPIFY, VAULT, DATABRICKS, GRAFANA, SENTRY, POSTMAN, PULUMI, LINEAR,
    DOPPLER, PLANETSCALE, JWT, URL_PASSWORD, AUTHORIZATION, BEARER, PASSWORD, CREDENTIAL,
    UNSCANNED,
)  # fmt: skip
"""Every kind a marker can name (a bounded set: metrics label by it)."""

MARKER_PREFIX = "[redacted: "


def marker(kind: str) -> str:
    return f"{MARKER_PREFIX}{kind}]"


# -- what a token looks like ------------------------------------------------------------------

_ALNUM_RUN_16 = re.compile(r"[A-Za-z0-9]{16}")
_LETTER = re.compile(r"[A-Za-z]")
_DIGIT = re.compile(r"[0-9]")
_LOWER = re.compile(r"[a-z]")
_UPPER = re.compile(r"[A-Z]")


def mixed(value: str) -> bool:
    """Letters and digits both: a key, not a word or a number."""
    return _LETTER.search(value) is not None and _DIGIT.search(value) is not None


def keylike(value: str) -> bool:
    """A random key: letters, digits, and 16 alphanumerics in a row (a hyphenated slug such
    as `sk-learn-1-5-release-notes-for-2024` has neither the run nor, often, the digits)."""
    return mixed(value) and _ALNUM_RUN_16.search(value) is not None


def has_digit(value: str) -> bool:
    return _DIGIT.search(value) is not None


def both_cases(value: str) -> bool:
    """Lower- and upper-case letters: random letters, not an identifier in one case."""
    return _LOWER.search(value) is not None and _UPPER.search(value) is not None


# -- the pieces patterns are made of ----------------------------------------------------------

START = r"(?:(?<![A-Za-z0-9_-])|(?<=\\[nrt]))"
"""Not inside a run of key characters (each run is entered once, at its start), or right
after a `\\n` escape of a JSON string (a file's next line)."""
QUOTE = r"""(?:\\?["'\x60])"""
"""A quote, or an escaped one (`\\"`: JSON text inside a JSON string, as a tool returns it)."""
STRING_PREFIX = r"""(?:[bBrRuU]{1,2}(?=\\?["']))?"""
"""A Python string's prefix before its quote (`password = r'x'`, `api_key = u'…'`); not `f`:
an f-string's value is code."""
SEP = rf"""{QUOTE}?[ \t]{{0,5}}(?:=>|:=|=|:)[ \t]{{0,5}}{STRING_PREFIX}{QUOTE}?"""
"""Between a name and its value: `=`, `:`, `=>`, `:=`, quoted or not (`"token": "…"`)."""


# -- a rule and how it is applied --------------------------------------------------------------

Judge = Callable[[re.Match[str]], str | None]
"""The kind a match is, or None for a match that is no credential."""


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str]
    judge: Judge
    """A named group `secret` (or `quoted` or `emphasized`, the one that took part) is what is
    replaced; without one, the whole match."""
    needles: tuple[str, ...] = ()
    """Text every match holds one of (lower case, looked for in the folded text, when
    `folded`): a text holding none is not searched. A pattern that begins with a look-behind
    is tried at every position (about 25 ns each: 100 us per rule for 4 kB, 4 ms for the
    whole scan); `in` finds a needle, or its absence, in about a microsecond. Empty: always
    searched."""
    folded: bool = False
    """The pattern ignores case: its needles are looked for in `fold(text)`."""


def rule(
    kind: str,
    pattern: str,
    check: Callable[[str], bool] | None = None,
    *,
    needles: tuple[str, ...] = (),
    folded: bool = False,
) -> Rule:
    """A rule of one kind whose secret, if `check` is given, must also pass it."""
    compiled = re.compile(pattern)

    def judge(m: re.Match[str]) -> str | None:
        return kind if check is None or check(secret_of(m)) else None

    return Rule(compiled, judge, needles, folded)


_IGNORECASE_EXTRAS = str.maketrans({"\u0131": "i", "\u017f": "s"})
"""The two letters whose lower case is not ASCII that `re`'s IGNORECASE matches with an ASCII
letter (dotless ı with i, long ſ with s); the Kelvin sign and İ lower to k and i already."""


def fold(text: str) -> str:
    """`text` as a case-ignoring pattern sees its letters: lower case, ı as i, ſ as s (the
    translation only where one is: it costs half a millisecond on 4 kB)."""
    lowered = text.lower()
    if "\u0131" in lowered or "\u017f" in lowered:
        return lowered.translate(_IGNORECASE_EXTRAS)
    return lowered


NEEDLES_ON = True
"""Whether rules skip a text without their needles (tests compare both ways)."""


def secret_span(m: re.Match[str]) -> tuple[int, int]:
    for group in ("secret", "quoted", "emphasized"):
        if group in m.re.groupindex and m.start(group) >= 0:
            return m.span(group)
    return m.span()


def secret_of(m: re.Match[str]) -> str:
    start, end = secret_span(m)
    return m.string[start:end]


def apply(rules: tuple[Rule, ...], text: str, found: Counter[str]) -> str:
    """`text` with what each rule finds replaced, rule after rule; a rule whose needles the
    text holds none of is not searched."""
    folded: str | None = None
    for each in rules:
        if NEEDLES_ON and each.needles:
            if each.folded and folded is None:
                folded = fold(text)
            looked_in = folded if each.folded else text
            assert looked_in is not None
            if not any(needle in looked_in for needle in each.needles):
                continue
        replaced = _apply(each, text, found)
        if replaced is not text:
            text, folded = replaced, None
    return text


def _apply(each: Rule, text: str, found: Counter[str]) -> str:
    if each.pattern.search(text) is None:  # the common case: no copy made
        return text

    def replace(m: re.Match[str]) -> str:
        kind = each.judge(m)
        if kind is None:
            return m.group(0)
        found[kind] += 1
        start, end = secret_span(m)
        whole = m.group(0)
        return whole[: start - m.start()] + marker(kind) + whole[end - m.start() :]

    return each.pattern.sub(replace, text)
