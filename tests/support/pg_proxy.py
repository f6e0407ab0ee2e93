"""A TCP proxy in front of Postgres that counts round trips, and can cut Postgres off.

A round trip is the client sending after it has heard from the server: a burst of client
bytes that follows server bytes (or opens the connection). Several statements pipelined, or
joined in one query string, go out as one burst and count once; statements that each wait
for their answer count one each. No timing is involved, so a loaded machine does not change
the count.

`cut_off_at(marker)` cuts Postgres off from the moment a client sends `marker` (a value only
one statement carries): that statement never reaches it, every connection is closed, and new
ones are refused until `restore()`. A write at the worst moment, without timing.
"""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs, urlparse


class CountingProxy:
    def __init__(self, database_url: str) -> None:
        url = urlparse(database_url)
        socket_dir = parse_qs(url.query).get("host", [""])[0]
        self.unix = f"{socket_dir}/.s.PGSQL.{url.port or 5432}" if socket_dir else None
        self.target = (url.hostname or "127.0.0.1", url.port or 5432)
        self.user = url.username or "postgres"
        self.database = url.path.lstrip("/") or "postgres"
        self.round_trips = 0
        self.server: asyncio.Server | None = None
        self.marker: bytes | None = None
        self.is_cut = False
        self._open: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()

    @property
    def url(self) -> str:
        assert self.server is not None
        port = self.server.sockets[0].getsockname()[1]
        return f"postgresql://{self.user}@127.0.0.1:{port}/{self.database}"

    async def start(self) -> CountingProxy:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()

    def cut_off_at(self, marker: bytes) -> None:
        """Cut Postgres off when a client sends `marker` (until `restore()`)."""
        self.marker = marker

    def restore(self) -> None:
        self.marker = None
        self.is_cut = False

    def _cut(self) -> None:
        self.is_cut = True
        for client, server in list(self._open):
            client.close()
            server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.is_cut:
            writer.close()  # refused: as a Postgres that is down
            return
        if self.unix:
            up_reader, up_writer = await asyncio.open_unix_connection(self.unix)
        else:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        self._open.add((writer, up_writer))
        heard = [True]  # the server spoke last (or nobody yet): the client's next bytes count

        async def upstream() -> None:
            while data := await reader.read(65536):
                if self.marker is not None and self.marker in data:
                    self._cut()
                    return
                if heard[0]:
                    self.round_trips += 1
                    heard[0] = False
                up_writer.write(data)
                await up_writer.drain()

        async def downstream() -> None:
            while data := await up_reader.read(65536):
                heard[0] = True
                writer.write(data)
                await writer.drain()

        try:
            await asyncio.gather(upstream(), downstream())
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._open.discard((writer, up_writer))
            writer.close()
            up_writer.close()
