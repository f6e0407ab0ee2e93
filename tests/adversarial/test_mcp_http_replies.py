"""Hostile replies from a streamable-HTTP MCP server: endless, huge, dripping or compressed.

The SDK's HTTP transport read a JSON reply whole, with no cap: a `tools/call` answered with an
endless body grew the worker by 680 MB in the call's 5 s, and went on growing after the call
had timed out (its POST was left open and read on). Now a reply over `max_message_bytes` fails
its call at once, saying which server and what cap, reading stops at the cap, and the next call
is answered, on the same session. A reply nobody waits for any more (one dripping a byte a
second, say) is read no further than the call's timeout and its backstop.

The server (tests/fixtures/mcp_http_hostile.py) runs in the test's own event loop on
127.0.0.1 and counts what it manages to write and which replies are still being written:
the tests read those, so they measure the client having stopped reading, not its own account.
`tracemalloc` measures what the worker (this process) held meanwhile.
"""

from __future__ import annotations

import asyncio
import time
import tracemalloc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from reactive_temporal.mcp_tools import McpConnectionError, McpToolbox
from reactive_temporal.tools import Tool
from tests.adversarial.conftest import by_name, eventually, within
from tests.fixtures.mcp_http_hostile import HostileHttpServer

CAP = 2 * 1024 * 1024
"""Not the SDK's own cap on an SSE event (1 MiB), so the tests see which cap held."""
PACED: dict[str, Any] = {"chunk_bytes": 65_536, "interval": 0.005}
"""~10 MB/s: the cap in a fifth of a second; without one, 100 MB in a 10 s timeout, not more."""


@asynccontextmanager
async def hostile_toolbox(
    server: HostileHttpServer, **options: Any
) -> AsyncIterator[dict[str, Tool]]:
    async with McpToolbox([f"evil={server.url}"], max_message_bytes=CAP, **options) as toolbox:
        yield by_name(toolbox)


@asynccontextmanager
async def peak_memory() -> AsyncIterator[list[int]]:
    """The most this process held meanwhile, above what it held before (bytes), once done."""
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        found: list[int] = []
        yield found
        found.append(tracemalloc.get_traced_memory()[1] - base)
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("tool", ["endless_json", "declared_json", "endless_event"])
async def test_a_reply_over_the_cap_fails_its_call_at_once_and_is_read_no_further(tool: str):
    """A chunked JSON body, one declaring 100 GB, and one SSE event, all never ending."""
    async with (
        HostileHttpServer() as server,
        hostile_toolbox(server, tool_timeout_seconds=30) as tools,
    ):
        async with peak_memory() as peak:
            with pytest.raises(McpConnectionError) as info:  # at the cap, not the timeout
                await within(30, tools[f"evil/{tool}"], **PACED)
        assert str(info.value) == f"MCP server 'evil' sent a message longer than {CAP} bytes"
        await eventually(lambda: server.writing == 0)  # the client closed the connection
        [sent] = server.sent
        assert CAP < sent < CAP + 8 * 1024 * 1024  # the cap, and what the sockets held
        assert peak[0] < 6 * CAP, f"{peak[0]:,} bytes held for a {CAP:,}-byte cap"
        assert await within(10, tools["evil/hello"]) == "hello"


@pytest.mark.parametrize("method", ["initialize", "tools/list"])
async def test_a_handshake_reply_over_the_cap_fails_the_connect_naming_server_and_cap(
    method: str,
):
    async with HostileHttpServer(endless_method=method) as server:
        with pytest.raises(McpConnectionError) as info:
            async with hostile_toolbox(server, connect_timeout_seconds=10):
                pass
        assert str(info.value).startswith(f"MCP server 'evil={server.url}': cannot connect (")
        assert f"sent a message longer than {CAP} bytes" in str(info.value)
        await eventually(lambda: server.writing == 0)
        assert server.sent[0] < CAP + 8 * 1024 * 1024


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("endless_json", {"chunk_bytes": 1, "interval": 1}),  # a byte a second, forever
        ("endless_events", {"interval": 0.05}),  # small SSE notifications, never the result
        ("silent", {}),  # not even its headers: waited for httpx2's read timeout, 300 s
    ],
)
async def test_a_reply_dripping_forever_is_read_no_longer_than_its_calls_timeout(
    tool: str, arguments: dict[str, Any]
):
    """Before the 2026 protocol, giving up on a request leaves its POST open: such a reply
    was read for as long as the server went on. Now until the call's timeout and its 5 s
    backstop (the SDK's own wait for a reply), then the connection is closed."""
    async with (
        HostileHttpServer() as server,
        hostile_toolbox(server, tool_timeout_seconds=1) as tools,
    ):
        with pytest.raises(TimeoutError):
            await within(1, tools[f"evil/{tool}"], **arguments)
        assert server.writing == 1  # still sending when the call gave up
        # closed after the deadline and the backstop; read on, it never would be (the silent
        # one at httpx's 300 s read timeout): 60 s is a hang guard, not a timing
        await eventually(lambda: server.writing == 0, seconds=60)
        assert await within(10, tools["evil/hello"]) == "hello"


async def test_a_compressed_reply_is_refused_before_it_is_inflated():
    """The client asks for `identity`; 64 KB of gzip inflated to a 64 MiB reply, read whole
    (the cap counts the bytes on the wire, which bound nothing once inflated)."""
    async with (
        HostileHttpServer() as server,
        hostile_toolbox(server, tool_timeout_seconds=30) as tools,
    ):
        async with peak_memory() as peak:
            with pytest.raises(McpConnectionError) as info:
                await within(30, tools["evil/gzip_bomb"])
        assert (
            str(info.value)
            == "MCP server 'evil' sent a compressed reply, which it was not asked for"
        )
        assert peak[0] < 4 * CAP
        assert await within(10, tools["evil/hello"]) == "hello"


async def test_other_calls_to_the_server_go_on_beside_a_refused_reply():
    """A refusal fails its own request, not the session: a call in flight beside it answers."""
    async with (
        HostileHttpServer() as server,
        hostile_toolbox(server, tool_timeout_seconds=60) as tools,
    ):
        drip = asyncio.create_task(
            within(60, tools["evil/endless_json"], chunk_bytes=1, interval=0.1)
        )
        await eventually(lambda: server.writing == 1, seconds=60)  # the drip is under way
        with pytest.raises(McpConnectionError, match="longer than"):
            await within(30, tools["evil/endless_json"], **PACED)
        assert await within(30, tools["evil/hello"]) == "hello"
        assert not drip.done()  # the refusal failed neither the session nor the call beside
        drip.cancel()


async def test_a_server_asking_to_be_reconnected_at_once_forever_is_reconnected_at_a_pace():
    """A server's GET stream (its own messages to the client) that says `retry: 0` and ends:
    the SDK reconnects after the server's `retry`, and starts counting its attempts again each
    time a stream ends normally, so it came back without a pause, forever (hundreds of
    requests a second, the worker's CPU with them). Now at most one GET a second."""
    async with (
        HostileHttpServer(reconnect_storm=True) as server,
        hostile_toolbox(server) as tools,
    ):
        assert await within(10, tools["evil/hello"]) == "hello"
        start, began = server.gets, time.monotonic()
        await eventually(lambda: server.gets - start >= 4, seconds=60)  # it does come back
        # four at most one a second apart: about 3 s at least (a bound a loaded machine only
        # lengthens); without the pace, hundreds a second
        assert time.monotonic() - began >= 2.5, f"{server.gets - start} GETs"
        assert await within(10, tools["evil/hello"]) == "hello"  # the session still answers
