"""An OpenAI-compatible chat-completions server that answers from scripts, offline.

Tests and the offline demo talk to it over real HTTP, so the openai client, its error
handling and Temporal's retries all run exactly as they would against a real endpoint.

    with ScriptedLLM() as llm:
        llm.script("m1", [Reply(tool_calls=[call("calculator", expression="2+2")]),
                          HttpError(429, headers={"retry-after": "1"}),
                          Reply(content="FINAL ANSWER: 4")])
        # point OPENAI_BASE_URL at llm.base_url and use model "m1"

A model name with no script gets the demo responder: a small rule-based agent that does
arithmetic with the calculator and finishes with final-answer, enough to show a real loop.

A request with `"stream": true` is answered as OpenAI streams: Server-Sent Events, one
`chat.completion.chunk` per `data:` line (`delta.content` pieces, `delta.tool_calls`
fragments), a final chunk with `usage` when `stream_options.include_usage` asks for it, then
`data: [DONE]`. A Reply says how many chunks (`chunks`), the pause between them
(`chunk_delay`), and can drop the connection part-way (`drop_after_chunks`).

A model can also be given an `Endpoint`: how its (imagined) provider treats requests before
the script answers — a reasoning model's 400s for `max_tokens` and sampling parameters, a
parameter an unknown model rejects, a context window — with the providers' exact error bodies:

    llm.endpoint("o4-mini", Endpoint.reasoning_model(reasoning_tokens=64))
    llm.endpoint("small", Endpoint(context_tokens=8192))
    llm.endpoint("ollama-default", Endpoint(truncates_to=4096))  # cuts, says nothing

`GET /v1/models` lists the scripted models, as OpenAI lists a key's models. With
`required_key`, every request without `Authorization: Bearer <that key>` is answered 401 with
OpenAI's error body (`invalid_api_key`), which never repeats the key sent.
"""

from __future__ import annotations

import json
import select
import socket
import ssl
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from reactive_temporal.embedded.endpoint_rules import Endpoint, estimate_request_tokens
from reactive_temporal.embedded.offline_model import demo_responder
from reactive_temporal.embedded.openai_wire import completion_body, split_text, stream_chunks
from reactive_temporal.embedded.scripted_replies import (
    Drop,
    HttpError,
    Raw,
    Reply,
    Responder,
    Script,
    ScriptedCall,
    Step,
    call,
)

__all__ = [
    "Drop",
    "Endpoint",
    "HttpError",
    "Raw",
    "Reply",
    "ScriptedCall",
    "ScriptedLLM",
    "Step",
    "call",
    "completion_body",
    "demo_responder",
    "estimate_request_tokens",
    "split_text",
    "stream_chunks",
]
"""What tests, benches and the demo import from here; the replies, the wire format and the
offline model live in `scripted_replies`, `openai_wire` and `offline_model`."""

STOP_POLL_SECONDS = 0.05
"""How often the serving loop looks whether `stop()` was called (socketserver's default:
0.5 s, which every stop waited out)."""


class ScriptedLLM:
    """The server. Thread-based, so it serves while the test's event loop runs."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        default: Responder | None = None,
        *,
        tls: ssl.SSLContext | None = None,
        required_key: str | None = None,
    ) -> None:
        self.required_key = required_key
        """The only API key accepted, when set (a provider's 401 for any other)."""
        self.scripts: dict[str, Responder] = {}
        self.endpoints: dict[str, Endpoint] = {}
        self.requests: dict[str, list[dict[str, Any]]] = defaultdict(list)
        """Every request per model, rejected ones included."""
        self.request_headers: dict[str, list[dict[str, str]]] = defaultdict(list)
        """The HTTP headers of each of `requests`, names in lower case."""
        self.rejected: dict[str, list[Any]] = defaultdict(list)
        """The error bodies an `Endpoint` answered with, per model, in order."""
        self.abandoned: dict[str, int] = defaultdict(int)
        """Per model, the delayed replies whose client hung up before the delay was over
        (a cancelled call that really stopped waiting)."""
        self.default = default or demo_responder
        self._server = ThreadingHTTPServer((host, port), _handler_for(self))
        self._server.daemon_threads = True
        self.tls = tls
        """Served over HTTPS with this context (a test's own CA), when given."""
        if tls is not None:  # each connection's handshake is made by its handler's thread
            self._server.socket = tls.wrap_socket(
                self._server.socket, server_side=True, do_handshake_on_connect=False
            )
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        port = self._server.server_address[1]
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{port}/v1"

    def script(
        self, model: str, steps: Iterable[Step] | Responder, *, repeat_last: bool = False
    ) -> str:
        """Answer requests for `model` from these steps (or this function); returns `model`."""
        self.scripts[model] = steps if callable(steps) else Script(steps, repeat_last=repeat_last)
        return model

    def endpoint(self, model: str, endpoint: Endpoint) -> str:
        """Treat requests for `model` as this endpoint does (checked before the script)."""
        self.endpoints[model] = endpoint
        return model

    def respond(self, request: dict[str, Any], headers: Mapping[str, str] | None = None) -> Step:
        model = str(request.get("model", ""))
        self.requests[model].append(request)
        self.request_headers[model].append({k.lower(): v for k, v in (headers or {}).items()})
        endpoint = self.endpoints.get(model)
        if endpoint is not None:
            refusal = endpoint.check(request)
            if refusal is not None:
                self.rejected[model].append(refusal.body or {})
                return refusal
            request = endpoint.kept(request)  # a server that cuts long prompts: what is left
        step = self.scripts.get(model, self.default)(request)
        if endpoint is not None and isinstance(step, Reply):
            step = endpoint.shape(step, request)
        return step

    def start(self) -> ScriptedLLM:
        # `stop()` waits for the serving loop to look at its flag: every 0.5 s by default,
        # a quarter of a second of every `starter.py run` on the offline model
        serve = partial(self._server.serve_forever, poll_interval=STOP_POLL_SECONDS)
        self._thread = threading.Thread(target=serve, name="scripted-llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> ScriptedLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _handler_for(llm: ScriptedLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms stall

        def log_message(
            self, format: str, *args: Any
        ) -> None:  # quiet: tests read their own output
            pass

        def do_GET(self) -> None:
            """`/models`: the models a key may use (a free request, `starter.py check`'s)."""
            if self._refused():
                return
            if not self.path.rstrip("/").endswith("/models"):
                self._send(
                    404, {"error": {"message": f"no route {self.path}", "type": "not_found"}}
                )
                return
            models = [
                {"id": model, "object": "model", "created": 0, "owned_by": "scripted"}
                for model in sorted(llm.scripts)
            ]
            self._send(200, {"object": "list", "data": models})

        def _refused(self) -> bool:
            """Answer 401 as OpenAI does when `required_key` is set and not the one sent."""
            if llm.required_key is None:
                return False
            if self.headers.get("authorization", "") == f"Bearer {llm.required_key}":
                return False
            length = int(self.headers.get("content-length") or 0)
            if length:
                self.rfile.read(length)  # the connection is kept: the body is read past
            body = {
                "error": {
                    "message": "Incorrect API key provided. You can find your API key at "
                    "https://platform.openai.com/account/api-keys.",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "invalid_api_key",
                }
            }
            self._send(401, body)
            return True

        def do_POST(self) -> None:
            if self._refused():
                return
            length = int(self.headers.get("content-length") or 0)
            try:
                request = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                self._send(
                    400,
                    {
                        "error": {
                            "message": "request body is not JSON",
                            "type": "invalid_request_error",
                        }
                    },
                )
                return
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(
                    404, {"error": {"message": f"no route {self.path}", "type": "not_found"}}
                )
                return
            step = llm.respond(request, dict(self.headers.items()))
            if isinstance(step, Drop):
                self.close_connection = True
                self.connection.shutdown(2)
                return
            if isinstance(step, Raw):
                self._raw(step)
                return
            if isinstance(step, HttpError):
                body = step.body or {
                    "error": {"message": step.message, "type": "scripted", "code": step.status}
                }
                self._send(step.status, body, step.headers)
                return
            if step.delay and not self._still_connected_after(step.delay):
                llm.abandoned[str(request.get("model", ""))] += 1
                self.close_connection = True
                return
            if request.get("stream") is True:
                self._stream(stream_chunks(str(request.get("model", "")), step, request), step)
                return
            self._send(200, completion_body(str(request.get("model", "")), step, request))

        def _still_connected_after(self, seconds: float) -> bool:
            """Wait `seconds`; False as soon as the client closes the connection."""
            deadline = time.monotonic() + seconds
            while (left := deadline - time.monotonic()) > 0:
                readable, _, _ = select.select([self.connection], [], [], min(left, 0.1))
                if not readable:
                    continue
                try:
                    if not self.connection.recv(1, socket.MSG_PEEK):
                        return False  # end of stream: the client hung up
                except OSError:
                    return False
                time.sleep(min(left, 0.1))  # bytes of a next request: not a hang-up
            return True

        def _stream(self, chunks: list[dict[str, Any]], reply: Reply) -> None:
            """Server-Sent Events over chunked transfer encoding, as OpenAI streams."""
            try:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream; charset=utf-8")
                self.send_header("cache-control", "no-cache")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                # Chunk 0 is the role chunk; 1… the content and tool pieces (which
                # drop_after_chunks counts), then the finish and usage chunks.
                for number, body in enumerate(chunks):
                    if reply.drop_after_chunks is not None and number > reply.drop_after_chunks:
                        self.close_connection = True
                        self.connection.shutdown(2)
                        return
                    if number > 1 and reply.chunk_delay:
                        time.sleep(reply.chunk_delay)
                    self._write_chunk(f"data: {json.dumps(body)}\n\n".encode())
                self._write_chunk(b"data: [DONE]\n\n")
                self._write_chunk(b"")
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (cancelled or timed out) mid-stream

        def _raw(self, raw: Raw) -> None:
            try:
                self.send_response(raw.status)
                self.send_header("content-type", raw.content_type)
                self.send_header("transfer-encoding", "chunked")
                for name, value in raw.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                for number, part in enumerate(raw.parts):
                    if number and raw.part_delay:
                        time.sleep(raw.part_delay)
                    self._write_chunk(part)
                self._write_chunk(b"")
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up

        def _write_chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _send(self, status: int, body: object, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test): nothing to answer

    return Handler
