"""A worker and the CLI reach Temporal through TLS, configured the temporal CLI's way only.

A TLS-terminating proxy (tests/support) stands in front of the plaintext dev server as a real
cluster's ingress does: it requires a client certificate from the test's CA and offers ALPN h2.
Worker and `starter.py run` get nothing but the standard TEMPORAL_* variables (or a
temporal.toml profile) and complete a run through it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509

from reactive_temporal import ReactiveAgents
from reactive_temporal.config import Settings
from reactive_temporal.hosting.runtime import open_runtime
from tests.processes import REPO, clean_env, start_worker, starter, stop
from tests.support.pki import Pki, make_pki, renew_client_cert
from tests.support.tls_proxy import TlsProxy

pytestmark = pytest.mark.e2e

TASK = "What is (17 * 23) + 4?"


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


@pytest.fixture
def proxy(temporal_address: str, pki: Pki) -> Iterator[TlsProxy]:
    with TlsProxy(temporal_address, pki) as running:
        yield running


def base_env(database_url: str, llm_base_url: str, tmp_path: Path, **extra: str) -> dict[str, str]:
    return clean_env(
        DATABASE_URL=database_url,
        OPENAI_BASE_URL=llm_base_url,
        OPENAI_API_KEY="test-key",
        TEMPORAL_TASK_QUEUE=f"tls-{uuid.uuid4().hex[:8]}",
        REACTIVE_TEMPORAL_DATA_DIR=str(tmp_path / "data"),
        **extra,
    )


def tls_variables(proxy: TlsProxy, pki: Pki, *, client_cert: bool = True) -> dict[str, str]:
    variables = {
        "TEMPORAL_ADDRESS": proxy.address,
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(pki.ca_cert),
    }
    if client_cert:
        variables["TEMPORAL_TLS_CLIENT_CERT_PATH"] = str(pki.client_cert)
        variables["TEMPORAL_TLS_CLIENT_KEY_PATH"] = str(pki.client_key)
    return variables


def run_json(env: dict[str, str], cwd: Path, *global_options: str) -> dict:
    proc = starter(*global_options, "run", TASK, "--json", env=env, cwd=cwd, timeout=180)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_worker_and_cli_complete_a_run_over_mtls_from_temporal_variables(
    proxy: TlsProxy, pki: Pki, database_url: str, llm, tmp_path: Path
):
    env = base_env(database_url, llm.base_url, tmp_path, **tls_variables(proxy, pki))
    worker = start_worker(env, tmp_path / "worker.log")
    try:
        result = run_json(env, tmp_path)
    finally:
        stop(worker)
    assert result["success"] is True and "395" in result["output"]
    assert proxy.connections >= 2  # the worker's and the CLI's
    assert not proxy.handshake_errors
    paths = proxy.headers_with(":path")
    assert any(p.endswith("/PollWorkflowTaskQueue") for p in paths)  # the worker, through TLS
    assert any(p.endswith("/StartWorkflowExecution") for p in paths)  # the CLI, through TLS


def test_the_same_from_a_temporal_toml_profile(
    proxy: TlsProxy, pki: Pki, database_url: str, llm, tmp_path: Path
):
    config = tmp_path / "temporal.toml"
    config.write_text(
        f"""
[profile.default]
address = "127.0.0.1:1"

[profile.secure]
address = "{proxy.address}"
namespace = "default"

[profile.secure.tls]
client_cert_path = "{pki.client_cert}"
client_key_path = "{pki.client_key}"
server_ca_cert_path = "{pki.ca_cert}"
"""
    )
    env = base_env(database_url, llm.base_url, tmp_path, TEMPORAL_CONFIG_FILE=str(config))
    # The worker from TEMPORAL_PROFILE, the CLI with --profile; the default profile is wrong.
    worker = start_worker({**env, "TEMPORAL_PROFILE": "secure"}, tmp_path / "worker.log")
    try:
        result = run_json(env, tmp_path, "--profile", "secure")
    finally:
        stop(worker)
    assert result["success"] is True
    assert not proxy.handshake_errors and proxy.connections >= 2


def test_without_the_client_certificate_the_cli_says_so_in_one_line(
    proxy: TlsProxy, pki: Pki, database_url: str, llm, tmp_path: Path
):
    env = base_env(
        database_url, llm.base_url, tmp_path, **tls_variables(proxy, pki, client_cert=False)
    )
    proc = starter("run", TASK, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "TLS" in lines[0] and "client certificate" in lines[0], lines[0]
    assert proxy.address in lines[0]
    assert "Traceback" not in proc.stderr and "tonic" not in proc.stderr
    assert proxy.handshake_errors  # refused by the server, not a local configuration error


def test_the_api_key_reaches_the_server_as_a_bearer_token(
    proxy: TlsProxy, pki: Pki, database_url: str, llm, tmp_path: Path
):
    env = base_env(
        database_url,
        llm.base_url,
        tmp_path,
        TEMPORAL_API_KEY="tk-e2e-secret",
        TEMPORAL_GRPC_META_X_TEAM="agents",
        **tls_variables(proxy, pki),
    )
    proc = starter("runs", "--json", env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert set(proxy.headers_with("authorization")) == {"Bearer tk-e2e-secret"}
    assert "agents" in proxy.headers_with("x-team")


def test_worker_without_the_client_certificate_exits_with_one_line(
    proxy: TlsProxy, pki: Pki, database_url: str, llm, tmp_path: Path
):
    env = base_env(
        database_url, llm.base_url, tmp_path, **tls_variables(proxy, pki, client_cert=False)
    )
    proc = subprocess.run(
        [sys.executable, str(REPO / "worker.py")],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and "client certificate" in errors[0], proc.stderr


def test_a_worker_takes_renewed_credentials_without_a_restart(
    proxy: TlsProxy, pki: Pki, database_url: str, llm, tmp_path: Path
):
    """Its API key file and its client certificate rotated while it runs, the old
    certificate then refused and every connection dropped (as at a cluster's restart): the
    worker serves the next run on the new ones. Read once at its start, it reconnected with
    the old certificate, was refused, and served nothing until restarted."""
    creds = tmp_path / "creds"
    creds.mkdir()
    cert, key, api_key = creds / "client.pem", creds / "client.key", creds / "api-key"
    shutil.copy(pki.client_cert, cert)
    shutil.copy(pki.client_key, key)
    api_key.write_text("tk-first\n")
    env = base_env(
        database_url,
        llm.base_url,
        tmp_path,
        TEMPORAL_ADDRESS=proxy.address,
        TEMPORAL_TLS_SERVER_CA_CERT_PATH=str(pki.ca_cert),
        TEMPORAL_TLS_CLIENT_CERT_PATH=str(cert),
        TEMPORAL_TLS_CLIENT_KEY_PATH=str(key),
        TEMPORAL_API_KEY_FILE=str(api_key),
        REACTIVE_TEMPORAL_CREDENTIALS_POLL="0.2",
    )
    log = tmp_path / "worker.log"
    worker = start_worker(env, log)
    try:
        assert run_json(env, tmp_path)["success"] is True
        [first_serial] = set(proxy.client_serials)
        api_key.write_text("tk-second\n")
        renewed_serial = renew_client_cert(pki, cert, key)
        deadline = time.monotonic() + 60
        while renewed_serial not in proxy.client_serials or "Bearer tk-second" not in set(
            proxy.headers_with("authorization")
        ):  # the worker connected with the new certificate, and sent the new key
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)
        proxy.refuse(first_serial)  # the old certificate expires, every connection drops
        since = len(proxy.requests)
        proc = starter("run", TASK, "--json", env=env, cwd=tmp_path, timeout=90)
    finally:
        stop(worker)
    assert proc.returncode == 0 and json.loads(proc.stdout)["success"] is True, proc.stderr
    assert renewed_serial in proxy.client_serials[-1:]
    assert set(proxy.headers_with("authorization")[:1]) == {"Bearer tk-first"}
    with proxy._lock:
        after = [r.get("authorization") for r in proxy.requests[since:]]
    assert after and set(after) == {"Bearer tk-second"}, set(after)
    said = log.read_text()
    assert "tk-" not in said
    # the test CA's certificates last a day: the worker says when, of each it connected with
    assert said.count(f"Temporal client certificate {cert} expires at") == 2, said[-3000:]


async def test_a_python_api_process_takes_a_renewed_api_key(
    proxy: TlsProxy, pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A web app holding an agent for weeks: a key rotated in TEMPORAL_API_KEY_FILE goes with
    its next call, where every call was refused once the old key was revoked."""
    api_key = tmp_path / "api-key"
    api_key.write_text("tk-app-first")
    for name, value in tls_variables(proxy, pki).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TEMPORAL_API_KEY_FILE", str(api_key))
    monkeypatch.delenv("TEMPORAL_API_KEY", raising=False)
    settings = Settings(
        temporal_address=proxy.address,
        credentials_poll_seconds=0.1,
        data_dir=tmp_path / "data",
    )
    runtime = await open_runtime(settings, worker=False)
    try:
        await runtime.client.count_workflows()
        api_key.write_text("tk-app-renewed\n")
        await asyncio.sleep(0.5)
        since = len(proxy.requests)
        await runtime.client.count_workflows()
    finally:
        await runtime.close()
    assert proxy.headers_with("authorization")[0] == "Bearer tk-app-first"
    with proxy._lock:
        after = {r.get("authorization") for r in proxy.requests[since:]}
    assert after == {"Bearer tk-app-renewed"}, after


async def test_a_python_api_process_takes_a_renewed_client_certificate(
    proxy: TlsProxy,
    pki: Pki,
    database_url: str,
    llm,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
):
    """A web app that built its agent once: its client certificate is renewed in place, then
    the old one is refused and every connection dropped. The agent, a session, a run handle
    it kept from before and a reader of that run's output go on with the new one; they had
    kept the old certificate, and every `run` and `chat` failed until the process was
    restarted."""
    creds, worker_creds = tmp_path / "creds", tmp_path / "worker-creds"
    creds.mkdir()
    worker_creds.mkdir()
    cert, key = creds / "client.pem", creds / "client.key"
    shutil.copy(pki.client_cert, cert)
    shutil.copy(pki.client_key, key)
    first_serial = x509.load_pem_x509_certificate(cert.read_bytes()).serial_number
    worker_cert, worker_key = worker_creds / "client.pem", worker_creds / "client.key"
    renew_client_cert(pki, worker_cert, worker_key)  # the worker's own: never refused here
    env = base_env(
        database_url,
        llm.base_url,
        tmp_path,
        TEMPORAL_ADDRESS=proxy.address,
        TEMPORAL_TLS_SERVER_CA_CERT_PATH=str(pki.ca_cert),
        TEMPORAL_TLS_CLIENT_CERT_PATH=str(worker_cert),
        TEMPORAL_TLS_CLIENT_KEY_PATH=str(worker_key),
    )
    for name, value in tls_variables(proxy, pki).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TEMPORAL_TLS_CLIENT_CERT_PATH", str(cert))
    monkeypatch.setenv("TEMPORAL_TLS_CLIENT_KEY_PATH", str(key))
    settings = Settings(
        temporal_address=proxy.address,
        temporal_task_queue=env["TEMPORAL_TASK_QUEUE"],
        database_url=database_url,
        openai_base_url=llm.base_url,
        openai_api_key="test-key",
        credentials_poll_seconds=0.1,
        unreachable_patience_seconds=20,  # without the renewal: failed in 20 s, not 10 min
        data_dir=tmp_path / "data",
    )
    worker = start_worker(env, tmp_path / "worker.log")
    try:
        with caplog.at_level(logging.INFO, logger="reactive_temporal"):
            agent = await (
                ReactiveAgents.create()
                .with_name(f"tls-app-{uuid.uuid4().hex[:6]}")
                .with_settings(settings)
                .build()
            )
            try:
                assert (await agent.run(TASK)).success
                session = agent.session()
                await session.chat("Hello")
                kept = await agent.start(TASK)  # awaited after the rotation
                renewed_serial = renew_client_cert(pki, cert, key)
                deadline = time.monotonic() + 60
                # Connected with it, and taken: the proxy sees the new certificate as the
                # fresh client connects, a moment before the watch puts it in the old one's
                # place; refused in that moment, a call just started went to the old one.
                while (
                    renewed_serial not in proxy.client_serials
                    or "this process reconnected with them" not in caplog.text
                ):
                    assert time.monotonic() < deadline, "the API never used the new certificate"
                    await asyncio.sleep(0.1)
                proxy.refuse(first_serial)  # the old one expires, every connection drops
                result = await agent.run(TASK)
                reply = await session.chat("And now?")
                chat = await agent.chat("Hi")
                kept_result = await agent.result(kept)
                followed = [event.type async for event in agent.events(kept.id)]
            finally:
                await agent.dispose(debrief_wait_seconds=30)
    finally:
        stop(worker)
    assert result.success and "395" in result.output
    assert reply.message and chat.message and kept_result.success
    assert followed[-1] == "finished"
    refused = [e for e in proxy.handshake_errors if "refused" in e]
    assert refused == []  # nothing here went back to the old certificate
    pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert pending == []  # the watch stopped with the runtime
    said = caplog.text
    assert "PRIVATE KEY" not in said and "BEGIN CERTIFICATE" not in said
    # the test CA's certificates last a day: said of each the process connected with
    assert said.count(f"Temporal client certificate {cert} expires at") == 2, said[-3000:]
