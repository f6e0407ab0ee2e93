"""Credentials known by what stands before them: a name (`api_key=`, `"password": `,
`**Password:**`, `DB_PASSWORD=`), a header (`Authorization: Bearer`), a URL's `user:password@`
or a command-line option (`--password x`); part of the credential scan
(`reactive_temporal/secrets_scan.py`). The name and what is around the value stay, so the text
stays readable: `Password: [redacted: password]`.

Two kinds of names, two kinds of values:
- a key's name (`api_key`, `token`, `client_secret`, `AccountKey`, …; gitleaks'
  `generic-api-key` without its entropy): the value must look like a key, 8+ characters
  holding letters and digits, no spaces, not a URL, not `${…}` (`api_key: your_api_key_here`
  is a placeholder). A token whose name says it is none (`page_token`, `nextPageToken`,
  `NextToken`, `csrf_token`, `authenticity_token`, `public_token`: a page's cursor, a form's
  anti-forgery nonce) is left: gitleaks leaves `csrf-token` and `public_token` too;
- a password's or a secret's name (`password`, `passwd`, `passphrase`, `pwd`, `secret`,
  `client_secret`, `secret_key`, `private_key`): any value a person chose, `hunter2` and
  `x` too, where it is plainly the value: quoted (`password = "x"`, `"password": "x"`),
  the rest of its line or field (`Password: hunter2`, YAML, `.env`, `;Password=x;`,
  `&password=x&`), or after `=` with no spaces (`PGPASSWORD=x psql`, `password=x dbname=y`).
  Not prose (`the password is required`, `Password: Enter your password`, a quoted sentence
  such as a form's `"password": "This field may not be blank."`), a placeholder or a word
  that says there is none (`required`, `None`, `********`, `<password>`, `${PW}`,
  `changeme`), code (`password=os.environ[…]`, `password=self.password`, `getpass()`), a
  path or a URL.
"""

from __future__ import annotations

import re

from reactive_temporal.secret_rules import (
    AUTHORIZATION,
    AWS_SECRET,
    BEARER,
    CREDENTIAL,
    MARKER_PREFIX,
    PASSWORD,
    QUOTE,
    SEP,
    STRING_PREFIX,
    URL_PASSWORD,
    Rule,
    has_digit,
    mixed,
    rule,
    secret_of,
)

# -- values -------------------------------------------------------------------------------------

_NOT_SET = frozenset(
    """none null nil undefined true false yes no on off empty blank required optional hidden
    masked redacted omitted removed censored unset set notset n/a na tbd todo changeme changeit
    password passwd passphrase pwd pass secret test example sample default string str int bool
    boolean text varchar char bytes any object secretstr private value""".split()
)
"""Words that say what a value is, or that there is none: not a password."""
_DOTTED_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
_FIELD_END = re.compile(r"[ \t]*(?:\r?\n|\r|\\[nr]|$)|[;&]|[ \t]+#")
"""Where a value ends its line or its field (`;Password=x;`, `&password=x&`, `x  # note`); a
comma too after `=` (`password=x, host=y`), not after `:` (`password: chosen, and …` is prose)."""
_PARENTHETICAL = re.compile(r"[ \t]+\(")
"""A note after a value (`Password: hunter2 (changed)`, `Password: x (rotated)`); not a call
(`password = quote(password)`)."""
_NAMING_WORD = re.compile(r"(?i)pass(?:word|wd|phrase)|secret|key|token|credential")
_PLACEHOLDER = re.compile(r"(?i)your[_ -]?(?:\w+[_ -]?)?(?:pass|secret|key|token)")


def key_value(value: str) -> bool:
    """A value assigned to a key's name that is a key, not a placeholder, a template, a URL
    or a word: 8+ characters, letters and digits."""
    if value.startswith(("$", "%(", "{{")) or "://" in value:
        return False
    return len(value) >= 8 and mixed(value)


def _masked(value: str) -> bool:
    return (
        not value.strip("*•")
        or set(value) <= set(".-_~#…")
        or (len(value) >= 3 and set(value) <= {"x", "X"})
    )


def _chosen(value: str) -> bool:
    """What a password or a secret's value can be and a placeholder, a template, a path, a
    URL or a word saying there is none cannot."""
    word = value.rstrip(".").lower()
    return not (
        not word
        or word in _NOT_SET
        or _masked(value)
        or value.startswith(("$", "%(", "{{", "<", "[", "!", "*", "ENC[", "/", "~/", "./", "../"))
        or "://" in value
        or MARKER_PREFIX in value
        or _PLACEHOLDER.match(value) is not None
    )


def plain_value(value: str) -> bool:
    """An unquoted password: chosen, and not code naming where it is (`self.password`,
    `settings.DB_PASSWORD`, `DB_PASSWORD`)."""
    return (
        _chosen(value)
        and _DOTTED_NAME.fullmatch(value) is None
        and _ENV_NAME.fullmatch(value) is None
    )


_HYPHENATED_WORD = re.compile(r"[A-Za-z0-9]+(?:-[a-z]{2,})+")
_NUMBER_LIKE = re.compile(r"v?[0-9]+(?:[.:/,-][0-9]+)+[A-Za-z%]{0,3}")
_ACRONYM = re.compile(r"[A-Z]{1,8}-?[0-9]{1,4}")
_SYMBOL = re.compile(r"[^A-Za-z0-9'._-]")
_SNAKE_CASE = re.compile(r"_?[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+")


def shaped(value: str) -> bool:
    """A value with the shape of a chosen secret, not of a word, a number or a name: five or
    more characters, chosen (`plain_value`), holding a digit or a symbol; six or more digits
    alone. Not mixed case alone: `GitHub`, `SSHPrivateKeyTypes` are names.
    Not a hyphenated word (`base64-encoded`, `SHA256-hashed`, `2048-bit`, `k8s-managed`), a
    date, a time or a version (`2024-05-01`, `v1.2.3`), an acronym (`SHA256`, `AES256`), nor
    code's name (`client_secret`, `auth_info2`: `_` and `.` are a name's, not symbols).
    Where no quote or field says a value is one (`the password is hunter2`, `Password:
    hunter2 (changed)`), only this shape tells it from prose (`the password is wrong`)."""
    if len(value) < 5 or not plain_value(value):
        return False
    if value.isdigit():
        return len(value) >= 6
    if any(p.fullmatch(value) for p in (_HYPHENATED_WORD, _NUMBER_LIKE, _ACRONYM, _SNAKE_CASE)):
        return False
    return has_digit(value) or _SYMBOL.search(value) is not None


def _quoted_value(value: str) -> bool:
    """A quoted password: chosen, and not words about it: a sentence (a form's error about
    the field), or a description naming what it is (`PRIVATE_KEY = "private key"`)."""
    text = value.strip()
    words = " " in text and (
        text.endswith((".", "!", "?")) or _NAMING_WORD.search(text) is not None
    )
    return _chosen(text) and not words


# -- names --------------------------------------------------------------------------------------

_NAME_CHARS = re.compile(r"[A-Za-z0-9_.-]{0,40}\Z")
_NOT_A_CREDENTIAL_TOKEN = (
    "page", "next", "pagination", "continuation", "cursor", "sync", "delta", "skip", "starting",
    "resume", "csrf", "xsrf", "csrfmiddleware", "authenticity", "antiforgery",
    "requestverification", "public", "client", "request", "idempotency",
)  # fmt: skip
"""What a token's name begins with when it is a page's cursor, an anti-forgery nonce, an
idempotency key or a public id (`nextPageToken`, `csrf_token`, AWS's `ClientToken`)."""
_NOT_A_SECRET = ("existing", "from", "k8s", "kubernetes")
"""What a secret's name begins with when its value names a secret kept elsewhere
(a Helm chart's `existingSecret: db-credentials`, Drone's `from_secret: token`)."""
_NOT_A_PASSWORD = ("no",)
"""What a password's name begins with when it says there is none (sudoers' `NOPASSWD: ALL`)."""
_SERVICES = (
    "db", "database", "smtp", "mail", "email", "imap", "redis", "mysql", "pg", "postgres", "sql",
    "mongo", "ldap", "ftp", "sftp", "ssh", "vnc", "rdp", "wifi", "proxy", "amqp", "rabbitmq",
    "admin", "root", "user", "login", "auth", "basicauth", "account", "registry", "docker",
)  # fmt: skip
"""What a bare `pass` follows when it is a password's name (`DB_PASS`, `smtp_pass`)."""
_PASSWORDS = ("password", "passwd", "passphrase", "pwd", "sshpass", "pass")


def _normal(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _prefix(m: re.Match[str]) -> str:
    """The part of the name before the word the pattern matched (`nextPage` of
    `nextPageToken`), at most 40 characters back."""
    start = m.start("name")
    before = _NAME_CHARS.search(m.string, max(0, start - 40), start)
    return _normal(before.group(0)) if before else ""


def _kind_by_name(name: str) -> str:
    return PASSWORD if _normal(name) in _PASSWORDS else CREDENTIAL


def _key_named(m: re.Match[str]) -> str | None:
    name = _normal(m.group("name"))
    if name == "token" and _prefix(m).endswith(_NOT_A_CREDENTIAL_TOKEN):
        return None
    if not key_value(secret_of(m)):
        return None
    return _kind_by_name(name)


def _not_this_secret(m: re.Match[str], name: str) -> bool:
    """What stands before a secret's name says it is none (`existingSecret`, `NOPASSWD`), or
    a bare `pass` is no service's password (`bypass`, `first_pass`, not `DB_PASS`)."""
    prefix = _prefix(m)
    if name == "pass":
        at = m.start("name")
        before = m.string[at - 1 : at]
        apart = before in ("_", "-", ".") or (m.string[at] == "P" and before.islower())
        return not (apart and prefix.endswith(_SERVICES))  # `DB_PASS`, `smtpPass`: not `userpass`
    return prefix.endswith(_NOT_A_SECRET if "secret" in name else _NOT_A_PASSWORD)


def delimited_value(m: re.Match[str], value: str | None = None) -> str | None:
    """The kind of a value (group `quoted`, or `secret` unquoted; or `value`, as decoded) after
    a name (group `name`, a key's or a secret's): any chosen value for a password's or a
    secret's name, a key for a key's."""
    name = _normal(m.group("name"))
    value = secret_of(m) if value is None else value
    quoted = "quoted" in m.re.groupindex and m.group("quoted") is not None
    if _SECRET_NAME_END.search(m.group("name")):  # `client_secret` as `secret`
        judged = _quoted_value(value) if quoted else plain_value(value)
        chosen = not _not_this_secret(m, name) and judged
        return _kind_by_name(name) if chosen else None
    if name == "token" and _prefix(m).endswith(_NOT_A_CREDENTIAL_TOKEN):
        return None
    return _kind_by_name(name) if key_value(value) else None


def _secret_named(m: re.Match[str]) -> str | None:
    name = _normal(m.group("name"))
    if _not_this_secret(m, name):
        return None
    if m.group("quoted") is not None:
        chosen = _quoted_value(m.group("quoted"))
    elif m.group("typed") is not None:
        return None  # `password: str = x` is code; a typed value is quoted
    elif m.group("emphasized") is not None:
        chosen = plain_value(m.group("emphasized"))
    else:
        after = m.string[m.end() : m.end() + 1]
        env_style = m.group("sep") == "=" and not m.group("pre") and not m.group("post")
        ends = (env_style and (not after or after.isspace() or after == ",")) or _FIELD_END.match(
            m.string, m.end()
        ) is not None
        value = m.group("secret")
        chosen = (
            plain_value(value)
            if ends or _PARENTHETICAL.match(m.string, m.end())
            else shaped(value)  # words after it: `Password: hunter2 — rotated monthly`
        )
    return _kind_by_name(m.group("name")) if chosen else None


def _option(m: re.Match[str]) -> str | None:
    """`--password x` takes any chosen value, `--token x` a key's."""
    kind = _kind_by_name(m.group("name"))
    value = secret_of(m)
    if kind == PASSWORD:
        return (
            kind if (plain_value(value) if m.group("quoted") is None else _chosen(value)) else None
        )
    return kind if key_value(value) else None


_KEY_NAMES = (
    r"api[_-]?key|apikey|api[_-]?token|api[_-]?secret|access[_-]?key(?:[_-]?id)?"
    r"|access[_-]?token|auth[_-]?token|refresh[_-]?token|session[_-]?token|id[_-]?token"
    r"|client[_-]?secret|secret[_-]?key|private[_-]?key|app(?:lication)?[_-]?key"
    r"|account[_-]?key|secret|token|password|passwd|passphrase|pwd|credentials?"
)
_SECRET_NAMES = (
    r"sshpass|pass(?:word|wd|phrase)?|pwd"
    r"|secret(?:[_-]?(?:access[_-]?)?key)?|private[_-]?key"
)
_SECRET_NAME_END = re.compile(rf"(?i:{_SECRET_NAMES})\Z")
NAMES = rf"{_SECRET_NAMES}|{_KEY_NAMES}"
"""A secret's or a key's name, for the rules of other modules (`secret_markup.py`)."""
_OPTION_NAMES = (
    r"pass(?:word|wd|phrase)?|token|api-?key|secret|client-secret|(?:access|auth|api|refresh)-token"
)
_TYPE_ONE = r"[A-Za-z_][\w.]{0,40}(?:\[[\w., |\[\]'\x60]{0,60}\])?"
_TYPE = (
    rf"&?(?:'[a-z]{{1,20}}[ \t]{{1,3}})?{_TYPE_ONE}"
    rf"(?:[ \t]{{0,3}}\|[ \t]{{0,3}}{_TYPE_ONE}){{0,3}}"
)
TYPED = (
    rf"(?P<typed>\??[ \t]{{0,5}}:[ \t]{{0,5}}{_TYPE}[ \t]{{0,5}}=)[ \t]{{0,5}}"
    r"(?=[bBrRuU]{0,2}\\?[\"'\x60])"
)
"""A name's type annotation and `=`: `password: str = "x"`, `api_key: Final = 'x'`,
`const password: string = "x"`, `apiKey?: string | undefined = 'x'`, Rust's `&'static str`;
a quote must follow (`password: aHVudGVyMg==` is a value, a Kubernetes secret's base64)."""
_EMPHASIS = r"(?:\*\*?|__?)?"
"""Markdown around a label: `**Password:**`, `__Password__:`."""
_QUOTED = (
    r"""(?P<esc>\\)?(?P<q>["'\x60])"""
    r"""(?P<quoted>(?:[^"'\x60\r\n\\]|(?!(?P=q))["'\x60]|(?(esc)\\(?!(?P=q))[^\r\n]|\\[^\r\n]))"""
    r"{1,200})(?(esc)\\)(?P=q)"
)
"""A quoted value, its escapes kept inside (`"a\\"b"`); in JSON inside a JSON string
(`\\"password\\": \\"x\\"`) the escaped quote is the one that closes it."""
_EMPHASIZED = (
    r"""(?P<em>\*\*?|__?)(?P<emphasized>[^\s"'\x60<>(){}\[\]|\\,;&*]{1,200})(?P=em)(?![*\w])"""
)
"""A value in markdown's emphasis, which stays: `Password: **hunter2**`, `_x_`."""
_VALUE_CHAR = r"""[^\s"'\x60<>(){}\[\]|\\,;&]"""
_UNQUOTED = (
    rf"(?P<secret>{_VALUE_CHAR}(?:{_VALUE_CHAR}"
    r"|(?(query)(?!)|&(?![\w.%\[\]-]{0,40}=|&|#|[A-Za-z]{2,8};)"
    rf"(?={_VALUE_CHAR}))){{0,199}})"
)
"""A value up to a space, a quote or a bracket. An `&` inside it is the value's
(`Password: Tr0ub4dor&3`), but in a URL's query (`?password=x&next=y`, where a value's own
`&` is `%26`), before a next field (`password=x&user=y`), as `&&` and as an HTML entity."""

LABELS: tuple[Rule, ...] = (
    # aws-access-token's secret half: 40 base64 characters alone are any hash
    rule(
        AWS_SECRET,
        r"(?i:(?:aws[_-]?)?secret[_-]?access[_-]?key)"
        + SEP
        + r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        needles=("secret",),
        folded=True,
    ),
    # user, then the password up to the last `@` before the path (a password may hold `@`);
    # both stop at `/`, so each `://` reads as far as the next one at most
    rule(
        URL_PASSWORD,
        r"""://[^\s:/?#@'"<>]*:(?P<secret>[^\s/?#'"<>]+)@""",
        lambda value: not (set(value) <= {"*", "x", "X"} or value.startswith(("$", "{{", "%("))),
        needles=("://",),
    ),
    # curl-auth-header, outside a curl command too
    rule(
        AUTHORIZATION,
        r"(?i)(?<![A-Za-z0-9-])(?:proxy-)?authorization"
        + SEP
        + r"(?:(?:bearer|basic|token|digest)[ \t]{1,5})?(?P<secret>[A-Za-z0-9._~+/=-]{8,})",
        mixed,
        needles=("authorization",),
        folded=True,
    ),
    rule(
        BEARER,
        r"(?i)(?<![A-Za-z0-9-])bearer[ \t]{1,5}(?P<secret>[A-Za-z0-9._~+/=-]{16,})",
        mixed,
        needles=("bearer",),
        folded=True,
    ),
    # a password's or a secret's value, whatever it is, where it is plainly one
    Rule(
        re.compile(
            rf"(?i)(?=[ps])(?P<query>(?<=[?&]))?(?P<name>{_SECRET_NAMES})(?![A-Za-z0-9])"
            rf"(?:{TYPED}"
            rf"|{_EMPHASIS}{QUOTE}?(?P<pre>[ \t]{{0,5}})(?P<sep>=>|:=|=|:)"
            rf"(?:\*\*?(?=[ \t])|__?(?=[ \t]))?(?P<post>[ \t]{{0,5}}))"
            rf"(?:{STRING_PREFIX}{_QUOTED}|{_EMPHASIZED}|{_UNQUOTED})"
        ),
        _secret_named,
        needles=("pass", "pwd", "secret", "private"),  # each of _SECRET_NAMES holds one
        folded=True,
    ),
    # a key's value after its name: gitleaks' generic-api-key without its entropy
    Rule(
        re.compile(
            rf"(?i)(?=[aciprst])(?P<name>{_KEY_NAMES})(?![A-Za-z0-9])"
            + rf"(?:{TYPED}{QUOTE}?|{SEP})"
            + r"""(?P<secret>[^\s"'\x60,;&<>()\[\]{}|\\]{8,})"""
        ),
        _key_named,
        needles=("key", "token", "secret", "private", "pass", "pwd", "credential"),  # _KEY_NAMES
        folded=True,
    ),
    # a command's long option and its value after a space: `--password x`, `--api-key x`
    Rule(
        re.compile(
            r"(?<![\w-])--(?:[A-Za-z0-9]+-)*"
            rf"(?P<name>{_OPTION_NAMES})"
            r"""(?![A-Za-z0-9-])[ \t]{1,5}(?:(?P<q>["'])(?P<quoted>[^"'\r\n]{1,200})(?P=q)"""
            r"""|(?P<secret>[^\s"'\x60-][^\s"'\x60]{0,199}))"""
        ),
        _option,
        needles=("--",),
    ),
)
"""In this order: a password's own rule before a key's (it takes any value), both after the
headers', URLs' and AWS's."""
