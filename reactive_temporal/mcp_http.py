"""The streamable-HTTP transport of MCP servers: the SDK's own, handed an httpx2 client that
caps one reply, stops reading a reply nobody waits for any more, and takes no compressed ones.

The SDK's `streamable_http_client` reads a reply sent as `application/json` whole
(`response.aread()`), with no cap; its own cap (`max_sse_event_size`) is on one event of an
SSE reply only. Measured against a hostile server on 127.0.0.1 (the adversarial suite's
`tests/fixtures/mcp_http_hostile.py`), a `tools/call` answered with an endless JSON body grew
the worker by 680 MB in the call's 5 s, and kept growing after the call had timed out (+300 MB
in the next 3 s): before the 2026 protocol, a request given up on is cancelled with a
notification and its POST is left open, read to its end, which may never come. A reply
dripping a byte a second was read for as long as the server went on. And 255 KB of gzip (which
the client asks for by default) became a 256 MiB reply, 512 MiB in the worker.

The SDK takes an httpx2 client, so this module builds one, with event hooks rather than a
transport of its own (a client given a transport no longer takes proxies from the environment):

- a reply's body, other than an SSE stream, is capped at `max_message_bytes`, counted as it
  is read: past the cap, reading stops and the response is closed (the SDK caps each event of
  an SSE reply, set here to the same number);
- the headers and body of a POST are read only until its deadline (`call_seconds` from the
  request for a `tools/call`, `connect_seconds` for anything else; the headers for as long at
  most between two bytes, httpx2's read timeout), past which nobody waits for it: the
  caller's own timeout has fired by then, so the reply that outlasts it is dropped, not read;
- the client asks for `Accept-Encoding: identity`, and a compressed reply is refused: a cap
  on the bytes on the wire does not bound what they inflate to;
- GETs (the server's own stream, a reply's resumption) go at most one a second
  (`GET_PACE_SECONDS`), whatever pause the server asks for.

Each refusal is an `httpx2.StreamError`, which the SDK turns into an error for that one request
(rather than the end of the session and of the calls in flight beside it); `ReplyLimits.refusal`
recognises it in that error, so the call fails saying which server did what, and the next call
goes on in the same session. The GET stream the SDK keeps open for the server's own messages
has no deadline (it is meant to stay open); its events are capped by the SDK.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import httpx2

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

    from reactive_temporal.mcp_connection import TransportHooks

CONNECT_SECONDS = 30.0
"""httpx2's connect, write and pool timeouts: the SDK's defaults (`create_mcp_http_client`)."""
READ_SECONDS = 300.0
"""httpx2's timeout on one read, the SDK's default too: the GET stream may be quiet that long."""
GET_PACE_SECONDS = 1.0
"""At most one GET (the stream of the server's own messages, or a reply's resumption) a
second: the SDK reconnects after the server's `retry:` and counts its attempts afresh whenever
a stream ends normally, so a server saying `retry: 0` and ending its stream had it come back
at once, forever (2,000 requests a second on 127.0.0.1). One second is the SDK's own pause
when a server names none."""
_DEADLINE = "reactive_temporal.reply_deadline"
"""Where a request carries its reply's deadline (`anyio.current_time()` seconds)."""

EventHook = Callable[[Any], Awaitable[None]]


class RefusedReply(httpx2.StreamError):
    """A reply this module stopped reading, and why.

    A StreamError because that is what the SDK fails a single request with when reading its
    reply goes wrong; any other error ends the whole session."""


class ReplyLimits:
    """One server's limits on its replies, and the words for each refusal."""

    def __init__(
        self,
        max_bytes: int,
        *,
        call_seconds: float,
        connect_seconds: float,
        server: str = "NAME",
        credentials: bool = False,
    ) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be positive, not {max_bytes!r}")
        self.max_bytes = max_bytes
        self.call_seconds = call_seconds
        self.connect_seconds = connect_seconds
        self.too_long = f"sent a message longer than {max_bytes} bytes"
        self.compressed = "sent a compressed reply, which it was not asked for"
        self._sse_too_long = f"exceeded the {max_bytes} byte limit"
        """The SDK's words for an SSE event over `max_sse_event_size` (httpx2's SSEError)."""
        self._next_get = 0.0
        """When the next GET may go (`anyio.current_time()`): GET_PACE_SECONDS apart."""
        self.server = server
        self.credentials = credentials
        """Whether the operator gave headers for this server (`--mcp-header`)."""
        self.unauthorized: str | None = None
        """The server's last refusal of the credentials (401, 403), in words: the SDK
        reports one as "Server returned an error response" and no more."""

    def too_slow(self, seconds: float) -> str:
        return f"did not finish a reply within {seconds:g}s"

    def refusal(self, message: str) -> str | None:
        """Why a request failed, in this module's words, if `message` (its error) says a reply
        was refused: over the cap (by this module or by the SDK's SSE cap), compressed, or
        too slow; None for any other error."""
        if self.too_long in message or self._sse_too_long in message:
            return self.too_long
        if self.credentials_refused(message):
            return self.unauthorized
        slow = (self.too_slow(self.call_seconds), self.too_slow(self.connect_seconds))
        return next((why for why in (self.compressed, *slow) if why in message), None)

    def credentials_refused(self, message: str) -> bool:
        """Whether a request failed with `message` because the server refused the credentials
        (its last refusal, `unauthorized`): the server did not run it, so it may go again
        with renewed ones."""
        return self.unauthorized is not None and SDK_HTTP_ERROR in message

    def event_hooks(self) -> dict[str, list[EventHook]]:
        return {"request": [self._stamp], "response": [self._cap]}

    async def _stamp(self, request: httpx2.Request) -> None:
        """A POST's reply is read until its deadline; a GET (the server's own stream) has none,
        and waits for its turn (GET_PACE_SECONDS)."""
        if request.method == "GET":
            now = anyio.current_time()
            wait, self._next_get = self._next_get - now, max(now, self._next_get) + GET_PACE_SECONDS
            if wait > 0:
                await anyio.sleep(wait)
        if request.method == "POST":
            call = _method(request) == "tools/call"
            seconds = self.call_seconds if call else self.connect_seconds
            request.extensions[_DEADLINE] = (anyio.current_time() + seconds, seconds)
            # and its headers waited for no longer: a server that sends none held the
            # connection for httpx2's read timeout (300 s) after its call had given up
            timeout = dict(request.extensions.get("timeout") or {})
            request.extensions["timeout"] = {**timeout, "read": seconds}

    async def _cap(self, response: httpx2.Response) -> None:
        assert isinstance(response.stream, httpx2.AsyncByteStream)  # an AsyncClient's
        if response.status_code in UNAUTHORIZED:
            self.unauthorized = _unauthorized(response, self.server, self.credentials)
        elif response.is_success:  # taken again (a token renewed): later errors are others
            self.unauthorized = None
        content_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        deadline = response.request.extensions.get(_DEADLINE)
        response.stream = CappedBody(
            response.stream,
            max_bytes=None if content_type == "text/event-stream" else self.max_bytes,
            deadline=deadline,
            refused=None if encoding in ("", "identity") else self.compressed,
            limits=self,
        )


class CappedBody(httpx2.AsyncByteStream):
    """A response's body as it comes off the wire, ended (RefusedReply) at the cap on its
    bytes, at its deadline, or before its first byte if it was refused outright.

    The bytes counted are those on the wire, which are the bytes held: a compressed body is
    refused, so none is inflated."""

    def __init__(
        self,
        body: httpx2.AsyncByteStream,
        *,
        max_bytes: int | None,
        deadline: tuple[float, float] | None,
        refused: str | None,
        limits: ReplyLimits,
    ) -> None:
        self._body = body
        self._max_bytes = max_bytes
        self._deadline = deadline
        self._refused = refused
        self._limits = limits

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._refused is not None:
            raise RefusedReply(self._refused)
        chunks = aiter(self._body)
        read = 0
        try:
            while True:
                try:
                    chunk = await self._next(chunks)
                except StopAsyncIteration:
                    return
                read += len(chunk)
                if self._max_bytes is not None and read > self._max_bytes:
                    raise RefusedReply(self._limits.too_long)
                yield chunk
        finally:
            if hasattr(chunks, "aclose"):
                await chunks.aclose()

    async def _next(self, chunks: AsyncIterator[bytes]) -> bytes:
        if self._deadline is None:
            return await anext(chunks)
        at, seconds = self._deadline
        with anyio.move_on_after(at - anyio.current_time()):
            return await anext(chunks)
        raise RefusedReply(self._limits.too_slow(seconds))

    async def aclose(self) -> None:
        await self._body.aclose()

    @property
    def elapsed(self) -> Any:
        """httpx2 times a response through its stream (`Response.elapsed`)."""
        return getattr(self._body, "elapsed", None)


SDK_HTTP_ERROR = "Server returned an error response"
"""The SDK's words for a request answered with an HTTP error and no JSON-RPC error."""
UNAUTHORIZED = (401, 403)


def _unauthorized(response: httpx2.Response, server: str, credentials: bool) -> str:
    """A refusal of the worker's credentials, in words that say what to do: a 401 is the
    server asking for credentials (sent with --mcp-header), or refusing the ones sent; a 403
    refuses what they allow. The server's `WWW-Authenticate` error is named; nothing of the
    request is (its headers are secrets)."""
    sent = credentials or "authorization" in response.request.headers  # or the URL's
    error = re.search(r'error="?([A-Za-z0-9_.-]+)', response.headers.get("www-authenticate", ""))
    words = f"answered HTTP {response.status_code} {response.reason_phrase}".rstrip()
    if error:
        words += f" ({error.group(1)})"
    if response.status_code == 403:
        return f"{words}: the credentials sent do not allow this" if sent else words
    if sent:
        return f"{words}: it refused the credentials sent (check its --mcp-header)"
    return (
        f"{words}: it wants credentials; send them with "
        f"--mcp-header '{server}=Authorization: Bearer ${{VARIABLE}}'"
    )


def _method(request: httpx2.Request) -> str | None:
    """The JSON-RPC method a POST carries (the SDK sends each message as a JSON body)."""
    try:
        message = json.loads(request.content)
    except (ValueError, httpx2.RequestNotRead):
        return None
    method = message.get("method") if isinstance(message, Mapping) else None
    return method if isinstance(method, str) else None


@asynccontextmanager
async def http_transport(
    url: str,
    hooks: TransportHooks,
    *,
    server: str = "NAME",
    headers: Mapping[str, str] | None = None,
    max_message_bytes: int,
    call_seconds: float,
    connect_seconds: float,
) -> AsyncIterator[TransportStreams]:
    """The SDK's streamable-HTTP transport to `url`, over a client enforcing `ReplyLimits`
    and sending `headers` (`mcp_headers`) with every request; `hooks.refusal` tells the
    session which errors were its refusals."""
    from mcp.client.streamable_http import streamable_http_client

    limits = ReplyLimits(
        max_message_bytes,
        call_seconds=call_seconds,
        connect_seconds=connect_seconds,
        server=server,
        credentials=bool(headers),
    )
    hooks.refusal = limits.refusal
    hooks.credentials_refused = limits.credentials_refused
    client = httpx2.AsyncClient(
        timeout=httpx2.Timeout(CONNECT_SECONDS, read=READ_SECONDS),
        headers={**(headers or {}), "Accept-Encoding": "identity"},
        event_hooks=limits.event_hooks(),
    )
    async with (
        client,
        streamable_http_client(
            url, http_client=client, max_sse_event_size=max_message_bytes
        ) as streams,
    ):
        yield streams
