"""The agents' Postgres: `DATABASE_URL`, or `DATABASE_URL_FILE` read again for each connection.

A worker runs for weeks; its Postgres credentials may not last that long. A password that
rotates under a fixed user (a Vault static role, an RDS IAM token renewed every 15 minutes by a
sidecar) needs nothing from here: libpq reads `PGPASSFILE` at each new connection when the URL
holds no password. Dynamic credentials (Vault's database secrets engine) change the user as
well, and the old role is dropped when its lease ends, its sessions terminated: the whole URL
changes. `DATABASE_URL_FILE` names a file holding it, checked at the start like DATABASE_URL;
the worker's long-lived connections (its pool, its stop listener) ask `UrlFile` for the URL at
each new connection, which costs a `stat` and a read only when the file changed. Short-lived
commands read it once.

A file caught mid-rewrite (empty for an instant, two URLs, a fragment) keeps the last URL, with
one warning, rather than failing the connections made meanwhile. Problems name the setting and
the file, never the content: the URL holds a password.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeAlias

from pydantic import PrivateAttr, field_validator, model_validator
from pydantic_settings import BaseSettings

from reactive_temporal.http_headers import read_secret_file
from reactive_temporal.key_files import WatchedFile
from reactive_temporal.sanitize import redact_dsn

log = logging.getLogger(__name__)

URL_FILE = "DATABASE_URL_FILE"
MAX_URL_BYTES = 16 * 1024
"""The longest URL file read: a URL with a long token for a password is a few kilobytes, and a
longer file is a wrong path (a log, a binary), not a URL."""
EXAMPLE = "for example postgresql://user@localhost:5432/db"

Conninfo: TypeAlias = str | Callable[[], str]
"""A connection string, or what gives the one to use now (psycopg_pool's `conninfo`)."""


def conninfo_now(conninfo: Conninfo) -> str:
    """The connection string to use for a connection made now."""
    return conninfo if isinstance(conninfo, str) else conninfo()


def is_postgres_url(value: str) -> bool:
    """Whether `value` looks like what libpq takes: a postgresql:// URL or `key=value` words."""
    return value.startswith(("postgresql://", "postgres://")) or "=" in value


def read_url_file(path: str, where: str = URL_FILE) -> str:
    """The connection URL in `path`; a ValueError naming `where` and the file, never its
    content, when it cannot be read (`read_secret_file`), holds more than one line or a control
    character (a file caught mid-rewrite, a wrong file), or is not a URL libpq can parse."""
    text = read_secret_file(path, where, MAX_URL_BYTES)
    if "\n" in text or "\r" in text:
        raise ValueError(f"{where}: file {path} holds more than one line (one URL is expected)")
    if any(c < " " or c == "\x7f" for c in text):
        raise ValueError(f"{where}: file {path} holds a control character")
    if not is_postgres_url(text):
        raise ValueError(f"{where}: file {path} does not hold a PostgreSQL URL ({EXAMPLE})")
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(text)
    except ProgrammingError:  # libpq's message quotes the URL: not repeated
        raise ValueError(
            f"{where}: file {path} holds a URL libpq cannot parse ({EXAMPLE})"
        ) from None
    return text


class UrlFile(WatchedFile):
    """The URL in `path` as it is now; psycopg_pool calls it for each connection it opens."""

    WHAT = "URL"
    MEANWHILE = "new connections use the last URL read from it meanwhile"
    LOG = log

    def __init__(self, path: str, where: str = URL_FILE) -> None:
        super().__init__(path, where, read_url_file)

    def __call__(self) -> str:
        return self.current()


class DatabaseSettings(BaseSettings):
    """The settings that say which Postgres the agents' data lives in (part of `Settings`)."""

    database_url: str | None = None
    database_url_file: str | None = None
    """A file holding the URL instead, read again for each new connection of a worker."""

    _url_file: UrlFile | None = PrivateAttr(default=None)

    @field_validator("database_url")
    @classmethod
    def _postgres_url(cls, value: str | None) -> str | None:
        if value is None or value.strip() == "":
            return None
        if not is_postgres_url(value):
            raise ValueError(
                f"DATABASE_URL={redact_dsn(value)!r} is not a PostgreSQL URL ({EXAMPLE})"
            )
        return value.strip()

    @field_validator("database_url_file")
    @classmethod
    def _blank_file_is_unset(cls, value: str | None) -> str | None:
        return value.strip() if value and value.strip() else None

    @model_validator(mode="after")
    def _url_from_file(self) -> DatabaseSettings:
        """DATABASE_URL_FILE read now, as DATABASE_URL is: said before anything connects."""
        if self.database_url_file is None:
            return self
        if self.database_url is not None:
            raise ValueError(f"DATABASE_URL and {URL_FILE} are both set: set one")
        self._url_file = UrlFile(self.database_url_file)
        self.database_url = self._url_file.current()
        return self

    def database_conninfo(self, url: str) -> Conninfo:
        """What a worker's long-lived connections to `url` connect with: DATABASE_URL_FILE,
        read again for each new connection, when `url` is the URL read from it; else `url`."""
        if self._url_file is not None and url == self.database_url:
            return self._url_file
        return url
