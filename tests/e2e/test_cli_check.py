"""`starter.py check`, the preflight, as an operator runs it: a subprocess against the test's
real dev server, Postgres, scripted model endpoint and TLS proxy.

Each wrong setting fails its own row in one line that names what to change, never a secret,
within the --timeout; the exit status is 1 when a row failed, 0 with warnings only.
"""

from __future__ import annotations

import json
import socket
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread

import psycopg
import pytest
from psycopg import sql

from reactive_temporal.config import Settings
from reactive_temporal.embedded.scripted_llm import ScriptedLLM
from tests.processes import clean_env, start_worker, starter, stop
from tests.support.pki import Pki, make_pki
from tests.support.tls_proxy import TlsProxy

pytestmark = pytest.mark.e2e

RIGHT_KEY = "sk-right-" + uuid.uuid4().hex
WRONG_KEY = "sk-wrong-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def keyed_llm() -> Iterator[ScriptedLLM]:
    """A model endpoint that takes RIGHT_KEY only, answering any other 401 as OpenAI does."""
    with ScriptedLLM(required_key=RIGHT_KEY) as server:
        yield server


@pytest.fixture(scope="module")
def migrated(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The test Postgres with the agents' schema (`starter.py migrate`, as an operator does)."""
    env = clean_env(DATABASE_URL=database_url)
    proc = starter("migrate", env=env, cwd=tmp_path_factory.mktemp("migrate"))
    assert proc.returncode == 0, proc.stderr
    return database_url


def check_env(
    temporal_address: str, database_url: str, llm: ScriptedLLM, tmp_path: Path, **extra: str
) -> dict[str, str]:
    settings = {
        "TEMPORAL_ADDRESS": temporal_address,
        "DATABASE_URL": database_url,
        "OPENAI_BASE_URL": llm.base_url,
        "OPENAI_API_KEY": RIGHT_KEY,
        "TEMPORAL_TASK_QUEUE": f"check-{uuid.uuid4().hex[:8]}",
        "REACTIVE_TEMPORAL_DATA_DIR": str(tmp_path / "data"),
    }
    return clean_env(**{**settings, **extra})


def check_json(env: dict[str, str], cwd: Path, *args: str) -> tuple[int, dict[str, dict]]:
    """`starter.py check --json ARGS`: its exit status and its rows by name."""
    proc = starter("check", "--json", *args, env=env, cwd=cwd, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    printed = json.loads(proc.stdout)
    assert printed["ok"] == (proc.returncode == 0), printed
    rows = printed["checks"]
    assert all(set(row) == {"name", "status", "detail"} for row in rows)
    assert all("\n" not in row["detail"] for row in rows)  # one line each
    return proc.returncode, {row["name"]: row for row in rows}


def test_every_check_passes_against_the_test_stack_and_sees_a_worker_poll(
    temporal_address: str, migrated: str, keyed_llm: ScriptedLLM, tmp_path: Path
):
    env = check_env(temporal_address, migrated, keyed_llm, tmp_path)
    code, rows = check_json(env, tmp_path)
    assert code == 0, rows
    assert {row["status"] for row in rows.values()} <= {"ok", "warn"}
    for name in (
        "configuration", "temporal", "namespace", "permissions", "search attributes",
        "workflow updates", "client certificate", "postgres", "schema", "database writes",
        "model endpoint",
    ):  # fmt: skip
        assert rows[name]["status"] == "ok", rows[name]
    assert "accepts the key" in rows["model endpoint"]["detail"]  # RIGHT_KEY was sent
    assert rows["task queue"]["status"] == "warn"  # no worker yet: said, not failed
    assert "no worker polls" in rows["task queue"]["detail"]

    worker = start_worker(env, tmp_path / "worker.log")
    try:
        code, rows = check_json(env, tmp_path)
    finally:
        stop(worker)
    assert code == 0
    assert rows["task queue"]["status"] == "ok", rows["task queue"]

    table = starter("check", env=env, cwd=tmp_path, timeout=120)  # the table, for people
    assert table.returncode == 0, table.stderr
    assert "database writes" in table.stdout and "fail" not in table.stdout


def test_a_refused_model_key_fails_its_row_naming_the_setting_never_the_key(
    temporal_address: str, migrated: str, keyed_llm: ScriptedLLM, tmp_path: Path
):
    env = check_env(temporal_address, migrated, keyed_llm, tmp_path, OPENAI_API_KEY=WRONG_KEY)
    code, rows = check_json(env, tmp_path)
    assert code == 1
    row = rows["model endpoint"]
    assert row["status"] == "fail" and "401" in row["detail"], row
    assert "OPENAI_API_KEY" in row["detail"]
    assert rows["postgres"]["status"] == "ok"  # the other checks still ran
    table = starter("check", env=env, cwd=tmp_path, timeout=120)
    assert table.returncode == 1
    for output in (json.dumps(rows), table.stdout, table.stderr):
        assert WRONG_KEY not in output and RIGHT_KEY not in output


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_postgres_fails_in_one_line_without_its_password(
    temporal_address: str, llm: ScriptedLLM, tmp_path: Path
):
    url = f"postgresql://agents:pg-secret-pw@127.0.0.1:{closed_port()}/agents"
    env = check_env(temporal_address, url, llm, tmp_path, OPENAI_API_KEY="test")
    started = time.monotonic()
    code, rows = check_json(env, tmp_path, "--timeout", "3")
    assert time.monotonic() - started < 60
    assert code == 1
    row = rows["postgres"]
    assert row["status"] == "fail" and "DATABASE_URL" in row["detail"], row
    assert "refused" in row["detail"].lower()
    assert "pg-secret-pw" not in json.dumps(rows)
    assert rows["schema"]["status"] == "warn"  # not checked: the row above says why
    assert rows["temporal"]["status"] == "ok"


def test_a_postgres_that_never_answers_fails_at_the_timeout(
    temporal_address: str, llm: ScriptedLLM, tmp_path: Path
):
    with socket.socket() as silent:  # accepts connections (the backlog), never speaks
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        url = f"postgresql://agents@127.0.0.1:{port}/agents"
        env = check_env(temporal_address, url, llm, tmp_path, OPENAI_API_KEY="test")
        started = time.monotonic()
        code, rows = check_json(env, tmp_path, "--timeout", "2")
        took = time.monotonic() - started
    assert code == 1
    assert rows["postgres"]["status"] == "fail"
    assert "did not answer within 2 s" in rows["postgres"]["detail"], rows["postgres"]
    assert took < 60, took  # a hang guard: the words above say it did not wait on the server


@pytest.fixture
def fresh_database(database_url: str) -> Iterator[str]:
    """A new, empty database on the test Postgres server."""
    name = f"check_fresh_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield psycopg.conninfo.make_conninfo(database_url, dbname=name)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))


def test_a_database_not_migrated_fails_saying_to_migrate(
    temporal_address: str, fresh_database: str, llm: ScriptedLLM, tmp_path: Path
):
    env = check_env(temporal_address, fresh_database, llm, tmp_path, OPENAI_API_KEY="test")
    code, rows = check_json(env, tmp_path)
    assert code == 1
    assert rows["postgres"]["status"] == "ok"
    schema = rows["schema"]
    assert schema["status"] == "fail" and "starter.py migrate" in schema["detail"], schema
    assert "none of the agents' tables" in schema["detail"]
    with psycopg.connect(fresh_database) as conn:  # read-only: nothing was created
        assert conn.execute("SELECT to_regclass('schema_migrations')").fetchone() == (None,)


def test_a_role_that_may_only_read_fails_the_writes_row_naming_the_grants(
    temporal_address: str, migrated: str, llm: ScriptedLLM, tmp_path: Path
):
    """A worker started on such a role failed every run's first step; `check` says which
    tables it may not write, and where the GRANTs are shown."""
    role = f"check_reader_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(migrated, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.execute(
            sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA public TO {}").format(
                sql.Identifier(role)
            )
        )
    try:
        reader = psycopg.conninfo.make_conninfo(migrated, user=role)
        env = check_env(temporal_address, reader, llm, tmp_path, OPENAI_API_KEY="test")
        code, rows = check_json(env, tmp_path)
    finally:
        with psycopg.connect(migrated, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
    assert code == 1
    assert (rows["postgres"]["status"], rows["schema"]["status"]) == ("ok", "ok"), rows
    writes = rows["database writes"]
    assert writes["status"] == "fail" and f"role {role} may not insert" in writes["detail"]
    assert "init-roles.sh" in writes["detail"]


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


def test_a_client_certificate_near_its_end_warns_through_the_tls_proxy_and_a_profile(
    temporal_address: str, migrated: str, llm: ScriptedLLM, pki: Pki, tmp_path: Path
):
    with TlsProxy(temporal_address, pki) as proxy:
        config = tmp_path / "temporal.toml"
        config.write_text(
            f"""
[profile.default]
address = "127.0.0.1:1"

[profile.secure]
address = "{proxy.address}"

[profile.secure.tls]
client_cert_path = "{pki.client_cert}"
client_key_path = "{pki.client_key}"
server_ca_cert_path = "{pki.ca_cert}"
"""
        )
        env = check_env(temporal_address, migrated, llm, tmp_path, OPENAI_API_KEY="test")
        del env["TEMPORAL_ADDRESS"]  # from the profile only
        env["TEMPORAL_CONFIG_FILE"] = str(config)
        code, rows = check_json(env, tmp_path, "--profile", "secure")
        assert not proxy.handshake_errors
    assert code == 0, rows
    assert rows["temporal"]["status"] == "ok" and "mTLS" in rows["temporal"]["detail"]
    assert proxy.address in rows["temporal"]["detail"]
    cert = rows["client certificate"]
    assert cert["status"] == "warn", cert  # the test PKI's certificates last a day
    assert str(pki.client_cert) in cert["detail"] and "renew" in cert["detail"]


class _NoModels(BaseHTTPRequestHandler):
    """A gateway without /models: 404 for everything."""

    def do_GET(self) -> None:
        self.send_response(404)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


async def test_an_endpoint_without_models_warns_and_each_route_is_asked(
    keyed_llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
):
    from reactive_temporal.hosting.preflight_models import model_checks

    server = ThreadingHTTPServer(("127.0.0.1", 0), _NoModels)
    Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("CHECK_ROUTE_KEY", WRONG_KEY)
        settings = Settings(
            openai_base_url=f"http://127.0.0.1:{server.server_address[1]}/v1",
            openai_api_key="test",
            llm_endpoints={
                "keyed-*": {"base_url": keyed_llm.base_url, "api_key_env": "CHECK_ROUTE_KEY"}
            },
        )
        rows = {row.name: row for row in await model_checks(settings, 5)}
    finally:
        server.shutdown()
    assert rows["model endpoint"].status == "warn"
    assert "no /models" in rows["model endpoint"].detail
    routed = rows["model endpoint keyed-*"]
    assert routed.status == "fail" and "CHECK_ROUTE_KEY" in routed.detail, routed
    assert WRONG_KEY not in routed.detail
