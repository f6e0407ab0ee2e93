"""Connection configuration the temporal CLI's way, and one-line connection errors."""
# ruff: noqa: E501  (verbatim SDK error strings)

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.service import TLSConfig

from reactive_temporal.connection import (
    ConnectionConfigError,
    TemporalConnection,
    explain,
    load_connection,
)
from tests.support.pki import make_pki


def test_nothing_configured_means_the_embedded_default():
    conn = load_connection(environ={})
    assert conn.address is None and conn.namespace == "default"
    assert conn.tls is False and conn.api_key is None and not conn.rpc_metadata


def test_temporal_variables_give_mtls_an_api_key_and_metadata(tmp_path: Path):
    pki = make_pki(tmp_path)
    conn = load_connection(
        environ={
            "TEMPORAL_ADDRESS": "temporal.example:7233",
            "TEMPORAL_NAMESPACE": "agents",
            "TEMPORAL_TLS_CLIENT_CERT_PATH": str(pki.client_cert),
            "TEMPORAL_TLS_CLIENT_KEY_PATH": str(pki.client_key),
            "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(pki.ca_cert),
            "TEMPORAL_TLS_SERVER_NAME": "frontend.internal",
            "TEMPORAL_API_KEY": "k-123",
            "TEMPORAL_GRPC_META_X_TEAM": "billing",
        }
    )
    assert conn.address == "temporal.example:7233" and conn.namespace == "agents"
    assert isinstance(conn.tls, TLSConfig)
    assert conn.tls.client_cert == pki.client_cert.read_bytes()
    assert conn.tls.client_private_key == pki.client_key.read_bytes()
    assert conn.tls.server_root_ca_cert == pki.ca_cert.read_bytes()
    assert conn.tls.domain == "frontend.internal"
    assert conn.api_key == "k-123" and conn.rpc_metadata == {"x-team": "billing"}
    assert conn.client_cert_source == str(pki.client_cert)
    assert conn.describe() == "temporal.example:7233 (namespace 'agents', mTLS, API key)"


def test_an_api_key_file_is_read_implies_tls_and_names_what_is_wrong(tmp_path: Path):
    """TEMPORAL_API_KEY_FILE: read like the variable (and again by a worker when it changes:
    `hosting/credential_watch.py`); TLS implied as for TEMPORAL_API_KEY."""
    pki = make_pki(tmp_path)
    key = tmp_path / "api-key"
    key.write_text("tk-from-file\n")
    base = {"TEMPORAL_ADDRESS": "cloud.example:7233", "TEMPORAL_API_KEY_FILE": str(key)}
    conn = load_connection(environ=base)
    assert (conn.api_key, conn.api_key_file, conn.tls) == ("tk-from-file", str(key), True)
    assert conn.describe() == "cloud.example:7233 (namespace 'default', TLS, API key from its file)"
    assert conn.tls_files == ()
    with_tls = load_connection(
        environ={
            **base,
            "TEMPORAL_TLS_CLIENT_CERT_PATH": str(pki.client_cert),
            "TEMPORAL_TLS_CLIENT_KEY_PATH": str(pki.client_key),
        }
    )
    assert isinstance(with_tls.tls, TLSConfig)
    assert with_tls.tls_files == (str(pki.client_cert), str(pki.client_key))
    with pytest.raises(ConnectionConfigError, match="TEMPORAL_API_KEY and TEMPORAL_API_KEY_FILE"):
        load_connection(environ={**base, "TEMPORAL_API_KEY": "k-1"})
    key.write_text("tk-1\nX-Injected: 1")
    with pytest.raises(ConnectionConfigError, match=f"TEMPORAL_API_KEY_FILE: .*{key}") as err:
        load_connection(environ=base)
    assert "tk-1" not in str(err.value)
    with pytest.raises(ConnectionConfigError, match="no address"):
        key.write_text("tk-1")
        load_connection(environ={"TEMPORAL_API_KEY_FILE": str(key)})


def write_profiles(tmp_path: Path) -> Path:
    pki = make_pki(tmp_path / "pki")
    path = tmp_path / "temporal.toml"
    path.write_text(
        f"""
[profile.default]
address = "localhost:7233"

[profile.prod]
address = "prod.example:7233"
namespace = "prod-ns"
api_key = "from-file"

[profile.prod.tls]
client_cert_path = "{pki.client_cert}"
client_key_path = "{pki.client_key}"
server_ca_cert_path = "{pki.ca_cert}"
"""
    )
    return path


def test_a_profile_from_temporal_toml_and_variables_over_it(tmp_path: Path):
    config = write_profiles(tmp_path)
    env = {"TEMPORAL_CONFIG_FILE": str(config), "TEMPORAL_PROFILE": "prod"}
    conn = load_connection(environ=env)
    assert (conn.address, conn.namespace, conn.api_key) == (
        "prod.example:7233",
        "prod-ns",
        "from-file",
    )
    assert isinstance(conn.tls, TLSConfig) and conn.tls.client_cert
    assert conn.profile == "prod"
    # A variable overrides the file; an explicit --profile beats TEMPORAL_PROFILE.
    assert load_connection(environ={**env, "TEMPORAL_NAMESPACE": "other"}).namespace == "other"
    assert load_connection(profile="default", environ=env).address == "localhost:7233"
    # Values read elsewhere (a .env file) win over both.
    assert load_connection(address="x:1", namespace="n", environ=env).address == "x:1"


@pytest.mark.parametrize(
    ("environ", "profile", "message"),
    [
        ({}, "prod", "Profile 'prod' not found"),
        (
            {"TEMPORAL_CONFIG_FILE": "/nowhere/temporal.toml"},
            None,
            "/nowhere/temporal.toml does not exist",
        ),
        (
            {"TEMPORAL_TLS_CLIENT_CERT_PATH": "/nowhere/c.pem", "TEMPORAL_ADDRESS": "a:1"},
            None,
            "/nowhere/c.pem",
        ),
        ({"TEMPORAL_API_KEY": "k"}, None, "no address"),
    ],
)
def test_bad_configuration_is_named(environ, profile, message):
    with pytest.raises(ConnectionConfigError, match=message):
        load_connection(profile=profile, environ=environ)


def test_bad_toml_names_the_file(tmp_path: Path):
    bad = tmp_path / "temporal.toml"
    bad.write_text("address = [\n")
    with pytest.raises(ConnectionConfigError, match=str(bad)):
        load_connection(environ={"TEMPORAL_CONFIG_FILE": str(bad)})


# What the SDK raises (verbatim, recorded against the TLS proxy in tests/support) and what we say.
TLS = TemporalConnection(address="a:1", tls=TLSConfig())
MTLS = TemporalConnection(address="a:1", tls=TLSConfig(), client_cert_source="/c/client.pem")
PLAIN = TemporalConnection(address="a:1")
RAW = {
    "no client cert": 'Failed client connect: `get_system_info` call error after connection: Status { code: Cancelled, message: "operation was canceled", source: Some(tonic::transport::Error(Transport, hyper::Error(Canceled, "connection closed"))) }',
    # the same, its cause unsaid (seen in CI under load: the CLI said only "operation was canceled")
    "no client cert, no cause": 'Failed client connect: `get_system_info` call error after connection: Status { code: Cancelled, message: "operation was canceled", source: None }',
    "stranger cert": 'Failed client connect: `get_system_info` call error after connection: Status { code: Unknown, message: "transport error", source: Some(tonic::transport::Error(Transport, hyper::Error(Io, Custom { kind: UnexpectedEof, error: "peer closed connection without sending TLS close_notify" }))) }',
    "untrusted server": "Failed client connect: Server connection error: tonic::transport::Error(Transport, ConnectError(Custom { kind: InvalidData, error: InvalidCertificate(UnknownIssuer) }))",
    "wrong name": 'Failed client connect: Server connection error: tonic::transport::Error(Transport, ConnectError(Custom { kind: InvalidData, error: InvalidCertificate(NotValidForNameContext { expected: DnsName("other.example"), presented: ["DnsName(\\"localhost\\")"] }) }))',
    "bad key": "Failed client connect: Server connection error: tonic::transport::Error(Transport, PrivateKeyParseError)",
    "tls to plaintext": "Failed client connect: Server connection error: tonic::transport::Error(Transport, ConnectError(Custom { kind: InvalidData, error: InvalidMessage(InvalidContentType) }))",
    "plaintext to tls": 'Failed client connect: `get_system_info` call error after connection: Status { code: Unknown, message: "transport error", source: Some(tonic::transport::Error(Transport, hyper::Error(Io, Custom { kind: BrokenPipe, error: "stream closed because of a broken pipe" }))) }',
    "refused": 'Failed client connect: Server connection error: tonic::transport::Error(Transport, ConnectError(ConnectError("tcp connect error", 127.0.0.1:1, Os { code: 111, kind: ConnectionRefused, message: "Connection refused" })))',
    "unauthenticated": 'Failed client connect: `get_system_info` call error after connection: Status { code: Unauthenticated, message: "Request unauthorized." }',
}


@pytest.mark.parametrize(
    ("case", "connection", "expected"),
    [
        ("no client cert", TLS, "requires a client certificate (set TEMPORAL_TLS_CLIENT_CERT_PATH"),
        ("no client cert, no cause", TLS, "requires a client certificate"),
        ("stranger cert", MTLS, "does not accept the client certificate /c/client.pem"),
        (
            "untrusted server",
            MTLS,
            "not signed by a trusted CA (set TEMPORAL_TLS_SERVER_CA_CERT_PATH",
        ),
        ("wrong name", MTLS, "not valid for other.example (set TEMPORAL_TLS_SERVER_NAME"),
        ("bad key", MTLS, "client private key cannot be read"),
        ("tls to plaintext", TLS, "does not speak TLS"),
        ("plaintext to tls", PLAIN, "does it require TLS?"),
        ("refused", PLAIN, "connection refused"),
        (
            "unauthenticated",
            TemporalConnection(address="a:1", api_key="k"),
            "did not accept the API key in TEMPORAL_API_KEY to connect (GetSystemInfo) in "
            "namespace 'default': 'Request unauthorized.'. The key is invalid, expired or "
            "revoked: set TEMPORAL_API_KEY to a valid one and restart",
        ),
        (
            "unauthenticated",
            TemporalConnection(address="a:1", api_key="k", api_key_file="/run/key"),
            "did not accept the API key in TEMPORAL_API_KEY_FILE (/run/key) to connect "
            "(GetSystemInfo) in namespace 'default': 'Request unauthorized.'. The key is "
            "invalid, expired or revoked: write a valid one into /run/key",
        ),
    ],
)
def test_connection_errors_are_one_line_naming_what_failed(case, connection, expected):
    message = explain(RuntimeError(RAW[case]), connection)
    assert expected in message
    assert "\n" not in message and "tonic" not in message


def test_settings_fold_a_profile_address_and_read_temporal_variables_from_dotenv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from reactive_temporal.config import load_settings

    for name in ("TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_API_KEY", "TEMPORAL_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    config = write_profiles(tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("TEMPORAL_API_KEY=from-dotenv\nTEMPORAL_PROFILE=prod\n")
    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", str(config))
    settings = load_settings()
    # The profile's address counts as configured (no embedded server), its namespace too.
    assert settings.temporal_address == "prod.example:7233"
    assert settings.temporal_namespace == "prod-ns"
    assert settings.temporal_connection().api_key == "from-dotenv"  # .env beats the file


def test_worker_versioning_needs_both_names():
    from reactive_temporal.config import Settings

    assert Settings().worker_version() is None
    assert Settings(deployment_name="d", build_id="b").worker_version() == ("d", "b")
    with pytest.raises(ValueError, match="TEMPORAL_WORKER_BUILD_ID"):
        Settings(deployment_name="d").worker_version()
