"""A process using the Python API serves its own `/metrics` (`reactive_temporal.serve_metrics`):
the client certificate it connects with, watched by its runtime, is a gauge Prometheus can
scrape and the certificate alerts select, not only a warning in its log."""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any, cast

from prometheus_client.parser import text_string_to_metric_families
from temporalio.service import TLSConfig

import reactive_temporal
from reactive_temporal.connection import TemporalConnection
from reactive_temporal.hosting.cert_expiry import not_after
from reactive_temporal.hosting.credential_watch import CredentialWatch
from reactive_temporal.hosting.runtime import Runtime
from tests.conftest import wait_for
from tests.support.pki import make_pki

GAUGE = "reactive_temporal_temporal_client_cert_expiry_timestamp_seconds"


def get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.read().decode()


def served(text: str) -> float | None:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == GAUGE:
                return sample.value
    return None


async def test_an_api_process_serves_its_client_certificates_expiry(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    pem = pki.client_cert.read_bytes()
    connection = TemporalConnection(
        address="temporal.internal:7233",
        tls=TLSConfig(client_cert=pem, client_private_key=pki.client_key.read_bytes()),
        client_cert_source=str(pki.client_cert),
    )
    watch = CredentialWatch(connection, poll_seconds=0.01)
    runtime = Runtime(cast(Any, object()), "q", offline_model=None, credentials=watch)
    endpoint = reactive_temporal.serve_metrics(0)
    try:
        expires = not_after(pem)
        assert expires is not None
        base = f"http://127.0.0.1:{endpoint.port}"
        # the runtime's watch reads the certificate as it starts
        await wait_for(lambda: served(get(f"{base}/metrics")[1]) == expires.timestamp())
        assert get(f"{base}/healthz") == (200, "serving\n")
    finally:
        endpoint.stop()
        await runtime.close()
