"""A codec server: lets the Temporal Web UI and the `temporal` CLI show encrypted payloads.

It implements Temporal's remote codec protocol: `POST …/encode` and `POST …/decode` take a
`Payloads` message as protobuf JSON (`{"payloads": [{"metadata": {"encoding": "<base64>"},
"data": "<base64>"}]}`) and answer the same shape. Only the last path segment counts, so
`http://host:8081/default/decode` works too.

Whoever can reach it can read every history, so:

- every POST must carry `Authorization: Bearer <token>` (401 otherwise);
- CORS is answered for one origin only (the Web UI's), so no other web page a developer has
  open can use the browser as a way in; other origins get no CORS headers at all.

The CORS preflight (OPTIONS) is the one request without the token: browsers never send
credentials on a preflight, and it reveals nothing.

    with CodecServer(EncryptionCodec(keys), token="s3cret") as server:
        print(server.url)   # http://127.0.0.1:<port>
"""

from __future__ import annotations

import asyncio
import hmac
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads
from temporalio.converter import PayloadCodec

DEFAULT_ORIGIN = "http://localhost:8233"
ALLOWED_HEADERS = "Authorization, Content-Type, X-Namespace"
MAX_BODY_BYTES = 64 * 1024 * 1024
"""A history page of large payloads fits; anything bigger is not a codec request."""


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
    ) -> None:
        if not token:
            raise ValueError("the codec server needs a non-empty token")
        self.codec = codec
        self.token = token
        self.allowed_origin = allowed_origin.rstrip("/") if allowed_origin else None
        self.log = log
        self._server = ThreadingHTTPServer((host, port), _handler_for(self))
        self._server.daemon_threads = True
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


def _handler_for(server: CodecServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # requests are reported through server.log, without client details

        def do_OPTIONS(self) -> None:
            self._send(204, None)

        def do_POST(self) -> None:
            operation = self.path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
            if not server.authorized(self.headers.get("Authorization")):
                self._drain()
                self._send(401, {"error": "missing or wrong `Authorization: Bearer <token>`"})
                return
            if operation not in ("encode", "decode"):
                self._drain()
                self._send(404, {"error": f"no route {self.path}; POST …/encode or …/decode"})
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if length < 0 or length > MAX_BODY_BYTES:
                self.close_connection = True
                self._send(413, {"error": f"the body must be 0 to {MAX_BODY_BYTES} bytes"})
                return
            try:
                answer = server.run_codec(operation, self.rfile.read(length))
            except Exception as e:  # a bad body, an unknown key id, a tampered payload
                self._send(400, {"error": f"{operation} failed: {e}"})
                return
            self._send(200, answer)

        def do_GET(self) -> None:
            self._send(405, {"error": "POST …/encode or …/decode"}, {"Allow": "POST, OPTIONS"})

        def _drain(self) -> None:
            """Read the body we refuse, so the connection can serve the next request."""
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = 0
            if 0 < length <= MAX_BODY_BYTES:
                self.rfile.read(length)
            elif length:
                self.close_connection = True

        def _cors_headers(self) -> dict[str, str]:
            origin = self.headers.get("Origin")
            if not origin or server.allowed_origin is None:
                return {}
            if origin.rstrip("/") != server.allowed_origin:
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
            try:
                self.send_response(status)
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
