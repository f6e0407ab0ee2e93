"""The model's endpoint as company networks put it: behind an egress proxy, with a certificate
from a private CA. The worker's client reaches it through HTTPS_PROXY and trusts the CA that
SSL_CERT_FILE names (the transport is openai's aiohttp one, chosen for its CPU: these tests keep
a future transport from dropping either), and a certificate it cannot trust is a final error
that says so, not an outage retried as "Request timed out."."""

from __future__ import annotations

import socket
import ssl
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError

from activities.llm_calls import LlmEndpoint
from activities.llm_request import chat_request
from reactive_temporal.config import Settings
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM
from reactive_temporal.hosting.worker_factory import llm_client
from reactive_temporal.telemetry.metrics import REGISTRY
from tests.support.connect_proxy import ConnectProxy
from tests.support.pki import Pki, make_pki
from tests.support.steps import attempt

MODEL = "private-llm"
MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


@pytest.fixture
def private_llm(pki: Pki) -> Iterator[ScriptedLLM]:
    """A scripted endpoint over HTTPS, its certificate signed by the test's own CA."""
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(pki.server_cert, pki.server_key)
    llm = ScriptedLLM(tls=tls)
    llm.script(MODEL, [Reply("Hello from inside.")], repeat_last=True)
    with llm:
        yield llm


@pytest.fixture
def no_proxy_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy or CA from the machine running the tests."""
    for name in (
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
    ):
        monkeypatch.delenv(name, raising=False)  # fmt: skip


async def complete(base_url: str) -> str:
    endpoint = LlmEndpoint(llm_client(Settings(_env_file=None), base_url))  # type: ignore[call-arg]
    request = chat_request(MODEL, MESSAGES)
    try:
        reply = await attempt(1).run(endpoint.complete, request, max_attempts=5)
    finally:
        await endpoint.close()
    return str(reply.content)


async def test_an_untrusted_certificate_is_a_final_error_that_says_so(
    private_llm: ScriptedLLM, no_proxy_settings: None
):
    """It was "LLM endpoint unreachable: Request timed out." and retried as an outage, on the
    first of five attempts."""
    with pytest.raises(ApplicationError) as refused:
        await complete(private_llm.base_url)
    assert refused.value.non_retryable
    assert refused.value.type == "LlmCertificateError"
    assert refused.value.message == (
        "LLM endpoint's TLS certificate was not trusted (unable to get local issuer "
        "certificate): a certificate from a private CA is trusted once SSL_CERT_FILE names a "
        "bundle that holds the CA (SSL_CERT_DIR, a directory of them)"
    )
    assert private_llm.requests[MODEL] == []


async def test_the_ca_named_by_ssl_cert_file_is_trusted(
    private_llm: ScriptedLLM, pki: Pki, no_proxy_settings: None, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("SSL_CERT_FILE", str(pki.ca_cert))
    assert await complete(private_llm.base_url) == "Hello from inside."


async def test_the_endpoint_is_reached_through_the_https_proxy(
    private_llm: ScriptedLLM, pki: Pki, no_proxy_settings: None, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("SSL_CERT_FILE", str(pki.ca_cert))
    async with ConnectProxy() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        assert await complete(private_llm.base_url) == "Hello from inside."
    port = private_llm.base_url.split(":")[2].split("/")[0]
    assert proxy.tunnels == [f"127.0.0.1:{port}"]


async def test_a_connection_never_made_is_not_counted_as_a_billed_request(
    no_proxy_settings: None,
):
    """openai's aiohttp transport reports a refused connection as "Request timed out.", and
    its prompt was counted as a request the provider may have billed, at every retry."""
    with socket.socket() as held:  # a port nothing listens on
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
    model = f"down-{uuid.uuid4().hex[:6]}"
    endpoint = LlmEndpoint(llm_client(Settings(_env_file=None), f"http://127.0.0.1:{port}/v1"))  # type: ignore[call-arg]
    try:
        with pytest.raises(ApplicationError) as refused:
            await attempt(1).run(endpoint.complete, chat_request(model, MESSAGES), max_attempts=5)
    finally:
        await endpoint.close()
    assert refused.value.message.startswith("LLM endpoint unreachable: ")
    assert not refused.value.non_retryable  # an outage: retried
    sample = REGISTRY.get_sample_value(
        "reactive_temporal_llm_unreported_tokens_total", {"model": model, "kind": "input"}
    )
    assert not sample, sample
