"""The stdio transport of MCP servers, with a cap on one message and a shutdown that stops
reading first.

The SDK's `stdio_client` reads a server's stdout with no cap on a line, and joins the pending
line again with every chunk it reads (quadratic): a server that wrote one endless line after a
`tools/call` grew the worker by 58 MB a minute, long after the call had timed out, in the
worker that runs every other agent's tools too. The SDK takes no wrapped stream (its
`stdio_client` starts the process and reads the pipe itself), so this module owns the process
and speaks the same wire protocol (JSON-RPC messages, one per line, UTF-8), with:

- a cap on one message (`max_message_bytes`): a longer line ends the connection, with
  `on_end` saying why, so the calls waiting on it fail at once rather than at their timeouts,
  and no server can make the worker hold more than one capped line;
- line splitting in linear time;
- a shutdown that stops reading before anything else (the server's further writes fail), then
  follows the MCP lifecycle, as the SDK does: close the server's stdin, wait, SIGTERM its
  process group, wait, SIGKILL it.

POSIX only, like the rest of the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

import anyio
import mcp_types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

READ_CHUNK_BYTES = 64 * 1024
EXIT_GRACE_SECONDS = 2.0
"""After its stdin closes, how long a server has to exit on its own (the SDK's 2 s)."""
TERM_GRACE_SECONDS = 2.0
"""After SIGTERM, how long before SIGKILL."""
REAP_SECONDS = 2.0
_POLL_SECONDS = 0.01

Streams = tuple[
    MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]
]
"""What a ClientSession reads from and writes to."""
OnEnd = Callable[[str], None]
"""Called, once or more, with why the connection ended (the first call is the one that counts)."""


class MessageTooLong(ValueError):
    """A server's line went past the cap before its newline."""


class LineSplitter:
    """Bytes in, complete lines out; each byte is copied a bounded number of times.

    A line longer than `max_bytes` (without its newline) raises MessageTooLong as soon as the
    bytes seen exceed the cap, not when the line ends, which it may never do."""

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be positive, not {max_bytes}")
        self.max_bytes = max_bytes
        self._partial = bytearray()

    @property
    def pending(self) -> int:
        """Bytes of a line not yet ended."""
        return len(self._partial)

    def feed(self, chunk: bytes) -> list[bytes]:
        lines: list[bytes] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._check(end - start)
            if self._partial:
                self._partial += chunk[start:end]
                lines.append(bytes(self._partial))
                self._partial.clear()
            else:
                lines.append(chunk[start:end])
            start = end + 1
        self._check(len(chunk) - start)
        self._partial += chunk[start:]
        return lines

    def _check(self, more: int) -> None:
        if len(self._partial) + more > self.max_bytes:
            raise MessageTooLong(f"a line longer than {self.max_bytes} bytes")


def parse_message(line: bytes) -> SessionMessage | Exception:
    """One JSON-RPC message, or the error as a value: the session reports it and reads on."""
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as err:
        return err


@asynccontextmanager
async def stdio_transport(
    command: Sequence[str],
    env: dict[str, str],
    on_end: OnEnd,
    lines: LineSplitter,
) -> AsyncIterator[Streams]:
    """Start `command` (with the SDK's default variables under `env`) and yield the session's
    streams; on exit, stop reading and stop the server (`stop_server`).

    `on_end` hears why the connection ended by itself: the server closed its output, sent a
    message over the cap of `lines` (the caller's, so it can ask whether a message is half
    read), or stopped reading its input."""
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.subprocess_exec(
        lambda: asyncio.subprocess.SubprocessStreamProtocol(limit=READ_CHUNK_BYTES, loop=loop),
        *command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=None,  # the worker's own stderr, as with the SDK
        env=get_default_environment() | env,
        start_new_session=True,  # its own process group, so stopping it stops its children
    )
    process = asyncio.subprocess.Process(transport, protocol, loop)
    assert process.stdin is not None and process.stdout is not None
    incoming, session_reads = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    session_writes, outgoing = anyio.create_memory_object_stream[SessionMessage](0)
    reader = asyncio.create_task(_read(process.stdout, incoming, lines, on_end))
    writer = asyncio.create_task(_write(process.stdin, outgoing, incoming, on_end))
    try:
        yield session_reads, session_writes
    finally:
        # Every wait in it is bounded; it finishes even if this task is cancelled meanwhile.
        stopping = asyncio.create_task(stop_server(process, transport, reader, writer))
        try:
            await asyncio.shield(stopping)
        except asyncio.CancelledError:
            await asyncio.wait({stopping})
            raise
        finally:
            for stream in (incoming, session_reads, session_writes, outgoing):
                stream.close()


async def _read(
    stdout: asyncio.StreamReader,
    incoming: MemoryObjectSendStream[SessionMessage | Exception],
    lines: LineSplitter,
    on_end: OnEnd,
) -> None:
    why = "closed its output (it exited?)"
    try:
        while chunk := await stdout.read(READ_CHUNK_BYTES):
            for line in lines.feed(chunk):
                if line.strip():
                    await incoming.send(parse_message(line))
    except MessageTooLong:
        why = f"sent a message longer than {lines.max_bytes} bytes"
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        why = "was closed"  # the session's end of the stream went first
    on_end(why)  # before the session sees the end, so its waiting calls can say why
    incoming.close()


async def _write(
    stdin: asyncio.StreamWriter,
    outgoing: MemoryObjectReceiveStream[SessionMessage],
    incoming: MemoryObjectSendStream[SessionMessage | Exception],
    on_end: OnEnd,
) -> None:
    try:
        async for message in outgoing:
            text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
            stdin.write(text.encode() + b"\n")
            await stdin.drain()
    except (ConnectionError, OSError) as err:
        on_end(f"stopped reading its input ({type(err).__name__})")
        incoming.close()  # the session sees the end rather than waiting for replies


async def stop_server(
    process: asyncio.subprocess.Process,
    transport: asyncio.SubprocessTransport,
    reader: asyncio.Task[None],
    writer: asyncio.Task[None],
) -> None:
    """Stop reading at once (the server's further writes fail), close its stdin, give it
    EXIT_GRACE_SECONDS to leave, then SIGTERM and SIGKILL its process group; close the pipes."""
    reader.cancel()
    writer.cancel()
    stdout = transport.get_pipe_transport(1)
    if stdout is not None:
        stdout.close()  # nothing more is read: what it writes now goes nowhere
    await asyncio.wait({reader, writer})
    stdin = transport.get_pipe_transport(0)
    if stdin is not None:
        stdin.close()  # the MCP lifecycle's "please exit"
    if not await _exited(process, EXIT_GRACE_SECONDS):
        _signal_group(process.pid, signal.SIGTERM)
        if not await _exited(process, TERM_GRACE_SECONDS):
            _signal_group(process.pid, signal.SIGKILL)
            await _exited(process, REAP_SECONDS)
    transport.close()


async def _exited(process: asyncio.subprocess.Process, seconds: float) -> bool:
    """Polls `returncode`: `process.wait()` also waits for the pipes to close, which a child
    that inherited them can hold open after the server itself has exited."""
    deadline = asyncio.get_running_loop().time() + seconds
    while process.returncode is None:
        if asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(_POLL_SECONDS)
    return True


def _signal_group(pgid: int, signum: int) -> None:
    """The server leads its own group (start_new_session), so its pid is the group's id."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)
