"""Credentials found in text by their documented formats, each replaced by a marker naming its
kind (`[redacted: OpenAI API key]`); every other character is kept as it was.

What a run's tools read (an `.env`, an API's echoed token, a page with a leaked key, an error
body "invalid key sk-…") is the run's own data. Its debrief and lessons are not: they go into
every later run's prompt, every chat's context and every operator's `lessons` listing, for
weeks. The activities that write and read that memory pass its text through here
(`activities/memory_redaction.py`), as a repository's push protection keeps keys out of its
history.

Formats, after gitleaks' rules (github.com/gitleaks/gitleaks `config/gitleaks.toml`, rule ids
as of its commit 09242ce9), loosened where a provider's keys are wider than the rule:
- `openai-api-key`: `sk-`, `sk-proj-`, `sk-svcacct-`, `sk-admin-` then the key. gitleaks
  requires the `T3BlbkFJ` infix; any `sk-` followed by 32+ key characters holding letters,
  digits and a 16-character alphanumeric run is taken here (DeepSeek, Moonshot and other
  OpenAI-compatible providers issue `sk-` + 32 hex);
- `anthropic-api-key` / `anthropic-admin-api-key`: `sk-ant-` then 32+ key characters;
- `aws-access-token`: `(A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}`; an AWS secret access key
  only next to its name (`aws_secret_access_key = <40 base64>`, `"SecretAccessKey": …`): 40
  base64 characters alone are any hash;
- `github-pat`, `github-oauth`, `github-app-token`, `github-refresh-token`
  (`gh[pousr]_` + 36+ alphanumerics), `github-fine-grained-pat` (`github_pat_` + 82+);
- `gitlab-pat` and its kin (`glpat-`, `glptt-`, `glrt-`, `gldt-` + 20+, with the routable
  form's `.xx…` suffix);
- `slack-*-token` (`xox[abeoprs]-…`, `xapp-…`) and `slack-webhook-url`;
- `stripe-access-token`: `(sk|rk)_(live|test|prod)_` + 10+ alphanumerics;
- `gcp-api-key`: `AIza` + 35 characters;
- `jwt`: three base64url parts, the first two beginning `eyJ` (`{"` encoded);
- `private-key`: a `-----BEGIN … PRIVATE KEY-----` block with its base64 body and its
  `-----END …-----` line; a header followed by a body and no end (the text was cut), or a
  body and an end line with no header (cut in the middle), is redacted as far as the body goes;
- a password in a URL, `scheme://user:password@host` (as `sanitize.redact_dsn`; an empty
  password, `user:@`, and placeholders such as `${PASSWORD}` or `***` are left);
- `Authorization: Bearer|Basic|Token <credential>` and a lone `Bearer <token>` (as
  `curl-auth-header`, outside a curl command too);
- an assignment to a credential's name (`api_key=`, `"token":`, `X-Api-Key:`, `DB_PASSWORD=`,
  `client_secret:` …; gitleaks' `generic-api-key` without its entropy) whose value looks like
  a token: 8+ characters holding letters and digits, no spaces, not a URL, not `${…}`.

No entropy guessing: a git SHA, a UUID, a content hash or a base64 image a lesson may hold on
purpose is none of these formats and stays. A value must hold letters and digits (`api_key:
your_api_key_here` is a placeholder, not a key). A key glued to the word before it
(`tokensk-…`) is not taken: a prefix counts only where a key can begin.

Linear time on any input: each pattern starts at a fixed prefix, a lookbehind keeps it from
starting again inside a run of key characters it already passed, and its variable part is one
greedy run of a class the element after it cannot match. The checks a match must pass
(letters and digits) are made on the match, so a failed check has consumed its run instead of
sending the engine back into it. Private-key bodies are read forward from each header and,
for an end line with no header, backward (on the reversed text) from it, each once.

Pure and total: `scan` takes any string and never raises (text it could not scan, which no
input has been seen to make, is replaced whole); a marker matches no pattern, so redacting
twice is redacting once.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

T = TypeVar("T")

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
JWT = "JSON Web Token"
PRIVATE_KEY = "private key"
URL_PASSWORD = "password in URL"
AUTHORIZATION = "authorization credential"
BEARER = "bearer token"
CREDENTIAL = "credential"
UNSCANNED = "text that could not be scanned"
KINDS = (
    PRIVATE_KEY, ANTHROPIC, OPENAI, AWS_KEY_ID, AWS_SECRET, GITHUB, GITLAB, SLACK,
    SLACK_WEBHOOK, STRIPE, GOOGLE, JWT, URL_PASSWORD, AUTHORIZATION, BEARER, CREDENTIAL,
    UNSCANNED,
)  # fmt: skip
"""Every kind a marker can name (a bounded set: metrics label by it)."""


def marker(kind: str) -> str:
    return f"[redacted: {kind}]"


@dataclass(frozen=True)
class Redacted:
    """Text with its credentials replaced, and how many of each kind were."""

    text: str
    found: Counter[str]


# -- what a token looks like ------------------------------------------------------------------

_ALNUM_RUN_16 = re.compile(r"[A-Za-z0-9]{16}")
_LETTER = re.compile(r"[A-Za-z]")
_DIGIT = re.compile(r"[0-9]")


def _mixed(value: str) -> bool:
    """Letters and digits both: a key, not a word or a number."""
    return _LETTER.search(value) is not None and _DIGIT.search(value) is not None


def _keylike(value: str) -> bool:
    """A random key: letters, digits, and 16 alphanumerics in a row (a hyphenated slug such
    as `sk-learn-1-5-release-notes-for-2024` has neither the run nor, often, the digits)."""
    return _mixed(value) and _ALNUM_RUN_16.search(value) is not None


def _has_digit(value: str) -> bool:
    return _DIGIT.search(value) is not None


def _assigned_value(value: str) -> bool:
    """A value assigned to a credential's name that is a credential, not a placeholder, a
    template, a URL or a word: 8+ characters, letters and digits."""
    if value.startswith(("$", "%(", "{{")) or "://" in value:
        return False
    return len(value) >= 8 and _mixed(value)


def _url_password(value: str) -> bool:
    """A URL's password that is one: not `***`, not `${VAR}`/`$VAR`/`{{var}}`."""
    return not (set(value) <= {"*", "x", "X"} or value.startswith(("$", "{{", "%(")))


# -- the patterns -----------------------------------------------------------------------------

_START = r"(?:(?<![A-Za-z0-9_-])|(?<=\\[nrt]))"
"""Not inside a run of key characters (each run is entered once, at its start), or right
after a `\\n` escape of a JSON string (a file's next line)."""
_SEP = r"""["'\x60]?[ \t]{0,5}(?:=>|:=|=|:)[ \t]{0,5}["'\x60]?"""
"""Between a name and its value: `=`, `:`, `=>`, `:=`, quoted or not (`"token": "…"`)."""


@dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    check: Callable[[str], bool] | None = None
    """What the secret must also be; a match failing it is left as it is."""


def _rule(kind: str, pattern: str, check: Callable[[str], bool] | None = None) -> _Rule:
    return _Rule(kind, re.compile(pattern), check)


_RULES: tuple[_Rule, ...] = (
    # a named group `secret` is what is replaced; without one, the whole match
    _rule(ANTHROPIC, _START + r"sk-ant-[A-Za-z0-9_-]{32,}", _keylike),
    _rule(OPENAI, _START + r"sk-[A-Za-z0-9_-]{32,}", _keylike),
    _rule(
        AWS_KEY_ID,
        r"(?:(?<![A-Za-z0-9])|(?<=\\[nrt]))(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}"
        r"(?![A-Za-z0-9])",
    ),
    _rule(
        AWS_SECRET,
        r"(?i:(?:aws[_-]?)?secret[_-]?access[_-]?key)"
        + _SEP
        + r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
    ),
    _rule(GITHUB, _START + r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{82,})"),
    _rule(GITLAB, _START + r"gl(?:pat|ptt|rt|dt)-[A-Za-z0-9_-]{20,}(?:\.[A-Za-z0-9]{2,16})?"),
    _rule(SLACK, _START + r"(?:xox[abeoprs]|xapp)-[A-Za-z0-9-]{10,}", _has_digit),
    _rule(
        SLACK_WEBHOOK,
        r"(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,}",
    ),
    _rule(STRIPE, _START + r"(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{10,}"),
    _rule(GOOGLE, _START + r"AIza[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])"),
    _rule(JWT, _START + r"eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*"),
    # user, then the password up to the last `@` before the path (a password may hold `@`);
    # both stop at `/`, so each `://` reads as far as the next one at most
    _rule(URL_PASSWORD, r"""://[^\s:/?#@'"<>]*:(?P<secret>[^\s/?#'"<>]+)@""", _url_password),
    _rule(
        AUTHORIZATION,
        r"(?i)(?<![A-Za-z0-9-])(?:proxy-)?authorization"
        + _SEP
        + r"(?:(?:bearer|basic|token|digest)[ \t]{1,5})?(?P<secret>[A-Za-z0-9._~+/=-]{8,})",
        _mixed,
    ),
    _rule(
        BEARER, r"(?i)(?<![A-Za-z0-9-])bearer[ \t]{1,5}(?P<secret>[A-Za-z0-9._~+/=-]{16,})", _mixed
    ),
    _rule(
        CREDENTIAL,
        r"(?i)(?=[aciprst])(?:api[_-]?key|apikey|api[_-]?token|api[_-]?secret|access[_-]?key(?:[_-]?id)?"
        r"|access[_-]?token|auth[_-]?token|refresh[_-]?token|session[_-]?token|id[_-]?token"
        r"|client[_-]?secret|secret[_-]?key|private[_-]?key|secret|token|password|passwd"
        r"|passphrase|credentials?)(?![A-Za-z0-9])"
        + _SEP
        + r"""(?P<secret>[^\s"'\x60,;&<>()\[\]{}|\\]{8,})""",
        _assigned_value,
    ),
)


def _apply(rule: _Rule, text: str, found: Counter[str]) -> str:
    if rule.pattern.search(text) is None:  # the common case: no copy made
        return text
    mark = marker(rule.kind)
    named = "secret" in rule.pattern.groupindex

    def replace(m: re.Match[str]) -> str:
        secret = m.group("secret") if named else m.group(0)
        if rule.check is not None and not rule.check(secret):
            return m.group(0)
        found[rule.kind] += 1
        if not named:
            return mark
        start, end = m.span("secret")
        whole = m.group(0)
        return whole[: start - m.start()] + mark + whole[end - m.start() :]

    return rule.pattern.sub(replace, text)


# -- private keys -----------------------------------------------------------------------------

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


def _private_keys(text: str, found: Counter[str]) -> str:
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


# -- the whole ---------------------------------------------------------------------------------


def scan(text: str) -> Redacted:
    """`text` with every credential found replaced by its marker, and what was found."""
    found: Counter[str] = Counter()
    if not isinstance(text, str) or not text:
        return Redacted(text, found)
    try:
        result = _private_keys(text, found)
        for rule in _RULES:
            result = _apply(rule, result, found)
    except Exception:  # not seen: the patterns are fixed. Memory must not fail on a scan,
        # nor keep what it could not read
        return Redacted(marker(UNSCANNED), Counter({UNSCANNED: 1}))
    return Redacted(result, found)


def redact(text: str) -> str:
    """`text` with every credential found replaced by a marker naming its kind."""
    return scan(text).text


def redact_value(value: T) -> tuple[T, Counter[str]]:
    """`value` with every string in it redacted (through lists, tuples, dicts' values and
    pydantic models' fields), and what was found; the same object when nothing was."""
    found: Counter[str] = Counter()
    return _redact(value, found), found


def _redact(value: Any, found: Counter[str]) -> Any:
    if isinstance(value, str):
        result = scan(value)
        found.update(result.found)
        return result.text if result.found else value
    if isinstance(value, BaseModel):
        changed = {
            name: redacted
            for name in type(value).model_fields
            if (redacted := _redact(getattr(value, name), found)) is not getattr(value, name)
        }
        return value.model_copy(update=changed) if changed else value
    if isinstance(value, dict):
        items = {key: _redact(item, found) for key, item in value.items()}
        same = all(items[key] is item for key, item in value.items())
        return value if same else type(value)(items)
    if isinstance(value, list | tuple):
        redacted_items = [_redact(item, found) for item in value]
        if all(r is v for r, v in zip(redacted_items, value, strict=True)):
            return value
        return tuple(redacted_items) if isinstance(value, tuple) else redacted_items
    return value
