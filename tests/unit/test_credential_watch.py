"""A process's Temporal credentials renewed while it runs (`hosting/credential_watch.py`): what
it does with files that change, half written or not working, and how a Python API runtime
stops watching. The reconnection itself, through a TLS proxy that refuses the old certificate,
is tests/e2e/test_secure_connections.py's (a worker's and a Python API process's)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from reactive_temporal.connection import TemporalConnection
from reactive_temporal.hosting.cert_expiry import CertExpiry, not_after
from reactive_temporal.hosting.credential_watch import CredentialWatch
from reactive_temporal.hosting.runtime import Runtime
from reactive_temporal.telemetry.metrics import REGISTRY
from tests.support.pki import make_pki


async def until(check: Callable[[], bool]) -> None:
    """Until `check()` holds: the watch polls every 10 ms, a loaded machine runs it less often
    (a fixed sleep could end before it looked); a minute is a hang guard."""
    async with asyncio.timeout(60):
        while True:
            if check():
                return
            await asyncio.sleep(0.01)


@dataclass
class Connected:
    """Stands for a client: what it was connected with."""

    api_key: str | None
    cert: str


async def test_a_certificate_that_does_not_connect_leaves_the_worker_on_the_one_it_has(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cert = tmp_path / "client.pem"
    cert.write_text("cert-1")
    connection = TemporalConnection(address="t:7233", tls=True, tls_files=(str(cert),))
    attempts: list[str] = []

    async def reconnect(_: TemporalConnection) -> Any:
        attempts.append(cert.read_text())
        if cert.read_text() == "cert-2-broken":
            raise RuntimeError("TLS handshake failed: the key does not match the certificate")
        return Connected(None, cert.read_text())

    current: list[Any] = [Connected(None, "cert-1")]
    watch = CredentialWatch(connection, lambda: connection, reconnect, poll_seconds=0.01)
    task = asyncio.create_task(watch.run(lambda: cast(Any, current[-1]), current.append))
    try:
        await asyncio.sleep(0.05)  # the watch has read the files as they were
        with caplog.at_level(logging.WARNING):
            cert.write_text("cert-2-broken")
            await until(lambda: len(attempts) > 1)  # asked again while the files stay so
            assert [c.cert for c in current] == ["cert-1"]  # kept, and said once
            warned = [r.getMessage() for r in caplog.records if "TLS files" in r.getMessage()]
            assert len(warned) == 1 and "keeps the credentials it has" in warned[0]
            cert.write_text("cert-3-good")
            await until(lambda: len(current) > 1)
    finally:
        task.cancel()
    assert [c.cert for c in current] == ["cert-1", "cert-3-good"]


async def test_a_renewed_api_key_goes_to_the_client_it_has(tmp_path: Path) -> None:
    key = tmp_path / "api-key"
    key.write_text("tk-1")
    connection = TemporalConnection(address="t:7233", api_key="tk-1", api_key_file=str(key))

    async def never(_: TemporalConnection) -> Any:
        raise AssertionError("no TLS files: nothing to reconnect for")

    client = Connected("tk-1", "")
    watch = CredentialWatch(connection, lambda: connection, never, poll_seconds=0.01)
    assert watch.needed
    task = asyncio.create_task(watch.run(lambda: cast(Any, client), never))  # type: ignore[arg-type]
    try:
        await asyncio.sleep(0.05)  # the watch has started (it reads the file as it polls)
        key.write_text("tk-2\n")
        await until(lambda: client.api_key == "tk-2")
    finally:
        task.cancel()
    assert client.api_key == "tk-2"
    assert not CredentialWatch(TemporalConnection(address="t:7233"), never, never).needed  # type: ignore[arg-type]


async def test_a_key_file_broken_when_the_watch_starts_is_waited_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Rewritten between the connect and the watch's first look (empty for an instant): the
    watch died with the ValueError, and no later key was ever taken."""
    key = tmp_path / "api-key"
    key.write_text("")
    connection = TemporalConnection(address="t:7233", api_key="tk-1", api_key_file=str(key))
    client = Connected("tk-1", "")
    task = asyncio.create_task(
        CredentialWatch(connection, poll_seconds=0.01).run(lambda: cast(Any, client))
    )
    try:
        with caplog.at_level(logging.WARNING):
            await until(lambda: "TEMPORAL_API_KEY_FILE" in caplog.text)  # it looked, and said
        assert client.api_key == "tk-1" and not task.done()
        key.write_text("tk-2")
        await until(lambda: client.api_key == "tk-2")
    finally:
        task.cancel()
    assert client.api_key == "tk-2"
    warned = [r.getMessage() for r in caplog.records if "TEMPORAL_API_KEY_FILE" in r.getMessage()]
    assert len(warned) == 1 and "kept meanwhile" in warned[0], warned


def test_a_client_certificate_near_its_end_is_said_and_shown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An expired certificate was found out when the server refused the next connection:
    every run stalled, and nothing had said it was coming."""
    pki = make_pki(tmp_path)
    expiry = CertExpiry(str(pki.client_cert))
    expiry.seen(pki.client_cert.read_bytes())
    assert expiry.expires is not None
    assert (
        REGISTRY.get_sample_value("reactive_temporal_temporal_client_cert_expiry_timestamp_seconds")
        == expiry.expires.timestamp()
    )
    end = expiry.expires
    with caplog.at_level(logging.WARNING, logger="reactive_temporal.hosting.cert_expiry"):
        expiry.check(now=end - timedelta(days=30))  # far off: nothing said
        expiry.check(now=end - timedelta(days=2, hours=3))
        expiry.check(now=end - timedelta(days=2))  # said a while ago: not again
        expiry.check(now=end + timedelta(hours=1))
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2, said
    assert str(pki.client_cert) in said[0] and "in 2 days 3 h" in said[0]
    assert "expired at" in said[1] and "refuse" in said[1]
    assert not_after(b"not a certificate") is None and not_after(None) is None


class DyingWatch(CredentialWatch):
    async def run(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a bug in the watch")


async def test_a_closed_runtime_leaves_no_watch_behind(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`close` cancelled the watch without waiting for it to end: its task was still pending
    once the runtime was closed. One that had died (a bug) is said, and the close still ends."""
    key = tmp_path / "api-key"
    key.write_text("tk-1")
    connection = TemporalConnection(address="t:7233", api_key="tk-1", api_key_file=str(key))
    client = cast(Any, Connected("tk-1", ""))
    watch = CredentialWatch(connection, poll_seconds=0.01)
    runtime = Runtime(client, "q", offline_model=None, credentials=watch)
    await asyncio.sleep(0.05)
    await runtime.close()
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []

    broken = Runtime(client, "q", offline_model=None, credentials=DyingWatch(connection))
    await asyncio.sleep(0)
    with caplog.at_level(logging.WARNING, logger="reactive_temporal"):
        await broken.close()
    assert "the watch of Temporal's credentials had stopped: a bug in the watch" in caplog.text
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []
