"""DATABASE_URL_FILE: the Postgres URL in a file, checked at the start like DATABASE_URL and read
again, when it changed, for each new connection of a worker (dynamic credentials)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from reactive_temporal import database_settings
from reactive_temporal.config import Settings
from reactive_temporal.database_settings import (
    MAX_URL_BYTES,
    UrlFile,
    conninfo_now,
    read_url_file,
)
from reactive_temporal.sanitize import redact_dsn

SECRET = "S3cret-lease-pw"
FIRST = f"postgresql://v-agents-1:{SECRET}@db.internal:5432/agents"
SECOND = "postgresql://v-agents-2:An0ther-pw@db.internal:5432/agents?sslmode=require"


@pytest.fixture(autouse=True)
def no_database_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DATABASE_URL", "DATABASE_URL_FILE"):
        monkeypatch.delenv(name, raising=False)


def written(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def settings(**values: object) -> Settings:
    return Settings(_env_file=None, **values)  # type: ignore[call-arg, arg-type]


def test_the_url_is_read_at_the_start_like_database_url(tmp_path: Path) -> None:
    path = written(tmp_path / "url", f"  {FIRST}\n")
    read = settings(database_url_file=path)
    assert read.database_url == FIRST
    words = written(tmp_path / "words", "host=db user=v-agents-1 dbname=agents\n")
    assert settings(database_url_file=words).database_url.startswith("host=db")  # type: ignore[union-attr]
    assert settings(database_url_file="  ").database_url is None  # blank: unset


def test_database_url_and_its_file_both_set_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = written(tmp_path / "url", FIRST)
    monkeypatch.setenv("DATABASE_URL", SECOND)
    with pytest.raises(ValidationError, match="DATABASE_URL and DATABASE_URL_FILE are both set"):
        settings(database_url_file=path)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("", "is empty"),
        ("\n  \n", "is empty"),
        (f"{FIRST}\n{SECOND}\n", "holds more than one line (one URL is expected)"),
        (f"{FIRST}\x00", "holds a control character"),
        (f"mysql://root:{SECRET}@db/agents", "does not hold a PostgreSQL URL"),
        (f"{SECRET}", "does not hold a PostgreSQL URL"),
        (f"host=db password='{SECRET}", "holds a URL libpq cannot parse"),
        (f"postgresql://u:{SECRET}@[::1/agents", "holds a URL libpq cannot parse"),
        ("postgresql://" + "x" * MAX_URL_BYTES, f"is longer than {MAX_URL_BYTES} bytes"),
    ],
)
def test_bad_content_names_the_setting_and_the_file_never_the_content(
    tmp_path: Path, content: str, problem: str
) -> None:
    path = written(tmp_path / "url", content)
    with pytest.raises(ValueError) as refused:
        read_url_file(path)
    assert str(refused.value).startswith(f"DATABASE_URL_FILE: file {path} {problem}")
    assert SECRET not in str(refused.value)
    with pytest.raises(ValidationError) as at_start:
        settings(database_url_file=path)
    assert f"DATABASE_URL_FILE: file {path} {problem}" in str(at_start.value)
    assert SECRET not in str(at_start.value)


def test_a_missing_file_or_a_directory_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"DATABASE_URL_FILE: cannot read file .*/nope \("):
        read_url_file(str(tmp_path / "nope"))
    with pytest.raises(ValueError, match="is not a regular file"):
        read_url_file(str(tmp_path))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # a FIFO would hold the start: refused without waiting for a writer
    with pytest.raises(ValueError, match="is not a regular file"):
        read_url_file(str(fifo))


def test_new_credentials_are_used_from_the_next_connection(tmp_path: Path) -> None:
    path = tmp_path / "url"
    url = UrlFile(written(path, FIRST))
    assert conninfo_now(url) == url() == FIRST
    written(path, SECOND)  # rewritten in place
    assert url() == SECOND
    renamed = tmp_path / "url.new"  # by rename, as a Kubernetes secret or Vault agent writes
    renamed.write_text(FIRST)
    renamed.replace(path)
    assert url() == FIRST


def test_an_unchanged_file_is_looked_at_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = UrlFile(written(tmp_path / "url", FIRST))
    reads: list[str] = []
    real = database_settings.read_url_file

    def counted(path: str, where: str = "DATABASE_URL_FILE") -> str:
        reads.append(path)
        return real(path, where)

    monkeypatch.setattr(database_settings, "read_url_file", counted)
    assert [url() for _ in range(5)] == [FIRST] * 5
    assert reads == []


def test_a_file_caught_mid_rewrite_keeps_the_last_url_warned_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "url"
    url = UrlFile(written(path, FIRST))
    with caplog.at_level(logging.INFO, logger="reactive_temporal.database_settings"):
        written(path, "")  # truncated, not yet written
        assert [url(), url()] == [FIRST, FIRST]
        written(path, f"{SECOND}\npostgresql://half")  # two writers, or a wrong file
        assert url() == FIRST
        path.unlink()  # between a delete and a rename
        assert url() == FIRST
        written(path, SECOND)
        assert url() == SECOND
    said = [r.getMessage() for r in caplog.records]
    assert said == [
        f"DATABASE_URL_FILE: file {path} is empty; new connections use the last URL read from "
        "it meanwhile",
        f"DATABASE_URL_FILE: the URL in {path} was read again (it changed)",
    ]
    assert all(SECRET not in line and "An0ther-pw" not in line for line in said)


def test_only_the_url_read_from_the_file_is_read_again(tmp_path: Path) -> None:
    """The worker serves the URL the file gave (re-read at each connection); any other URL it
    is handed (a test's, the dev stack's) is used as it is."""
    path = tmp_path / "url"
    from_file = settings(database_url_file=written(path, FIRST))
    conninfo = from_file.database_conninfo(FIRST)
    assert isinstance(conninfo, UrlFile)
    written(path, SECOND)
    assert conninfo_now(conninfo) == SECOND
    assert from_file.database_conninfo("postgresql://other@h/db") == "postgresql://other@h/db"
    plain = settings(database_url=FIRST)
    assert plain.database_conninfo(FIRST) == FIRST


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://agents_worker@db.internal:5432/agents",
        "postgresql://agents_worker@db.internal/agents?sslmode=verify-full&passfile=/run/pgpass",
        "postgresql://agents_worker@/agents?host=/var/run/postgresql&port=5432",
        "postgresql://db.internal:5432/agents?user=agents_worker",
        "host=db.internal user=agents_worker dbname=agents passfile=/run/pgpass",
    ],
)
def test_a_url_without_a_password_is_taken_and_shown_as_it_is(dsn: str) -> None:
    """A password rotated in PGPASSFILE: the URL holds none, and nothing asks for one."""
    assert settings(database_url=dsn).database_url == dsn
    assert redact_dsn(dsn) == dsn
