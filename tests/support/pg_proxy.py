"""A TCP proxy in front of Postgres that counts round trips.

A round trip is the client sending after it has heard from the server: a burst of client
bytes that follows server bytes (or opens the connection). Several statements pipelined, or
joined in one query string, go out as one burst and count once; statements that each wait
for their answer count one each. No timing is involved, so a loaded machine does not change
the count.
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

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.unix:
            up_reader, up_writer = await asyncio.open_unix_connection(self.unix)
        else:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        heard = [True]  # the server spoke last (or nobody yet): the client's next bytes count

        async def upstream() -> None:
            while data := await reader.read(65536):
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
            writer.close()
            up_writer.close()
