"""`starter.py check`'s client certificate row: an expired certificate fails, one within a week
of its end warns, others pass (the test PKI's certificates last a day; `now` is moved)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from temporalio.service import TLSConfig

from reactive_temporal.connection import TemporalConnection
from reactive_temporal.hosting.preflight import certificate_check
from tests.support.pki import make_pki


def connection(tmp_path: Path) -> TemporalConnection:
    pki = make_pki(tmp_path / "pki")
    tls = TLSConfig(client_cert=pki.client_cert.read_bytes(), client_private_key=b"unused")
    return TemporalConnection("127.0.0.1:7233", tls=tls, client_cert_source=str(pki.client_cert))


def test_the_client_certificate_row_follows_its_end_of_validity(tmp_path: Path):
    tls = connection(tmp_path)
    now = datetime.now(UTC)
    assert certificate_check(tls, now).status == "warn"  # a day left
    expired = certificate_check(tls, now + timedelta(days=2))
    assert expired.status == "fail" and "expired" in expired.detail
    assert "TEMPORAL_TLS_CLIENT_CERT_PATH" in expired.detail
    assert certificate_check(tls, now - timedelta(days=30)).status == "ok"


def test_no_client_certificate_passes():
    plain = TemporalConnection("127.0.0.1:7233")
    assert certificate_check(plain).status == "ok"
    assert certificate_check(None).status == "ok"
