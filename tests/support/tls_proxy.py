"""A TLS-terminating proxy in front of the plaintext dev server, as a real cluster's ingress is.

    with TlsProxy(dev_server_address, make_pki(tmp_path)) as proxy:
        ...connect to proxy.address with TLS...
        proxy.requests          # the HTTP/2 request headers clients sent, decoded (HPACK)
        proxy.handshake_errors  # why refused handshakes failed (no client cert, unknown CA…)

The proxy requires a client certificate signed by the test CA (mTLS), offers ALPN `h2` only,
and forwards the decrypted bytes unchanged to the upstream. On the way it parses the client's
HTTP/2 frames and decodes HEADERS blocks with `hpack`, so a test can see the gRPC metadata
(`authorization: Bearer …`) exactly as the SDK put it on the wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import struct
import threading

from cryptography import x509
from hpack import Decoder

from tests.support.pki import Pki

_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_HEADERS, _CONTINUATION = 0x1, 0x9
_END_HEADERS, _PADDED, _PRIORITY = 0x4, 0x8, 0x20


class Http2HeaderReader:
    """Decodes the request headers of a client-to-server HTTP/2 byte stream, fed in chunks."""

    def __init__(self) -> None:
        self.buffer = b""
        self.preface_seen = False
        self.decoder = Decoder()
        # The client's encoder may grow its table as far as the server's SETTINGS allow.
        self.decoder.max_allowed_table_size = 1 << 20
        self.decoder.max_header_list_size = 1 << 24
        self.pending: tuple[int, bytes] | None = None  # stream, header block awaiting CONTINUATION

    def feed(self, data: bytes) -> list[dict[str, str]]:
        """Returns the header sets completed by this chunk, one per request."""
        self.buffer += data
        if not self.preface_seen:
            if len(self.buffer) < len(_PREFACE):
                return []
            if not self.buffer.startswith(_PREFACE):
                raise ValueError("not an HTTP/2 client connection")
            self.buffer = self.buffer[len(_PREFACE) :]
            self.preface_seen = True
        requests = []
        while len(self.buffer) >= 9:
            length = int.from_bytes(self.buffer[:3], "big")
            if len(self.buffer) < 9 + length:
                break
            kind, flags = self.buffer[3], self.buffer[4]
            (stream,) = struct.unpack(">I", self.buffer[5:9])
            payload = self.buffer[9 : 9 + length]
            self.buffer = self.buffer[9 + length :]
            block = self._header_block(kind, flags, stream & 0x7FFFFFFF, payload)
            if block is not None:
                headers = self.decoder.decode(block, raw=False)
                requests.append({str(name): str(value) for name, value in headers})
        return requests

    def _header_block(self, kind: int, flags: int, stream: int, payload: bytes) -> bytes | None:
        if kind == _HEADERS:
            if flags & _PADDED:
                pad = payload[0]
                payload = payload[1 : len(payload) - pad]
            if flags & _PRIORITY:
                payload = payload[5:]
            self.pending = (stream, payload)
        elif kind == _CONTINUATION and self.pending is not None:
            self.pending = (stream, self.pending[1] + payload)
        else:
            return None
        if flags & _END_HEADERS:
            block, self.pending = self.pending[1], None
            return block
        return None


class TlsProxy:
    """mTLS (+ ALPN h2) in front of a plaintext gRPC server, in a thread of its own."""

    def __init__(self, upstream: str, pki: Pki) -> None:
        host, _, port = upstream.rpartition(":")
        self.upstream = (host, int(port))
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca_cert))
        self.context.load_cert_chain(str(pki.server_cert), str(pki.server_key))
        self.context.verify_mode = ssl.CERT_REQUIRED
        self.context.set_alpn_protocols(["h2"])
        self.requests: list[dict[str, str]] = []
        self.handshake_errors: list[str] = []
        self.decode_errors: list[str] = []
        self.connections = 0
        self.client_serials: list[int] = []
        """Each accepted connection's client certificate serial number, in order."""
        self.refused_serials: set[int] = set()
        """Client certificates turned away after the handshake (revoked, expired)."""
        self._open: set[asyncio.StreamWriter] = set()
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.port = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def headers_with(self, name: str) -> list[str]:
        """Every value the clients sent for header `name` (lower-case), in order."""
        with self._lock:
            return [r[name] for r in self.requests if name in r]

    def refuse(self, serial: int) -> None:
        """Turn the client certificate `serial` away from now on, and close every connection
        open now (as a server that restarts, or an expired certificate's next handshake)."""

        async def close_all() -> None:
            for writer in list(self._open):
                writer.close()

        with self._lock:
            self.refused_serials.add(serial)
        asyncio.run_coroutine_threadsafe(close_all(), self._loop).result(timeout=10)

    def start(self) -> TlsProxy:
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(self._serve(), self._loop)
        self.port = started.result(timeout=10)
        return self

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def __enter__(self) -> TlsProxy:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: object
    ) -> None:
        self.stop()

    async def _serve(self) -> int:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await writer.start_tls(self.context)
        except (ssl.SSLError, OSError, ConnectionError) as err:
            with self._lock:
                self.handshake_errors.append(f"{type(err).__name__}: {err}")
            writer.close()
            return
        serial = _peer_serial(writer)
        with self._lock:
            refused = serial in self.refused_serials
            if refused:
                self.handshake_errors.append(f"client certificate {serial} refused")
            else:
                self.connections += 1
                self.client_serials.append(serial)
        if refused:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        self._open.add(writer)
        headers: Http2HeaderReader | None = Http2HeaderReader()

        def record(chunk: bytes) -> None:
            nonlocal headers
            if headers is None:
                return
            try:
                seen = headers.feed(chunk)
            except Exception as err:  # never break the connection over what we only watch
                with self._lock:
                    self.decode_errors.append(repr(err))
                headers = None
                return
            if seen:
                with self._lock:
                    self.requests.extend(seen)

        try:
            await asyncio.gather(
                _pipe(reader, up_writer, record), _pipe(up_reader, writer), return_exceptions=True
            )
        finally:
            self._open.discard(writer)
            up_writer.close()


def _peer_serial(writer: asyncio.StreamWriter) -> int:
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    return x509.load_der_x509_certificate(der).serial_number if der else 0


async def _pipe(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    observe: object = None,
) -> None:
    try:
        while data := await reader.read(65536):
            if callable(observe):
                observe(data)
            writer.write(data)
            await writer.drain()
    finally:
        with contextlib.suppress(Exception):
            writer.close()
