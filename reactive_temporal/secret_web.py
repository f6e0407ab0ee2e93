"""Credentials in a web request's own encodings: part of the credential scan
(`reactive_temporal/secrets_scan.py`).

- a name and its value URL-encoded (`password%3Dhunter2` in a logged query string or form
  body, `%22password%22%3A%22hunter2%22` for JSON inside a URL): the value is judged decoded,
  as the same name's value is (`secret_labels.delimited_value`), so `%24%7BPW%7D` (`${PW}`)
  stays; a form body's `password=x&user=y` is the names' rule's;
- a token as a URL's whole userinfo (`https://<token>@github.com/…`), where it looks like a
  key (16 letters and digits in a row), not a user's name (`git@`, `john.doe@`);
- a session's cookie (`Cookie: sessionid=…; csrftoken=…`, `Set-Cookie: connect.sid=…`,
  `--cookie 'PHPSESSID=…'`): the values of the cookies whose names say they hold a session
  (`session`, `sess`, `sid`, `auth`, `token`, `jwt`) and that look like keys; the names, the
  other cookies and the attributes (`Path=/`) stay, and so does a `csrftoken` or an
  `XSRF-TOKEN`: an anti-forgery nonce, as the names' rule leaves `csrf_token`.
"""

from __future__ import annotations

import re
from collections import Counter
from urllib.parse import unquote_plus

from reactive_temporal.secret_labels import NAMES, delimited_value, key_value, plain_value
from reactive_temporal.secret_rules import (
    CREDENTIAL,
    MARKER_PREFIX,
    Rule,
    both_cases,
    keylike,
    marker,
    rule,
    secret_of,
)

_ENCODED_CHAR = r"(?:[A-Za-z0-9._~!*+-]|%(?!2[0267cC]|3[bBdD]|7[dD])[0-9A-Fa-f]{2})"
"""A character of an encoded value, or its escape; not the escapes that end it (a space, `"`,
`&`, `'`, `,`, `;`, `=`, `}`)."""
_QUOTED_CHAR = r"(?:[A-Za-z0-9._~!*'()+-]|%(?!22)[0-9A-Fa-f]{2})"
"""A character of an encoded JSON string (`%22…%22`): its `%26` or `%20` is its own."""


def _encoded(m: re.Match[str]) -> str | None:
    decoded = unquote_plus(secret_of(m))
    return delimited_value(m, decoded) if plain_value(decoded) else None


ENCODED: tuple[Rule, ...] = (
    Rule(
        re.compile(
            rf"(?i)(?=[aciprst])(?P<name>{NAMES})(?![A-Za-z0-9])(?:%2[27])?(?:%20|\+){{0,5}}"
            rf"%3[ad](?:%20|\+){{0,5}}(?:%22(?P<quoted>{_QUOTED_CHAR}{{1,300}})%22"
            rf"|(?:%27)?(?P<secret>{_ENCODED_CHAR}{{1,300}}))"
        ),
        _encoded,
        needles=("%3d", "%3a"),
        folded=True,
    ),
)
"""With the names' rules: a value they took is a marker by then."""

URL_TOKENS: tuple[Rule, ...] = (
    # a token as a URL's whole userinfo: `https://<token>@github.com/o/r.git` (GitHub's, and
    # GitLab's, documented way to clone with one); a user's name has no 16 random characters
    rule(
        CREDENTIAL,
        r"://(?P<secret>[A-Za-z0-9_-]{16,255})@(?=[A-Za-z0-9\[])",
        keylike,
        needles=("://",),
    ),
)
"""With the names' rules, after the URL's `user:password@`."""

_COOKIES = re.compile(
    r"(?i)(?:(?<![\w-])(?:set-)?cookie[\"']?[ \t]*:|(?<![\w-])--cookie(?:[ \t]*=|[ \t]+))"
    r"[ \t]*[\"']?(?P<pairs>[^\r\n\"'\\]{1,8000})"
)
"""A `Cookie:` or `Set-Cookie:` header (in a JSON object too), or curl's `--cookie`, up to its
line's or its string's end."""
_PAIR = re.compile(r"(?P<name>[^\s=;,\"']{1,100})=(?P<value>[^\s;,\"']{1,4000})")
_SESSION_NAME = re.compile(r"sess|sid(?![a-z])|auth(?!or)|token|jwt")
_NONCE_NAME = re.compile(r"csrf|xsrf")


def cookies(text: str, found: Counter[str]) -> str:
    """`text` with the values of session cookies in its cookie headers replaced."""
    if "ookie" not in text.lower():
        return text

    def header(m: re.Match[str]) -> str:
        start = m.start("pairs") - m.start()
        whole = m.group(0)
        return whole[:start] + _PAIR.sub(pair, whole[start:])

    def pair(m: re.Match[str]) -> str:
        name, value = m.group("name").lower(), m.group("value")
        if (
            _SESSION_NAME.search(name) is None
            or _NONCE_NAME.search(name) is not None
            or value.startswith(MARKER_PREFIX[:9])
            or not (key_value(value) or (len(value) >= 16 and both_cases(value)))
        ):
            return m.group(0)
        found[CREDENTIAL] += 1
        return f"{m.group('name')}={marker(CREDENTIAL)}"

    return _COOKIES.sub(header, text)
