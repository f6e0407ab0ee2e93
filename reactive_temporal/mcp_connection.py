"""One MCP server's session, which any task can end and the next call opens again.

Each session lives in a task of its own (its "life"): the SDK's session and transports are
anyio task groups, which only the task that entered them may exit, and a tool call runs in an
activity's task. So the call that gives up on a reply (its timeout fired, or its run was
cancelled) cannot close the session itself; it ends the life, and the life's task closes the
session and stops the server, at once, in the background.

A session ends when a call is abandoned while its transport is in the middle of a message: a
stdio server sends every reply down one pipe, and the rest of a reply nobody waits for any more
(one that never ends, say) would be read, and held, for as long as the session lived, with
every later reply stuck behind it. Calls in flight on that session fail with an error saying
why (their replies were behind it). A call abandoned with nothing half-read leaves the session
alone: its reply, if it ever comes, is dropped like any late reply, and the other calls go on.
(The stdio transport says whether it is mid-message. A streamable-HTTP server's replies are
separate HTTP responses: `mcp_http` stops reading one at its deadline or its cap and fails only
its own request, so that session ends only when its transport fails.)

A call an HTTP server refused for its credentials (401, 403) goes again once, on a new
session, when the credentials a new session would send differ from those refused (a token
rotated in the file a `--mcp-header` reads: `credentials_renewed`); otherwise it fails saying
what the server answered. Once, not until it works: a server that refuses the new ones too is
not asked again by that call.

The next call opens a new session, lazily: a failing start is then the error of a call that
needed the server, which its model reads as a tool error, rather than a background failure
nobody reads, and a server nobody calls again is not restarted. It waits for the old server to
be gone first, so one server never runs twice.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the SDK is imported when a server is connected (see mcp_tools)
    import mcp_types
    from mcp import ClientSession, MCPError
    from mcp.client import Transport

logger = logging.getLogger(__name__)


@dataclass
class TransportHooks:
    """What a transport and the session above it tell each other."""

    end: Callable[[str], None]
    """Ends the session, saying why: for the transport to call when it ends by itself."""
    mid_message: Callable[[], bool] = lambda: False
    """Whether a message has begun and not ended; a transport that can tell replaces it."""
    refusal: Callable[[str], str | None] = lambda message: None
    """Why the transport refused a reply, if a request's error `message` says it did (a reply
    over the cap, say); a transport that refuses replies without ending replaces it."""
    credentials_refused: Callable[[str], bool] = lambda message: False
    """Whether a request's error `message` is the server refusing the credentials sent (an
    HTTP 401 or 403); a transport that sends credentials replaces it."""


TransportFactory = Callable[[TransportHooks], "Transport"]
"""Opens a server's transport, once for each session."""

CLOSED = "was closed (the worker is stopping)"
RENEWED = "was reconnected: its credentials were renewed"
MAX_TOOL_PAGES = 100
"""Pages of `tools/list` read from one server; a server with more, or one that names a page
it sent already, is refused (it would be read forever)."""


class McpConnectionError(RuntimeError):
    """A server could not be started, reached, initialized or listed, or its session ended
    under a call."""


class McpToolError(RuntimeError):
    """The server ran the tool and reported an error (`isError`); the text is the server's."""


def _leaf_errors(err: BaseException) -> list[BaseException]:
    """The real causes inside the SDK's task-group ExceptionGroups."""
    if isinstance(err, BaseExceptionGroup):
        return [leaf for sub in err.exceptions for leaf in _leaf_errors(sub)]
    return [err]


def describe(err: BaseException) -> str:
    return "; ".join(f"{type(e).__name__}: {e}" for e in _leaf_errors(err))


class _Life:
    """One session: from its start to its end, in its own task."""

    def __init__(self) -> None:
        self.settled = asyncio.Event()
        """Set once the session is usable (`session`) or failed to start (`error`)."""
        self.session: ClientSession | None = None
        self.tools: list[mcp_types.Tool] = []
        self.error: BaseException | None = None
        self.ended = asyncio.Event()
        self.why: str | None = None
        self.task: asyncio.Task[None] | None = None
        self.hooks = TransportHooks(self.end)
        self.renewed = False
        """Ended by a call its server refused, to open one with renewed credentials."""

    def end(self, why: str) -> None:
        """Ask the life's task to close the session; the first reason given is kept."""
        if self.why is None:
            self.why = why
        self.ended.set()


class McpConnection:
    """A server's current session, started again on the next call after it ended."""

    def __init__(
        self,
        name: str,
        open_transport: TransportFactory,
        *,
        connect_timeout_seconds: float,
        credentials_renewed: Callable[[], bool] | None = None,
    ) -> None:
        self.name = name
        self._open_transport = open_transport
        self.connect_timeout_seconds = connect_timeout_seconds
        self._credentials_renewed = credentials_renewed
        """Whether a new session would send other credentials than the current one (read
        again now; a ValueError when they cannot be); None when they cannot change."""
        self._life: _Life | None = None
        self._closed = False
        self._lock = asyncio.Lock()
        # A session's task starts in whichever tool call needs it; it must not carry that
        # call's context (its activity, its span) for the rest of its life.
        self._context = contextvars.copy_context()

    async def open(self) -> list[mcp_types.Tool]:
        """Start the first session and list the server's tools; the error as it happened."""
        async with self._lock:
            life = self._start()
        await life.settled.wait()
        if life.error is not None:
            if (why := life.hooks.refusal(describe(life.error))) is not None:
                raise McpConnectionError(f"it {why}") from life.error  # a 401, say
            raise life.error
        return life.tools

    async def call_tool(
        self, tool: str, arguments: dict[str, Any], read_timeout_seconds: float
    ) -> mcp_types.CallToolResult:
        """Call `tool` on the current session (opening one if the last has ended); once more
        on a new one if the server refused credentials that have been renewed since."""
        from mcp import MCPError

        for attempt in (1, 2):
            life = await self._current()
            assert life.session is not None
            try:
                return await life.session.call_tool(
                    tool, arguments, read_timeout_seconds=read_timeout_seconds
                )
            except asyncio.CancelledError:  # run_tool's timeout, or the run's cancellation
                self._abandoned(life, tool)
                raise
            except MCPError as err:
                if attempt == 1 and self._renewed(life, err):
                    continue  # refused before the server ran it: safe to send again
                said = self._said(life, tool, err)
                if said is err:
                    raise
                raise said from err
        raise AssertionError("unreachable: the second attempt returns or raises")

    def _said(self, life: _Life, tool: str, err: MCPError) -> Exception:
        """The error a call fails with: in words saying why, when the session or the
        transport knows, else the server's own."""
        from mcp_types import REQUEST_TIMEOUT

        if life.ended.is_set():  # the session ended under the call: say why, not "closed"
            return McpConnectionError(f"MCP server {self.name!r} {life.why}")
        if (why := life.hooks.refusal(err.message)) is not None:
            return McpConnectionError(f"MCP server {self.name!r} {why}")
        if err.code == REQUEST_TIMEOUT:  # the SDK's backstop
            self._abandoned(life, tool)
        return err

    def _renewed(self, life: _Life, err: MCPError) -> bool:
        """Whether a call the server refused for its credentials may go again, on a new
        session: the credentials were renewed since `life` opened (its session is then ended,
        so the next call opens one with them), or another call refused on it found they were.
        Credentials that cannot be read again fail the call, saying so."""
        if not life.hooks.credentials_refused(err.message):
            return False
        if life.renewed:
            return True
        if self._credentials_renewed is None:
            return False
        try:
            renewed = self._credentials_renewed()
        except ValueError as unreadable:
            why = life.hooks.refusal(err.message)
            raise McpConnectionError(
                f"MCP server {self.name!r} {why}, and its credentials cannot be read again: "
                f"{unreadable}"
            ) from err
        if renewed:
            life.renewed = True
            life.end(RENEWED)
        return renewed

    @staticmethod
    def _abandoned(life: _Life, tool: str) -> None:
        if life.hooks.mid_message():
            life.end(f"was restarted: a call to its tool {tool} was abandoned mid-reply")

    async def close(self) -> None:
        """End the session and wait for its server to be gone (a bounded wait); no call
        starts it again."""
        async with self._lock:
            self._closed = True
            if self._life is not None:
                self._life.end(CLOSED)
                await self._gone(self._life)

    async def _current(self) -> _Life:
        """The session calls go to: the current one, or a new one if it has ended."""
        async with self._lock:
            if self._closed:
                raise McpConnectionError(f"MCP server {self.name!r} {CLOSED}")
            life = self._life
            if life is None or life.ended.is_set():
                if life is not None:
                    await self._gone(life)
                life = self._start()
        # outside the lock: a caller cancelled here leaves the start to the next one
        await life.settled.wait()
        if life.error is not None:
            said = describe(life.error)
            why = life.hooks.refusal(said)
            raise McpConnectionError(
                f"MCP server {self.name!r}: cannot start again ({said if why is None else why})"
            ) from life.error
        return life

    def _start(self) -> _Life:
        life = self._life = _Life()
        life.task = asyncio.create_task(
            self._live(life), name=f"mcp server {self.name}", context=self._context.copy()
        )
        return life

    @staticmethod
    async def _gone(life: _Life) -> None:
        if life.task is not None:
            await asyncio.wait({life.task})  # not `await task`: a cancelled caller keeps it alive

    async def _live(self, life: _Life) -> None:
        from mcp import ClientSession

        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._open_transport(life.hooks))
                session = await stack.enter_async_context(
                    ClientSession(read, write, read_timeout_seconds=self.connect_timeout_seconds)
                )
                # the whole handshake within the connect timeout, not each request in it: a
                # server paging its tools forever held the worker's start-up for good
                async with asyncio.timeout(self.connect_timeout_seconds):
                    await session.initialize()
                    life.tools = await _list_all_tools(session)
                life.session = session
                life.settled.set()
                await life.ended.wait()
        except Exception as err:
            if life.settled.is_set():
                logger.warning("MCP server %s: its session failed: %s", self.name, describe(err))
            else:
                life.error = err
            life.end(f"failed ({describe(err)})")
        finally:
            life.end("ended")
            life.settled.set()


async def _list_all_tools(session: ClientSession) -> list[mcp_types.Tool]:
    import mcp_types

    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_TOOL_PAGES):
        params = None if cursor is None else mcp_types.PaginatedRequestParams(cursor=cursor)
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools
        if cursor in seen:
            raise ValueError(f"tools/list named page {cursor[:80]!r} again")
        seen.add(cursor)
    raise ValueError(f"tools/list has more than {MAX_TOOL_PAGES} pages")
