"""HTTP responses http_get reads: bombs, lies, loops and redirects to where it must not go.

Rows: `input` is a route of a local server on 127.0.0.1 that the worker's allow-list opens
(REACTIVE_TEMPORAL_HTTP_ALLOW=127.0.0.1:<its port>); the route's handler is in ROUTES.
`expect` is a distinctive part of the observation. A second server on another port is not
allowed: it stands for an internal service, and must never receive a request.
"""

from __future__ import annotations

import asyncio
import gzip
import time
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from temporalio.client import Client

from reactive_temporal.builtin_tools import http_get_tool
from reactive_temporal.config import Settings
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from reactive_temporal.http_guard import AllowList
from reactive_temporal.limits import OBSERVATION_MAX_CHARS
from tests.adversarial.cases import Hostile, table
from tests.adversarial.conftest import (
    LocalServer,
    StoreSnapshot,
    assert_no_failed_tasks,
    observations,
    owned_by,
    send,
    unique,
)
from tests.workflow.conftest import Harness, running_worker

INFLATED = 64 * 1024 * 1024
BOMB_GZIP = gzip.compress(b"\0" * INFLATED, compresslevel=9)
BOMB_ZLIB = zlib.compress(b"\0" * INFLATED, 9)
_raw = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
BOMB_RAW_DEFLATE = _raw.compress(b"\0" * INFLATED) + _raw.flush()
INTERNAL: dict[str, LocalServer] = {}
"""The not-allowed server, once started (its port is only known then)."""


def redirect(location: Callable[[], str]) -> Callable[[BaseHTTPRequestHandler], None]:
    return lambda h: send(h, 302, b"", {"Location": location()})


def endless(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    chunk = b"A" * 65536
    for _ in range(2000):  # 128 MB if nobody stops reading; a bounded reader stops at once
        h.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))


def drip(h: BaseHTTPRequestHandler) -> None:
    """A byte every half second: no read ever times out, the whole never arrives."""
    h.send_response(200)
    h.send_header("Content-Length", "1000")
    h.end_headers()
    for _ in range(200):
        h.wfile.write(b"x")
        h.wfile.flush()
        time.sleep(0.5)


def raw_reply(data: bytes) -> Callable[[BaseHTTPRequestHandler], None]:
    def reply(h: BaseHTTPRequestHandler) -> None:
        h.wfile.write(data)
        h.close_connection = True

    return reply


ROUTES: dict[str, Callable[[BaseHTTPRequestHandler], None]] = {
    "/served": lambda h: send(h, 200, b"served"),
    "/gzip-bomb": lambda h: send(h, 200, BOMB_GZIP, {"Content-Encoding": "gzip"}),
    "/deflate-bomb": lambda h: send(h, 200, BOMB_ZLIB, {"Content-Encoding": "deflate"}),
    "/raw-deflate-bomb": lambda h: send(h, 200, BOMB_RAW_DEFLATE, {"Content-Encoding": "deflate"}),
    "/corrupt-gzip": lambda h: send(h, 200, b"\x1f\x8b\x08\x00garbage" * 10,
                                    {"Content-Encoding": "gzip"}),
    "/brotli": lambda h: send(h, 200, b"\x8b\x02\x80hello\x03", {"Content-Encoding": "br"}),
    "/endless": endless,
    "/drip": drip,
    "/loop": redirect(lambda: "/loop"),
    "/to-internal": redirect(lambda: INTERNAL["server"].url("/secret")),
    "/to-metadata": redirect(lambda: "http://169.254.169.254/latest/meta-data/iam/"),
    "/to-file": redirect(lambda: "file:///etc/passwd"),
    "/to-ipv4-mapped": redirect(lambda: f"http://[::ffff:127.0.0.1]:{INTERNAL['server'].port}/"),
    "/bogus-charset": lambda h: send(h, 200, b"hello",
                                     {"Content-Type": "text/plain; charset=nope"}),
    "/bytes-codec-charset": lambda h: send(h, 200, b"hello",
                                           {"Content-Type": "text/plain; charset=zlib_codec"}),
    "/length-lie": raw_reply(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort"),
    "/garbage-status": raw_reply(b"HTTP/9 OK???\r\n\r\n"),
    "/header-bomb": raw_reply(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 200_000 + b"\r\n\r\n"),
}  # fmt: skip

RESPONSES = table("http-responses", [
    Hostile("http-allow-listed-served", "/served", "HTTP 200\nserved",
            "the allow-list is an exception, not a block"),
    Hostile("http-gzip-bomb", "/gzip-bomb", "HTTP 200 (truncated)",
            "64 MiB inflated in memory from 64 KB"),
    Hostile("http-deflate-bomb", "/deflate-bomb", "HTTP 200 (truncated)", "the same, zlib"),
    Hostile("http-raw-deflate-bomb", "/raw-deflate-bomb", "HTTP 200 (truncated)",
            "the same, raw deflate"),
    Hostile("http-corrupt-gzip", "/corrupt-gzip", "the gzip body is corrupt",
            "a decoder exception with no explanation"),
    Hostile("http-unrequested-encoding", "/brotli", "Content-Encoding 'br'",
            "an encoding nobody asked for, decoded without bound"),
    Hostile("http-endless-body", "/endless", "HTTP 200 (truncated)", "read until the timeout"),
    Hostile("http-slow-drip", "/drip",
            "http_get failed: TimeoutError: no complete response within 15s",
            "read for as long as the server drips (no single read ever times out)"),
    Hostile("http-redirect-loop", "/loop", "TooManyRedirects", "followed forever"),
    Hostile("http-redirect-to-internal", "/to-internal", "a loopback address",
            "an allowed server redirecting to one that is not"),
    Hostile("http-redirect-to-metadata", "/to-metadata", "cloud metadata",
            "cloud credentials through a redirect"),
    Hostile("http-redirect-to-file", "/to-file", "UnsupportedProtocol", "a local file"),
    Hostile("http-redirect-to-ipv4-mapped", "/to-ipv4-mapped", "inside IPv6",
            "the internal server through an IPv6 spelling"),
    Hostile("http-bogus-charset", "/bogus-charset", "HTTP 200\nhello", "LookupError"),
    Hostile("http-bytes-codec-charset", "/bytes-codec-charset", "HTTP 200\nhello",
            "a bytes-to-bytes codec as charset: LookupError"),
    Hostile("http-content-length-lie", "/length-lie", "RemoteProtocolError", "a hang"),
    Hostile("http-garbage-status-line", "/garbage-status", "RemoteProtocolError", "a crash"),
    Hostile("http-header-bomb", "/header-bomb", "RemoteProtocolError", "unbounded headers"),
])  # fmt: skip


@pytest.fixture(scope="module")
async def servers() -> AsyncIterator[tuple[LocalServer, LocalServer]]:
    allowed, internal = LocalServer(dict(ROUTES)), LocalServer()
    INTERNAL["server"] = internal
    yield allowed, internal
    allowed.close()
    internal.close()


@pytest.fixture(scope="module")
async def allow_listed(
    client: Client, settings: Settings, servers: tuple[LocalServer, LocalServer]
) -> AsyncIterator[Harness]:
    """A worker whose allow-list opens the first server's port, and only that."""
    opened = settings.model_copy(update={"http_allow": servers[0].host_port})
    async with running_worker(client, opened, max_cached_workflows=None) as harness:
        yield harness


@pytest.fixture(scope="module")
async def observed(
    allow_listed: Harness,
    servers: tuple[LocalServer, LocalServer],
    llm: ScriptedLLM,
    client: Client,
    database_url: str,
) -> dict[str, Any]:
    allowed, internal = servers
    calls = [call("http_get", url=allowed.url(row.input)) for row in RESPONSES]
    replies = [Reply(None, calls[i : i + 8]) for i in range(0, len(calls), 8)]
    model = llm.script(unique("http"), [*replies, Reply("FINAL ANSWER: read")])
    agent = allow_listed.agent(model, agent_id=unique("http"), memory=False,
                               max_parallel_tools=8, max_iterations=len(replies) + 2)  # fmt: skip
    before = await StoreSnapshot.take(database_url)
    result = await asyncio.wait_for(agent.run("Read these pages"), 180)
    after = await StoreSnapshot.take(database_url)
    assert result.terminated_by == "final_answer"
    await assert_no_failed_tasks(client, result.run_id)
    found = await observations(database_url, result.run_id)
    return {
        "observations": {
            row.id: content for row, (_, content) in zip(RESPONSES, found, strict=True)
        },
        "changes": after.changes_since(before, own=owned_by(result.run_id)),
        "internal_requests": list(internal.requests),
        "allowed_requests": list(allowed.requests),
    }


@pytest.mark.parametrize("row", [pytest.param(r, id=r.id) for r in RESPONSES])
def test_hostile_http_responses_get_clear_outcomes(row: Hostile, observed: dict[str, Any]):
    content = observed["observations"][row.id]
    assert row.expect in content, content[:500]
    if "truncated" in row.expect:  # cut at max_bytes, then at the observation cap
        assert len(content) <= OBSERVATION_MAX_CHARS


def test_nothing_stored_changed_and_the_internal_server_saw_nothing(observed: dict[str, Any]):
    assert observed["changes"] == []
    assert observed["internal_requests"] == []
    # every hop to the allowed server was made (loops stop at the redirect limit)
    assert observed["allowed_requests"].count("/loop") == 6


async def test_allow_listed_server_is_served_its_redirect_elsewhere_refused(
    servers: tuple[LocalServer, LocalServer],
):
    """The specific case, straight through the tool: the allow-listed server answers, its
    redirect to a server on a port the list does not name is refused, and that server and a
    loopback server nobody allowed never see a request."""
    allowed, internal = servers
    seen = len(internal.requests)
    get = http_get_tool(AllowList.parse(allowed.host_port))
    assert await get(url=allowed.url("/served")) == "HTTP 200\nserved"
    with pytest.raises(
        ValueError, match=f"refused to connect to 127.0.0.1:{internal.port}, a loop"
    ):
        await get(url=allowed.url("/to-internal"))
    with pytest.raises(ValueError, match="a loopback address"):
        await http_get_tool()(url=allowed.url("/served"))  # the default: public addresses only
    assert len(internal.requests) == seen


async def test_gzip_bomb_never_inflates_in_memory(servers: tuple[LocalServer, LocalServer]):
    allowed, _ = servers
    get = http_get_tool(AllowList.parse(allowed.host_port))
    tracemalloc.start()
    try:
        text = await get(url=allowed.url("/gzip-bomb"), max_bytes=200_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert text.startswith("HTTP 200 (truncated)\n") and len(text) == 21 + 200_000
    assert peak < 8 * 1024 * 1024, f"peak {peak:,} bytes while reading a {INFLATED:,}-byte bomb"
