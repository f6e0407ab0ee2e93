"""The test doubles of tests/support work against the real dev server and SDKs.

The TLS proxy carries a Temporal client's mTLS connection to the plaintext dev server and shows
the gRPC metadata it sent; it refuses clients without a certificate from its CA. The OTLP
receiver decodes what the OpenTelemetry SDK's OTLP/HTTP exporter sends.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.client import Client
from temporalio.service import TLSConfig

from tests.conftest import wait_for
from tests.support.otlp import OtlpReceiver
from tests.support.pki import make_pki
from tests.support.tls_proxy import TlsProxy

pytestmark = pytest.mark.workflow


def tls(pki, *, client: bool = True, stranger: bool = False) -> TLSConfig:
    cert, key = (
        (pki.stranger_cert, pki.stranger_key) if stranger else (pki.client_cert, pki.client_key)
    )
    return TLSConfig(
        server_root_ca_cert=pki.ca_cert.read_bytes(),
        client_cert=cert.read_bytes() if client else None,
        client_private_key=key.read_bytes() if client else None,
    )


async def test_tls_proxy_carries_mtls_to_the_dev_server_and_shows_the_api_key(
    temporal_address: str, tmp_path: Path
):
    pki = make_pki(tmp_path)
    with TlsProxy(temporal_address, pki) as proxy:
        client = await Client.connect(
            proxy.address, tls=tls(pki), api_key="sekrit-key", rpc_metadata={"x-team": "agents"}
        )
        info = await client.workflow_service.get_system_info(GetSystemInfoRequest())
        assert info.server_version
        assert "authorization" in {k for r in proxy.requests for k in r}
        assert set(proxy.headers_with("authorization")) == {"Bearer sekrit-key"}
        assert "agents" in proxy.headers_with("x-team")
        paths = proxy.headers_with(":path")
        assert "/temporal.api.workflowservice.v1.WorkflowService/GetSystemInfo" in paths
        assert not proxy.handshake_errors and not proxy.decode_errors


@pytest.mark.parametrize("variant", ["no client certificate", "certificate from another CA"])
async def test_tls_proxy_refuses_clients_without_a_trusted_certificate(
    temporal_address: str, tmp_path: Path, variant: str
):
    pki = make_pki(tmp_path)
    config = tls(pki, client=False) if variant.startswith("no") else tls(pki, stranger=True)
    with TlsProxy(temporal_address, pki) as proxy:
        with pytest.raises(RuntimeError):
            client = await Client.connect(proxy.address, tls=config)
            # TLS 1.3 reports a refused client certificate after the handshake: on first use
            await client.workflow_service.get_system_info(GetSystemInfoRequest())
        # The proxy's own thread records why it refused; under load the client can give up
        # first (its refusal arrives as the peer's alert), so wait for the proxy's record.
        await wait_for(lambda: proxy.handshake_errors, seconds=60)
        assert proxy.connections == 0 or not proxy.requests


def test_otlp_receiver_decodes_what_the_otel_exporter_sends():
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    with OtlpReceiver() as otlp:
        provider = TracerProvider(resource=Resource.create({"service.name": "fixture-test"}))
        exporter = OTLPSpanExporter(endpoint=f"{otlp.endpoint}/v1/traces")
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        tracer = provider.get_tracer("test")
        with tracer.start_as_current_span("parent") as parent:
            with tracer.start_as_current_span(
                "chat gpt-test", attributes={"gen_ai.usage.input_tokens": 12, "tags": ["a", "b"]}
            ):
                pass
        provider.shutdown()
        spans = otlp.wait_for(lambda s: len(s) == 2, seconds=60)
    by_name = {s.name: s for s in spans}
    child, root = by_name["chat gpt-test"], by_name["parent"]
    assert child.trace_id == root.trace_id == format(parent.get_span_context().trace_id, "032x")
    assert child.parent_span_id == root.span_id and root.parent_span_id == ""
    assert child.attributes == {"gen_ai.usage.input_tokens": 12, "tags": ["a", "b"]}
    assert child.service == "fixture-test"
    assert not otlp.errors
