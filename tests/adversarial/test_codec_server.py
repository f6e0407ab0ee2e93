"""The codec server under abuse: half-sent requests, huge or missing lengths, no token.

Rows: `input` is the raw bytes a client sends (headers, and never the body they announce);
`expect` is the status line the server must answer with, without waiting for a body it
was promised. Every row is followed by an ordinary request, which must still be served.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from reactive_temporal.codec import EncryptionCodec, generate_key_string
from reactive_temporal.embedded.codec_server import MAX_BODY_BYTES, CodecServer
from tests.adversarial.cases import Hostile, params, table

TOKEN = "adversarial-codec-token"
AUTH = f"Authorization: Bearer {TOKEN}\r\n"
DEADLINE = 30.0
"""The server's per-connection deadline in the row tests: far longer than an answer takes, so
an answer that comes at all came without the body."""


def post(path: str = "/decode", headers: str = "") -> bytes:
    return f"POST {path} HTTP/1.1\r\nHost: codec\r\n{headers}\r\n".encode()


UNREAD = "a server that reads the body first would wait for it (64 MB used to be read)"
CODEC = table("codec-server", [
    Hostile("codec-no-token-huge-body", post(headers="Content-Length: 60000000\r\n"),
            "HTTP/1.1 401", UNREAD),
    Hostile("codec-wrong-token-huge-body",
            post(headers="Authorization: Bearer guess\r\nContent-Length: 60000000\r\n"),
            "HTTP/1.1 401", UNREAD),
    Hostile("codec-no-token-unknown-route", post("/../../etc", "Content-Length: 9999999\r\n"),
            "HTTP/1.1 401", "routes revealed before the token is checked"),
    Hostile("codec-unknown-route", post("/other", AUTH + "Content-Length: 9999999\r\n"),
            "HTTP/1.1 404", UNREAD),
    Hostile("codec-oversize-body", post(headers=AUTH + f"Content-Length: {MAX_BODY_BYTES + 1}\r\n"),
            "HTTP/1.1 413", "64 MB bodies accepted"),
    Hostile("codec-negative-length", post(headers=AUTH + "Content-Length: -1\r\n"),
            "HTTP/1.1 413", "a read of everything until close"),
    Hostile("codec-non-numeric-length", post(headers=AUTH + "Content-Length: lots\r\n"),
            "HTTP/1.1 413", "a ValueError"),
    Hostile("codec-chunked-no-length", post(headers=AUTH + "Transfer-Encoding: chunked\r\n"),
            "HTTP/1.1 411", "an empty body parsed as a request"),
    Hostile("codec-header-line-bomb", post(headers="X-Big: " + "a" * 70_000 + "\r\n"),
            "HTTP/1.1 431", "unbounded header lines"),
    Hostile("codec-too-many-headers", post(headers="".join(f"X-{i}: v\r\n" for i in range(150))),
            "HTTP/1.1 431", "unbounded headers"),
])  # fmt: skip


@pytest.fixture
def server() -> Iterator[CodecServer]:
    codec = EncryptionCodec(generate_key_string("k1"))
    with CodecServer(codec, token=TOKEN, request_timeout_seconds=DEADLINE) as running:
        yield running


def port_of(server: CodecServer) -> int:
    return int(server.url.rsplit(":", 1)[1])


def still_serves(server: CodecServer) -> None:
    response = httpx.post(
        f"{server.url}/decode", json={"payloads": []}, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert response.status_code == 200 and response.json() == {"payloads": []}


@pytest.mark.parametrize("row", params(CODEC))
def test_codec_server_answers_without_reading_what_it_refuses(row: Hostile, server: CodecServer):
    with socket.create_connection(("127.0.0.1", port_of(server)), timeout=DEADLINE / 2) as sock:
        sock.sendall(row.input)
        answer = sock.recv(4096)  # a server waiting for the body would time this out
    assert answer.startswith(row.expect.encode()), answer[:200]
    still_serves(server)


def test_deeply_nested_json_body_is_a_400(server: CodecServer):
    body = "[" * 200_000
    response = httpx.post(
        f"{server.url}/decode", content=body, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert response.status_code == 400 and "protobuf JSON" in response.json()["error"]
    still_serves(server)


def test_a_hundred_half_sent_requests_hold_no_threads_for_long():
    """100 clients send half a request and stop. The server keeps a fixed number of threads,
    answers those it has no room for with 503 at once, cuts the rest off at their deadline,
    and then serves as before."""
    codec = EncryptionCodec(generate_key_string("k1"))
    with CodecServer(codec, token=TOKEN, threads=4, queued=8, request_timeout_seconds=1.0) as s:
        before = threading.active_count()
        clients = [socket.create_connection(("127.0.0.1", port_of(s))) for _ in range(100)]
        for c in clients:
            c.sendall(b"POST /decode HTTP/1.1\r\nHost: codec\r\nContent-Le")
        time.sleep(0.5)
        during = threading.active_count()
        closed = 0
        busy = 0
        for c in clients:  # every connection ends: a 503 at once, or closed at its deadline
            c.settimeout(60)  # a hang guard
            data = c.recv(4096)
            busy += data.startswith(b"HTTP/1.1 503")
            closed += 1
            c.close()
        assert closed == 100
        assert busy >= 100 - 4 - 8  # no room: refused at once rather than queued without end
        assert during - before <= 4  # the pool's threads, not one per client
        still_serves(s)


def test_a_slow_drip_client_is_cut_off_at_its_deadline():
    codec = EncryptionCodec(generate_key_string("k1"))
    with CodecServer(codec, token=TOKEN, request_timeout_seconds=1.0) as s:
        with socket.create_connection(("127.0.0.1", port_of(s)), timeout=10) as sock:
            request = post(headers=AUTH + "Content-Length: 20\r\n") + b'{"payloads": []}'
            cut_off = False
            for byte in request:  # one byte every 0.2 s: the whole request would take 20 s
                try:
                    sock.sendall(bytes([byte]))
                except OSError:
                    cut_off = True
                    break
                time.sleep(0.2)
            if not cut_off:
                cut_off = sock.recv(4096) == b""
        assert cut_off
        still_serves(s)


def test_json_error_bodies_do_not_echo_the_path(server: CodecServer):
    evil = "/" + "x" * 5000 + "<script>"
    response = httpx.post(
        f"{server.url}{evil}", json={}, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert response.status_code == 404
    assert len(json.dumps(response.json())) < 400
