"""Text that can cross any boundary: serialization, Postgres, a prompt, a payload limit.

A model, a web page or an MCP server can send text Python holds but nothing downstream
accepts: a lone surrogate (`"\\ud800"`, from a JSON escape) cannot be encoded as UTF-8, so
the payload converter and Postgres both refuse it, and the step that produced it fails again
on every retry. A NUL character is valid text but Postgres `text` cannot store it. These
helpers make such text storable, changing only what cannot be stored:

- `clean_text`: each lone surrogate becomes U+FFFD (and with `nul=True`, each NUL too); a
  literal backslash-u-0000 (six ordinary characters) is ordinary text and stays as it is;
- `clean_value`: the same, deep, through strings, lists, tuples, dicts (keys too) and
  pydantic models (every field, those a dump leaves out too);
- `clip`: text bounded to a number of characters, its head and tail kept around a marker
  saying how much was cut;
- `one_line`: text as one line for a status display (its whitespace runs one space), cut
  with an ellipsis;
- `redact_dsn`: a Postgres connection string without its password, safe to print.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from pydantic import BaseModel

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_OR_NUL = re.compile("[\ud800-\udfff\x00]")
T = TypeVar("T")


def clean_text(text: str, *, nul: bool = False) -> str:
    """`text` with lone surrogates (and NULs, if asked) replaced by U+FFFD."""
    pattern = _SURROGATE_OR_NUL if nul else _SURROGATE
    return pattern.sub(REPLACEMENT, text) if pattern.search(text) else text


def needs_cleaning(text: str, *, nul: bool = False) -> bool:
    return (_SURROGATE_OR_NUL if nul else _SURROGATE).search(text) is not None


def clean_value(value: T, *, nul: bool = False) -> T:
    """`value` with every string in it cleaned; the same object when nothing needed it."""
    return _clean(value, nul)  # type: ignore[no-any-return]


def _clean(value: Any, nul: bool) -> Any:
    if isinstance(value, str):
        return clean_text(value, nul=nul)
    if isinstance(value, BaseModel):
        # field by field, not through model_dump: a dump leaves out the fields marked
        # `exclude`, and a model rebuilt from it lost them (a tool call's `extra_content`, the
        # thought signature Gemini 3 must be sent back, when its arguments held a surrogate)
        changed = {
            name: cleaned
            for name in type(value).model_fields
            if (cleaned := _clean(getattr(value, name), nul)) is not getattr(value, name)
        }
        extra = value.__pydantic_extra__
        cleaned_extra = _clean(extra, nul) if extra else extra
        if not changed and cleaned_extra is extra:
            return value
        copy = value.model_copy(update=changed)
        if cleaned_extra is not extra:
            copy.__pydantic_extra__ = cleaned_extra
        return copy
    if isinstance(value, dict):
        items = [(_clean(k, nul), _clean(v, nul)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items(), strict=True)):
            return value
        return type(value)(items) if type(value) is not dict else dict(items)
    if isinstance(value, list | tuple):
        cleaned_items = [_clean(v, nul) for v in value]
        if all(c is v for c, v in zip(cleaned_items, value, strict=True)):
            return value
        return type(value)(cleaned_items) if isinstance(value, tuple) else cleaned_items
    return value


def clip(text: str, limit: int, *, what: str = "characters") -> str:
    """`text` when it fits in `limit` characters; else its head (three quarters) and tail
    around a marker naming how much was cut, the whole exactly `limit` long."""
    if len(text) <= limit:
        return text
    keep = limit
    for _ in range(4):  # the marker's length depends on the count it shows: settle it
        marker = f"\n… [{len(text) - keep:,} {what} cut] …\n"
        if len(marker) > limit:
            return text[:limit]
        if keep == limit - len(marker):
            break
        keep = limit - len(marker)
    head = keep - keep // 4
    tail = keep - head
    return text[:head] + marker + (text[len(text) - tail :] if tail else "")


_URL_PASSWORD = re.compile(r"(://[^:/?#@]*):[^/?#]+@")
"""A URL's `user:password@`; `user:@` (an empty password, as the embedded server's) is shown as
it is, not as a password hidden."""
_PASSWORD_PARAMETER = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^&\s]*)", re.IGNORECASE)


def one_line(text: str, limit: int) -> str:
    """`text` on one line (every run of whitespace, newlines included, one space), at most
    `limit` characters: cut with `…` at the end, where a status line's reader looks first."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: max(limit - 1, 0)].rstrip() + "…"


def redact_dsn(dsn: str) -> str:
    """`dsn` (a URL or `key=value` words) with every password in it replaced by `***`: the
    URL's `user:password@` and a `password=` parameter, in its query or as a word."""
    return _PASSWORD_PARAMETER.sub(r"\1***", _URL_PASSWORD.sub(r"\1:***@", dsn))


def database_named(dsn: str) -> str:
    """Which database `dsn` names, as `host:port/name` (no user, no password): a worker
    pointed at another database than its peers' splits their runs' rows between the two,
    and its start-up line is where an operator can see it."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(dsn)
    except Exception:
        return redact_dsn(dsn)
    host = str(parts.get("host") or "local socket")
    name = parts.get("dbname") or parts.get("user") or "?"
    return f"{host}:{parts.get('port') or 5432}/{name}"
