"""A codec server: lets the Temporal Web UI and the `temporal` CLI show encrypted payloads.

It implements Temporal's remote codec protocol: `POST …/encode` and `POST …/decode` take a
`Payloads` message as protobuf JSON (`{"payloads": [{"metadata": {"encoding": "<base64>"},
"data": "<base64>"}]}`) and answer the same shape. Only the last path segment counts, so
`http://host:8081/default/decode` works too.

Whoever can reach it can read every history, so:

- every POST must carry `Authorization: Bearer <token>` (401 otherwise);
- CORS is answered for one origin only (the Web UI's, by either of this machine's names), so
  no other web page a developer has open can use the browser as a way in; other origins get
  no CORS headers at all.

The CORS preflight (OPTIONS) is the one request without the token: browsers never send
credentials on a preflight, and it reveals nothing.

It holds under abuse: a fixed pool of threads serves connections (more than the pool and its
short queue get an immediate 503), every connection has one deadline from its accept to its
close (so a client that sends half a request, or one byte a second, is cut off), one request
per connection, a 4 MB body limit, and a missing or wrong token is answered with 401 before a
byte of the body is read.

    with CodecServer(EncryptionCodec(keys), token="s3cret") as server:
        print(server.url)   # http://127.0.0.1:<port>
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads
from temporalio.converter import PayloadCodec

DEFAULT_ORIGIN = "http://localhost:8233"


def loopback_aliases(origin: str) -> set[str]:
    """`origin`, and when it names this machine, the same origin by its other name: `dev`
    prints the Web UI as http://127.0.0.1:8233, and a browser opened there was refused by
    the default origin, http://localhost:8233 (one machine, two origins to a browser)."""
    for name, other in (("localhost", "127.0.0.1"), ("127.0.0.1", "localhost")):
        prefix = f"http://{name}"
        if origin == prefix or origin.startswith(prefix + ":"):
            return {origin, f"http://{other}{origin[len(prefix) :]}"}
    return {origin}


ALLOWED_HEADERS = "Authorization, Content-Type, X-Namespace"
MAX_BODY_BYTES = 4 * 1024 * 1024
"""A batch of payloads up to Temporal's own 2 MB payload limit fits; bigger is not a codec
request."""
REQUEST_TIMEOUT_SECONDS = 10.0
THREADS = 8
QUEUED_CONNECTIONS = 32
LINGER_BYTES = 64 * 1024
"""After refusing a request, read and drop at most this much of its body, so the client
sees the answer rather than a reset connection."""


class PooledHTTPServer(HTTPServer):
    """An HTTPServer whose connections are served by a fixed thread pool, each connection
    within one deadline counted from its accept (a reaper thread cuts off late ones)."""

    request_queue_size = 128  # accept promptly, so a full pool answers 503 rather than stall

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        *,
        threads: int,
        queued: int,
        timeout_seconds: float,
    ) -> None:
        # What server_close() uses exists before the socket is bound: a bind that fails
        # (port taken, host unknown) calls it, and its AttributeError hid the OSError.
        self.request_timeout = timeout_seconds
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="codec-server")
        self._capacity = threading.BoundedSemaphore(threads + queued)
        self._deadlines: dict[socket.socket, float] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        super().__init__(address, handler)
        self._reaper = threading.Thread(target=self._reap, name="codec-reaper", daemon=True)
        self._reaper.start()

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._capacity.acquire(blocking=False):
            with contextlib.suppress(OSError):  # full: say so at once, read nothing
                request.settimeout(1)
                request.sendall(
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                    b"Connection: close\r\nRetry-After: 1\r\n\r\n"
                )
            self.shutdown_request(request)
            return
        request.settimeout(self.request_timeout)
        with self._lock:
            self._deadlines[request] = time.monotonic() + self.request_timeout
        self._pool.submit(self._serve, request, client_address)

    def _serve(self, request: Any, client_address: Any) -> None:
        try:
            if time.monotonic() < self._deadlines.get(request, 0):
                self.finish_request(request, client_address)
        except Exception:  # a client that went away, or was cut off
            pass
        finally:
            with self._lock:
                self._deadlines.pop(request, None)
            self.shutdown_request(request)
            self._capacity.release()

    def _reap(self) -> None:
        while not self._closed.wait(0.1):
            now = time.monotonic()
            with self._lock:
                late = [s for s, deadline in self._deadlines.items() if deadline <= now]
            for sock in late:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def server_close(self) -> None:
        self._closed.set()
        super().server_close()
        self._pool.shutdown(wait=False, cancel_futures=True)


class CodecServer:
    """The server, in a thread of its own, so it serves while an event loop (or a CLI) waits."""

    def __init__(
        self,
        codec: PayloadCodec,
        *,
        token: str,
        allowed_origin: str | None = DEFAULT_ORIGIN,
        host: str = "127.0.0.1",
        port: int = 0,
        log: Callable[[str], None] | None = None,
        threads: int = THREADS,
        queued: int = QUEUED_CONNECTIONS,
        request_timeout_seconds: float = REQUEST_TIMEOUT_SECONDS,
    ) -> None:
        if not token:
            raise ValueError("the codec server needs a non-empty token")
        self.codec = codec
        self.token = token
        self.allowed_origin = allowed_origin.rstrip("/") if allowed_origin else None
        self.log = log
        self._server = PooledHTTPServer(
            (host, port),
            _handler_for(self, request_timeout_seconds),
            threads=threads,
            queued=queued,
            timeout_seconds=request_timeout_seconds,
        )
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        host = str(host)
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        elif ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{port}"

    def authorized(self, header: str | None) -> bool:
        scheme, _, credentials = (header or "").strip().partition(" ")
        if scheme.lower() != "bearer":
            return False
        # Constant time, so the token cannot be guessed a character at a time.
        return hmac.compare_digest(credentials.strip().encode(), self.token.encode())

    def run_codec(self, operation: str, body: bytes) -> str:
        """Encode or decode a protobuf-JSON `Payloads`; raises ValueError on a bad request."""
        try:
            payloads = json_format.Parse(body, Payloads())
        except json_format.ParseError as e:
            raise ValueError(f"the body is not a Payloads message in protobuf JSON: {e}") from e
        method = self.codec.encode if operation == "encode" else self.codec.decode
        # The handler runs in its own thread, with no event loop: one per request is cheap
        # next to the HTTP round trip, and the codec's coroutines do no real I/O.
        result = asyncio.run(method(list(payloads.payloads)))
        # By hand rather than MessageToJson, so an empty answer still has its "payloads" key.
        return json.dumps({"payloads": [json_format.MessageToDict(p) for p in result]})

    def start(self) -> CodecServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.1,), name="codec-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def serve_forever(self) -> None:
        """Serve in the calling thread until `stop()` (from another thread) or Ctrl-C."""
        self._server.serve_forever()

    def __enter__(self) -> CodecServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _handler_for(
    server: CodecServer, server_timeout: float = REQUEST_TIMEOUT_SECONDS
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = server_timeout

        def log_message(self, format: str, *args: Any) -> None:
            pass  # requests are reported through server.log, without client details

        def do_OPTIONS(self) -> None:
            self._send(204, None)

        def do_POST(self) -> None:
            operation = self.path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
            if not server.authorized(self.headers.get("Authorization")):
                self._refuse(401, "missing or wrong `Authorization: Bearer <token>`")
                return
            if operation not in ("encode", "decode"):
                self._refuse(404, f"no route {self.path[:200]}; POST …/encode or …/decode")
                return
            header = self.headers.get("Content-Length")
            if header is None:
                self._refuse(411, "a Content-Length header is required")
                return
            length = int(header) if header.strip().isdigit() else -1
            if length < 0 or length > MAX_BODY_BYTES:
                self._refuse(413, f"the body must be 0 to {MAX_BODY_BYTES} bytes")
                return
            try:
                answer = server.run_codec(operation, self.rfile.read(length))
            except Exception as e:  # a bad body, an unknown key id, a tampered payload
                self._send(400, {"error": f"{operation} failed: {e}"})
                return
            self._send(200, answer)

        def do_GET(self) -> None:
            self._send(405, {"error": "POST …/encode or …/decode"}, {"Allow": "POST, OPTIONS"})

        def _refuse(self, status: int, message: str) -> None:
            """Answer without reading the body, then drop a little of it before closing."""
            self._send(status, {"error": message})
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_WR)
                self.connection.settimeout(1)
                left = LINGER_BYTES
                while left > 0 and (chunk := self.connection.recv(min(left, 16384))):
                    left -= len(chunk)

        def _cors_headers(self) -> dict[str, str]:
            origin = self.headers.get("Origin")
            if not origin or server.allowed_origin is None:
                return {}
            if origin.rstrip("/") not in loopback_aliases(server.allowed_origin):
                return {}
            return {
                "Access-Control-Allow-Origin": origin,
                "Access-Control-Allow-Methods": "POST, OPTIONS",
                "Access-Control-Allow-Headers": ALLOWED_HEADERS,
                "Access-Control-Allow-Credentials": "true",
                "Access-Control-Max-Age": "600",
            }

        def _send(
            self,
            status: int,
            body: dict[str, Any] | str | None,
            headers: dict[str, str] | None = None,
        ) -> None:
            if body is None:
                encoded = b""
            else:
                encoded = (body if isinstance(body, str) else json.dumps(body)).encode()
            if server.log is not None and self.command != "OPTIONS":
                server.log(f"{self.command} {self.path} → {status}")
            self.close_connection = True  # one request per connection: no idle keep-alive
            try:
                self.send_response(status)
                self.send_header("Connection", "close")
                if body is not None:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(encoded)))
                self.send_header("Vary", "Origin")
                for name, value in {**self._cors_headers(), **(headers or {})}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(encoded)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client went away: nothing to answer

    return Handler
