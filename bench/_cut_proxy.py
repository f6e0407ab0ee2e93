"""A TCP proxy in front of Postgres whose `cut()` drops every connection through it at once.

The chaos soak points its workers at it, so a cut is what a network blip or a failover
does to them: every pooled connection dies mid-use, with no word from the server (unlike
`pg_terminate_backend`, which says FATAL first). It runs on a thread of its own, with its
own event loop, so the soak's client work never delays the workers' queries.
"""

from __future__ import annotations

import asyncio
import threading
from urllib.parse import parse_qs, urlparse


class CutProxy:
    def __init__(self, database_url: str) -> None:
        url = urlparse(database_url)
        socket_dir = parse_qs(url.query).get("host", [""])[0]
        self.unix = f"{socket_dir}/.s.PGSQL.{url.port or 5432}" if socket_dir else None
        self.target = (url.hostname or "127.0.0.1", url.port or 5432)
        self.user = url.username or "postgres"
        self.database = url.path.lstrip("/") or "postgres"
        self.port = 0
        self.cuts = 0
        self.connections = 0
        self._open: set[asyncio.StreamWriter] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()

    @property
    def url(self) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{self.database}"

    def start(self) -> CutProxy:
        threading.Thread(target=self._serve_forever, name="cut-proxy", daemon=True).start()
        if not self._ready.wait(10):
            raise RuntimeError("the Postgres proxy did not start")
        return self

    def cut(self) -> int:
        """Abort every open connection (both sides); returns how many there were."""
        assert self._loop is not None
        done = threading.Event()
        count = [0]

        def abort_all() -> None:
            count[0] = len(self._open)
            for writer in list(self._open):
                writer.transport.abort()
            self._open.clear()
            done.set()

        self._loop.call_soon_threadsafe(abort_all)
        done.wait(5)
        self.cuts += 1
        return count[0] // 2  # each connection holds a writer to each side

    def _serve_forever(self) -> None:
        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]
            self._ready.set()
            async with server:
                await server.serve_forever()

        asyncio.run(serve())

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if self.unix:
                up_reader, up_writer = await asyncio.open_unix_connection(self.unix)
            else:
                up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:  # Postgres is down: refuse as it would
            writer.transport.abort()
            return
        self.connections += 1
        self._open.update((writer, up_writer))

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()

        try:
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        except (ConnectionError, OSError, asyncio.CancelledError):
            pass
        finally:
            for w in (writer, up_writer):
                self._open.discard(w)
                w.transport.abort()
