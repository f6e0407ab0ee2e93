"""A TCP proxy in front of a server that can stop letting anyone through, as a load balancer
does while the server behind it restarts: connections are still accepted, then closed at
once, and the ones open are cut.

A client meets something else here than a server that is simply gone: its connection is
made, then dropped (gRPC says UNKNOWN "transport error", not UNAVAILABLE "tcp connect
error"). The chaos soak (bench/chaos.py) met it as a Temporal dev server restarted.
"""

from __future__ import annotations

import asyncio


class TcpGate:
    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.target = (host, port)
        self.open = True
        self.refused = 0
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None

    @property
    def address(self) -> str:
        assert self._server is not None
        return f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def start(self) -> TcpGate:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def stop(self) -> None:
        self.shut()
        if self._server is not None:
            self._server.close()

    def shut(self) -> None:
        """Cut every connection through it, and drop every new one until `reopen()`."""
        self.open = False
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    def reopen(self) -> None:
        self.open = True

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.open:
            self.refused += 1
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                sink.transport.abort()

        try:
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        finally:
            self._writers.difference_update((writer, up_writer))
