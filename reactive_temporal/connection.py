"""Where Temporal is and how to reach it, the way the `temporal` CLI reads it.

Worker, CLI and Python API all take their connection from Temporal's environment configuration
(`temporalio.envconfig`): a `temporal.toml` profile (`TEMPORAL_CONFIG_FILE`, `TEMPORAL_PROFILE`
or `--profile`) overlaid with the standard variables (`TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`,
`TEMPORAL_API_KEY`, `TEMPORAL_TLS`, `TEMPORAL_TLS_CLIENT_CERT_PATH`/`_KEY_PATH`,
`TEMPORAL_TLS_SERVER_CA_CERT_PATH`, `TEMPORAL_TLS_SERVER_NAME`, `TEMPORAL_GRPC_META_*`, …).
Nothing configured means no address: the embedded dev server, as before. Beside them,
`TEMPORAL_API_KEY_FILE` names a file holding the API key (a Kubernetes secret, a Vault
sidecar's): read at connect like the variable, and by a worker or a Python API process again
whenever it changes (`hosting/credential_watch.py`), as its certificate files are.

A connection that fails is one line naming what failed (the TLS handshake and why, the API
key, an unreachable address), never a traceback: `ConnectionFailed`.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from temporalio.envconfig import ClientConfigProfile
from temporalio.service import TLSConfig

from reactive_temporal.http_headers import read_header_file

if TYPE_CHECKING:  # the client is imported where it connects, not where config is read
    from temporalio.client import Client, Interceptor, Plugin
    from temporalio.converter import DataConverter
    from temporalio.runtime import Runtime

DEFAULT_NAMESPACE = "default"


class ConnectionConfigError(ValueError):
    """The connection configuration itself is wrong (a missing profile, file or certificate)."""


class ConnectionFailed(RuntimeError):
    """Temporal could not be reached or refused us; the message is one line saying why."""


@dataclass(frozen=True)
class TemporalConnection:
    """Everything `Client.connect` needs, and where it came from (for error messages)."""

    address: str | None
    """None: nothing configured, use the embedded dev server."""
    namespace: str = DEFAULT_NAMESPACE
    api_key: str | None = None
    tls: bool | TLSConfig = False
    rpc_metadata: Mapping[str, str] = field(default_factory=dict)
    profile: str | None = None
    client_cert_source: str | None = None
    """Where the client certificate came from (a path or 'inline data'), for errors."""
    api_key_file: str | None = None
    """TEMPORAL_API_KEY_FILE: where `api_key` was read, to read again when it changes."""
    api_key_setting: str | None = None
    """The setting that gave `api_key` (TEMPORAL_API_KEY_FILE, TEMPORAL_API_KEY, a profile's
    `api_key`), named when the key is refused; never the key."""
    tls_files: tuple[str, ...] = ()
    """The TLS files read (client certificate, its key, the server's CA), likewise."""

    @property
    def uses_tls(self) -> bool:
        return self.tls is not False

    @property
    def client_cert(self) -> bytes | None:
        """The client certificate's PEM, as read at connect (None without mTLS)."""
        return None if isinstance(self.tls, bool) else self.tls.client_cert

    def describe(self) -> str:
        """`address (namespace 'x', TLS, API key, profile 'p')` for banners and errors."""
        parts = [f"namespace {self.namespace!r}"]
        if self.uses_tls:
            parts.append("mTLS" if self.client_cert_source else "TLS")
        if self.api_key:
            parts.append("API key from its file" if self.api_key_file else "API key")
        if self.profile:
            parts.append(f"profile {self.profile!r}")
        return f"{self.address} ({', '.join(parts)})"


_KINDS = (
    (stat.S_ISDIR, "is a directory, not a file"),
    (stat.S_ISFIFO, "is a FIFO (named pipe), not a file"),
    (stat.S_ISSOCK, "is a socket, not a file"),
    (stat.S_ISCHR, "is a character device, not a file"),
    (stat.S_ISBLK, "is a block device, not a file"),
)


def not_a_file(path: Path) -> str | None:
    """Why `path` is no regular file to read a configuration from, in words, or None.

    A directory or a FIFO was told as "does not exist" (and a FIFO, read, would block).
    """
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "does not exist"
    except NotADirectoryError:
        return "does not exist (a part of its path is not a directory)"
    except OSError as err:
        return f"cannot be read: {err.strerror or err}"
    if stat.S_ISREG(mode):
        return None
    return next((what for kind, what in _KINDS if kind(mode)), "is not a regular file")


def load_connection(
    *,
    profile: str | None = None,
    address: str | None = None,
    namespace: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> TemporalConnection:
    """The connection from temporal.toml and TEMPORAL_* (explicit arguments win).

    `address` / `namespace` are values the caller read elsewhere (e.g. a `.env` file); an
    explicit `profile` (`--profile`) beats TEMPORAL_PROFILE.
    """
    env = dict(os.environ if environ is None else environ)
    config_file = env.get("TEMPORAL_CONFIG_FILE")
    if config_file and (problem := not_a_file(Path(config_file).expanduser())) is not None:
        raise ConnectionConfigError(f"TEMPORAL_CONFIG_FILE={config_file} {problem}")
    chosen = profile or env.get("TEMPORAL_PROFILE") or None
    try:
        loaded = ClientConfigProfile.load(profile=chosen, override_env_vars=env)
        connect: dict[str, Any] = dict(loaded.to_client_connect_config())
    except FileNotFoundError as err:
        raise ConnectionConfigError(
            f"Temporal TLS file not found: {err.filename} (check TEMPORAL_TLS_* or the "
            f"profile's tls section)"
        ) from err
    except Exception as err:  # the bridge's ConfigError: bad TOML, unknown profile, …
        where = f" ({config_file})" if config_file else ""
        message = str(err).replace("Configuration loading error: ", "").splitlines()[0]
        raise ConnectionConfigError(f"Temporal configuration{where}: {message}") from err
    target = address or connect.get("target_host")
    api_key, key_file = _api_key(env, connect.get("api_key"))
    tls = connect.get("tls", key_file is not None)  # a key implies TLS, as the variable's does
    cert_source, tls_files = None, tuple[str, ...]()
    if loaded.tls is not None:
        sources = (
            loaded.tls.client_cert,
            loaded.tls.client_private_key,
            loaded.tls.server_root_ca_cert,
        )
        tls_files = tuple(str(s) for s in sources if isinstance(s, Path))
        if (source := loaded.tls.client_cert) is not None:
            cert_source = str(source) if isinstance(source, Path) else "inline data"
    key_setting = None
    if api_key:
        key_setting = (
            "TEMPORAL_API_KEY_FILE"
            if key_file
            else "TEMPORAL_API_KEY"
            if env.get("TEMPORAL_API_KEY", "").strip()
            else f"the api_key of temporal.toml profile {chosen or 'default'!r}"
        )
    if target is None and (api_key or tls):
        raise ConnectionConfigError(
            "TLS or an API key is configured for Temporal but no address: set TEMPORAL_ADDRESS "
            "(or the profile's address)"
        )
    return TemporalConnection(
        address=target,
        namespace=namespace or connect.get("namespace") or DEFAULT_NAMESPACE,
        api_key=api_key,
        tls=tls,
        rpc_metadata=dict(connect.get("rpc_metadata") or {}),
        profile=chosen,
        client_cert_source=cert_source,
        api_key_file=key_file,
        api_key_setting=key_setting,
        tls_files=tls_files,
    )


def _api_key(env: Mapping[str, str], configured: str | None) -> tuple[str | None, str | None]:
    """(the API key, the file it was read from): TEMPORAL_API_KEY_FILE's content when it is
    set, else the key configured (TEMPORAL_API_KEY, the profile's `api_key`)."""
    path = env.get("TEMPORAL_API_KEY_FILE", "").strip() or None
    if path is None:
        return configured, None
    if env.get("TEMPORAL_API_KEY", "").strip():
        raise ConnectionConfigError(
            "TEMPORAL_API_KEY and TEMPORAL_API_KEY_FILE are both set: set one"
        )
    try:
        return read_header_file(path, "TEMPORAL_API_KEY_FILE"), path
    except ValueError as err:
        raise ConnectionConfigError(str(err)) from None


async def connect_client(
    connection: TemporalConnection,
    data_converter: DataConverter,
    *,
    runtime: Runtime | None = None,
    interceptors: Sequence[Interceptor] = (),
    plugins: Sequence[Plugin] = (),
) -> Client:
    """`Client.connect` with the configuration; a failure is a one-line `ConnectionFailed`."""
    from temporalio.client import Client

    from reactive_temporal.access_calls import AccessRefusals

    if connection.address is None:
        raise ConnectionConfigError("no Temporal address configured")
    try:
        return await Client.connect(
            connection.address,
            namespace=connection.namespace,
            api_key=connection.api_key,
            tls=connection.tls,
            rpc_metadata=connection.rpc_metadata,
            data_converter=data_converter,
            runtime=runtime,
            # first, so the refusals it names are the calls as the caller made them
            interceptors=[AccessRefusals(connection), *interceptors],
            plugins=plugins,
        )
    except Exception as err:
        raise ConnectionFailed(
            f"cannot reach Temporal at {connection.describe()}: {explain(err, connection)}"
        ) from err


def explain(err: BaseException, connection: TemporalConnection) -> str:
    """What a connection error means, in one line, with the setting to look at."""
    from reactive_temporal.access import core_refusal, operation, refused

    text = str(err)
    tls, cert = connection.uses_tls, connection.client_cert_source
    if "UnknownIssuer" in text or "BadSignature" in text:
        return (
            "TLS handshake failed: the server's certificate is not signed by a trusted CA "
            "(set TEMPORAL_TLS_SERVER_CA_CERT_PATH to the CA that signed it)"
        )
    if "NotValidForName" in text:
        expected = re.search(r'expected: \w+\("?([^")]+)', text)
        name = expected.group(1) if expected else "the address"
        return (
            f"TLS handshake failed: the server's certificate is not valid for {name} "
            "(set TEMPORAL_TLS_SERVER_NAME to a name it holds)"
        )
    if "Expired" in text and "Certificate" in text:
        return "TLS handshake failed: a certificate has expired"
    if "PrivateKeyParseError" in text or "InvalidPrivateKey" in text:
        return "TLS: the client private key cannot be read (TEMPORAL_TLS_CLIENT_KEY_PATH)"
    if "InvalidContentType" in text or "CorruptMessage" in text:
        return "TLS handshake failed: the server does not speak TLS (unset TEMPORAL_TLS?)"
    if (denied := core_refusal(text)) is not None:  # Temporal Cloud refuses a bad key here
        connect = operation("connect", "GetSystemInfo")
        return str(refused(denied.kind, connect, connection, repr(denied.message)))
    if "ConnectionRefused" in text or "Connection refused" in text:
        return "connection refused (is the server running, and is the address right?)"
    if "dns error" in text or "failed to lookup address" in text:
        return "the host name does not resolve"
    closed = any(
        marker in text
        # a first call cancelled under it: the connection went (its cause is not always said)
        for marker in (
            "connection closed", "UnexpectedEof", "BrokenPipe", "ConnectionReset", "code: Cancelled"
        )
    )  # fmt: skip
    if closed and tls and cert is None:
        return (
            "TLS: the server closed the connection after the handshake: it requires a client "
            "certificate (set TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH)"
        )
    if closed and tls:
        return (
            f"TLS: the server closed the connection after the handshake: it does not accept the "
            f"client certificate {cert}"
        )
    if closed:
        return "the server closed the connection (does it require TLS? set TEMPORAL_TLS=true)"
    return _first_message(text)


def _first_message(text: str) -> str:
    found = re.search(r'message: "([^"]*)"', text)
    line = found.group(1) if found else text.splitlines()[0] if text else "unknown error"
    return line.removeprefix("Failed client connect: ")[:300]
