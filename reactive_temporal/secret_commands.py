"""Passwords on a command line, where only the command says what an option's value is: part
of the credential scan (`reactive_temporal/secrets_scan.py`).

- `curl -u user:password`, `--user user:password`, `-uuser:password` (gitleaks'
  `curl-auth-user`): the password; or, with none (`-u sk_…:`, an API key as the user, as
  Stripe's and Mailgun's documentation write it), the user when it looks like a key;
- `mysql -pPASSWORD` (and `mysqldump`, `mysqladmin`, `mariadb`): the value glued to `-p`
  (`-p` alone, or `-p NAME`, asks for the password and names a database);
- `sshpass -p PASSWORD` (its first `-p`: a later `ssh -p 2222` is a port);
- `redis-cli -a PASSWORD`;
- `openssl … -passin pass:PASSWORD` (`-pass`, `-passout`), anywhere: `pass:` says it;
- `docker login -p PASSWORD` (podman, nerdctl, buildah, skopeo, oras, finch, `helm registry
  login`, `az login`, `az acr login`), in the login's own command;
- `echo PASSWORD | … --password-stdin` (`gh auth login --with-token`), `--password-stdin <<<
  PASSWORD`;
- `npm config set //registry/:_authToken TOKEN` (`_auth`, `_password`; yarn's `npmAuthToken`);
- a Dockerfile's `ENV DB_PASSWORD hunter2`, the form without `=`.

An option counts only on a line that runs the command (a `\\`-continued line goes on to the
next): `-u 1000:1000` is a user and group to `docker run`, `-p 8080:80` a port. Placeholders
are left, as gitleaks' allowlist leaves them (`user:password`, `user:pass`, `:changeme`,
`$TOKEN`, `<password>`, `***`), and so is `uid:gid`. The long options (`--password=x`,
`wget --password x`, `PGPASSWORD=x psql`) are names, read with the others
(`secret_labels.py`).

Linear time: each line holding a command is read once, however many commands it holds.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import partial

from reactive_temporal.secret_labels import NAMES, delimited_value, key_value, plain_value
from reactive_temporal.secret_rules import CREDENTIAL, PASSWORD, marker

_COMMAND = re.compile(
    r"(?<![\w.-])(curl|mysql|mysqldump|mysqladmin|mariadb|mariadb-dump|sshpass|redis-cli)"
    r"(?![\w.-])"
)
_VALUE = r"""(?:(?P<q>["'])(?P<quoted>[^"'\r\n]{1,300})(?P=q)|(?P<plain>[^\s"'\x60]{1,300}))"""
_OPTIONS = {
    "curl": re.compile(r"(?<![\w-])(?:-u|--user)(?:[ \t]*=[ \t]*|[ \t]+|(?=[^\s-]))" + _VALUE),
    "mysql": re.compile(r"(?<![\w-])-p" + _VALUE),
    "sshpass": re.compile(r"(?<![\w-])sshpass(?:[ \t]+-[^p\s]\S*)*[ \t]+-p[ \t]*" + _VALUE),
    "redis-cli": re.compile(r"(?<![\w-])-a[ \t]+" + _VALUE),
}
_FAMILY = {"mysqldump": "mysql", "mysqladmin": "mysql", "mariadb": "mysql", "mariadb-dump": "mysql"}
_OPENSSL = re.compile(r"(?<![\w-])-pass(?:in|out)?[ \t]+pass:" + _VALUE)
_UID_GID = re.compile(r"[0-9]+")
_ARG = r"(?:[ \t]+|[ \t]*\\\r?\n[ \t]*)"
"""Between a command's words: spaces, or a `\\`-continued line."""
_LOGIN = re.compile(
    r"(?<![\w.-])(?:(?:docker|podman|nerdctl|buildah|skopeo|oras|finch)"
    rf"|helm{_ARG}registry|az(?:{_ARG}acr)?){_ARG}login"
    rf"(?:{_ARG}(?!-p)[^\s;&|]+){{0,30}}?{_ARG}-p(?:[ \t]*=[ \t]*|[ \t]*)(?!-)"
    r"""(?:(?P<q>["'])(?P<quoted>[^"'\r\n]{1,300})(?P=q)|(?P<plain>[^\s"'\x60;&|]{1,300}))"""
)
"""A registry's or a cloud's login and its `-p` (`docker login -u me -p x`, `az login -p x`),
in the same command: `docker run -p 8080:80` is a port."""
_PIPED = re.compile(
    r"(?<![\w-])echo[ \t]+(?:-[neE]{1,3}[ \t]+)?" + _VALUE + r"[ \t]*\|[ \t]*"
    r"[^\r\n|;&]{0,300}?(?<![\w-])(?:--password-stdin|--with-token)(?![\w-])"
)
"""A password or a token echoed into a login that reads it from stdin (`echo x | docker login
--password-stdin`, `echo x | gh auth login --with-token`); not `cat file |`."""
_HERE_STRING = re.compile(
    r"(?<![\w-])(?:--password-stdin|--with-token)(?![\w-])[^\r\n|;&]{0,300}?<<<[ \t]*" + _VALUE
)
"""The same login given its password as a here-string: `--password-stdin <<< x`."""
_NPM_CONFIG = re.compile(
    r"(?<![\w-])(?:npm|pnpm|yarn)[ \t]+config[ \t]+set[ \t]+(?:-[\w=-]{1,40}[ \t]+){0,4}"
    r"[^\s=]{0,200}?(?P<name>_authToken|_auth|_password|npmAuthToken|npmAuthIdent)"
    r"(?:[ \t]*=[ \t]*|[ \t]+)" + _VALUE
)
"""A registry's credential set with npm's own command: `npm config set
//registry.npmjs.org/:_authToken x` (with `=`, the name's rule has it)."""
_DOCKERFILE_ENV = re.compile(
    r"(?m)^[ \t]*ENV[ \t]+(?P<var>[A-Za-z0-9_]{0,40}?)"
    rf"(?i:(?P<name>{NAMES}))[ \t]+"
    r"""(?:(?P<q>["'])(?P<quoted>[^"'\r\n]{1,200})(?P=q)|(?P<secret>[^\s"'][^\r\n]{0,199}?))"""
    r"[ \t]*(?=\r?\n|$)"
)
"""A Dockerfile's `ENV DB_PASSWORD hunter2`: the form without `=` (which the names' rule reads),
its value the rest of the line."""


def commands(text: str, found: Counter[str]) -> str:
    """`text` with the passwords given to these commands replaced."""
    if "pass:" in text:
        text = _OPENSSL.sub(partial(_password, found=found), text)
    if "login" in text:
        text = _LOGIN.sub(partial(_password, found=found), text)
    if "-stdin" in text or "--with-token" in text:
        for each in (_PIPED, _HERE_STRING):
            text = each.sub(partial(_stdin, found=found), text)
    if "config" in text and ("npm" in text or "yarn" in text):
        text = _NPM_CONFIG.sub(partial(_npm, found=found), text)
    if "ENV " in text or "ENV\t" in text:
        text = _DOCKERFILE_ENV.sub(partial(_env, found=found), text)
    if _COMMAND.search(text) is None:
        return text
    pieces: list[str] = []
    done = 0
    for command in _COMMAND.finditer(text):
        if command.start() < done:
            continue  # on a line already read
        start = text.rfind("\n", done, command.start()) + 1 or done
        end = _line_end(text, command.end())
        line = text[start:end]
        for name in sorted({_FAMILY.get(c, c) for c in _COMMAND.findall(line)}):
            judge = _user_password if name == "curl" else _password
            line = _OPTIONS[name].sub(partial(judge, found=found), line)
        pieces += [text[done:start], line]
        done = end
    pieces.append(text[done:])
    return "".join(pieces)


def _line_end(text: str, at: int) -> int:
    """Where the line holding `at` ends, a `\\`-continued line going on to the next."""
    while True:
        end = text.find("\n", at)
        if end < 0:
            return len(text)
        last = end - 1 if end > 0 and text[end - 1] != "\r" else end - 2
        if last >= 0 and text[last] == "\\":
            at = end + 1
            continue
        return end


def _value(m: re.Match[str]) -> tuple[str, int]:
    group = "quoted" if m.group("quoted") is not None else "plain"
    return m.group(group), m.start(group) - m.start()


def _replace(m: re.Match[str], at: int, length: int, kind: str, found: Counter[str]) -> str:
    found[kind] += 1
    whole = m.group(0)
    return whole[:at] + marker(kind) + whole[at + length :]


def _password(m: re.Match[str], found: Counter[str]) -> str:
    value, at = _value(m)
    if not plain_value(value):
        return m.group(0)
    return _replace(m, at, len(value), PASSWORD, found)


def _user_password(m: re.Match[str], found: Counter[str]) -> str:
    """`user:password`: the password, or a key given as the user with no password."""
    value, at = _value(m)
    user, colon, password = value.partition(":")
    if not colon:
        return m.group(0)  # curl asks for the password
    if not password:
        return _replace(m, at, len(user), CREDENTIAL, found) if key_value(user) else m.group(0)
    if not plain_value(password) or (_UID_GID.fullmatch(user) and _UID_GID.fullmatch(password)):
        return m.group(0)
    return _replace(m, at + len(user) + 1, len(password), PASSWORD, found)


def _stdin(m: re.Match[str], found: Counter[str]) -> str:
    """What a login reads from stdin: a password, or for `--with-token` a token."""
    value, at = _value(m)
    if not plain_value(value):
        return m.group(0)
    kind = CREDENTIAL if "--with-token" in m.group(0) else PASSWORD
    return _replace(m, at, len(value), kind, found)


def _npm(m: re.Match[str], found: Counter[str]) -> str:
    value, at = _value(m)
    if not plain_value(value):
        return m.group(0)
    kind = PASSWORD if m.group("name") == "_password" else CREDENTIAL
    return _replace(m, at, len(value), kind, found)


def _env(m: re.Match[str], found: Counter[str]) -> str:
    """A Dockerfile's `ENV NAME value`, judged as the value after the same name with `=` is."""
    kind = delimited_value(m)
    if kind is None:
        return m.group(0)
    group = "quoted" if m.group("quoted") is not None else "secret"
    return _replace(m, m.start(group) - m.start(), len(m.group(group)), kind, found)
