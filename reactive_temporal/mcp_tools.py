"""MCP tools: every tool of an MCP server, callable by the agent as `server/tool`.

    python worker.py --mcp "fs=npx -y @modelcontextprotocol/server-filesystem /tmp" \\
                     --mcp docs=https://example.com/mcp

A spec is `NAME=URL` (an http or https URL: streamable HTTP) or `NAME=COMMAND ARGS…` (a
subprocess speaking stdio, split like a shell would). `McpToolbox` connects to each server
once, lists its tools and turns each into a `Tool` whose schema is the server's own
`inputSchema`, so the model sees exactly what the server documents and the server does the
validating. A call is an ordinary `run_tool` activity; an `isError` result raises, so the
model reads it as `[Tool error: …]` like any failing tool.

A stdio server is a program someone else wrote: it starts with a minimal environment (PATH,
HOME, LANG and the SDK's harmless defaults: LOGNAME, SHELL, TERM, USER) plus only the variables
the operator names with `--mcp-env NAME` (repeatable), never the worker's own secrets
(`OPENAI_API_KEY`, `DATABASE_URL`, encryption keys, the codec token, Temporal credentials).

    python worker.py --mcp "gh=npx -y @modelcontextprotocol/server-github" --mcp-env GITHUB_TOKEN

The sessions live as long as the toolbox: the worker opens it before it starts and closes it
after it stops, in the same task (the SDK's transports are anyio task groups, which must be
exited by the task that entered them).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
from collections.abc import Sequence
from contextlib import AsyncExitStack
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from reactive_temporal.tools import Tool, ToolFunction

if TYPE_CHECKING:
    # The MCP SDK is imported where a server is connected or a result read, not here: every
    # worker opens a toolbox, most with no server, and the SDK is ~0.4 s of CPU to import
    # (a tenth of `starter.py run` on the embedded stack).
    import mcp_types
    from mcp import ClientSession

SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
BASE_ENV = ("PATH", "HOME", "LANG")
"""What every stdio server gets from the worker's environment, besides `--mcp-env` names."""
_URL_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
TOOL_SEPARATOR = "/"


class McpServerSpec(BaseModel):
    """One `--mcp` server: where it is and how to reach it."""

    model_config = ConfigDict(frozen=True)

    name: str
    transport: Literal["stdio", "http"]
    url: str | None = None
    command: list[str] | None = None
    spec: str
    """The text it was parsed from, for error messages."""


class McpConnectionError(RuntimeError):
    """A server could not be started, reached, initialized or listed."""


class McpToolError(RuntimeError):
    """The server ran the tool and reported an error (`isError`); the text is the server's."""


def parse_mcp_spec(spec: str) -> McpServerSpec:
    """`NAME=URL` or `NAME=COMMAND ARGS…`, or a ValueError naming the spec and the problem."""

    def bad(problem: str) -> ValueError:
        return ValueError(
            f"invalid MCP server spec {spec!r}: {problem} "
            "(expected NAME=URL or NAME=COMMAND [ARGS...])"
        )

    name, sep, target = spec.partition("=")
    name, target = name.strip(), target.strip()
    if not sep:
        raise bad("no '='")
    if not SERVER_NAME.fullmatch(name):
        raise bad(f"server name {name!r} must be letters, digits, '_' or '-'")
    if not target:
        raise bad("nothing after '='")
    if scheme := _URL_SCHEME.match(target):
        if scheme.group(1).lower() not in ("http", "https"):
            raise bad(f"only http and https URLs are supported, not {scheme.group(1)!r}")
        parts = urlsplit(target)
        if not parts.hostname or any(c.isspace() for c in target):
            raise bad(f"{target!r} is not a valid URL")
        return McpServerSpec(name=name, transport="http", url=target, spec=spec)
    try:
        command = shlex.split(target)
    except ValueError as err:
        raise bad(f"cannot split the command ({err})") from err
    if not command:
        raise bad("empty command")
    return McpServerSpec(name=name, transport="stdio", command=command, spec=spec)


def parse_mcp_specs(specs: Sequence[str | McpServerSpec]) -> list[McpServerSpec]:
    """Every spec parsed; two servers with one name would give two tools one name."""
    parsed = [s if isinstance(s, McpServerSpec) else parse_mcp_spec(s) for s in specs]
    seen: set[str] = set()
    for server in parsed:
        if server.name in seen:
            raise ValueError(f"two MCP servers are named {server.name!r}; names must be unique")
        seen.add(server.name)
    return parsed


def render_call_result(result: mcp_types.CallToolResult) -> str:
    """What the model reads: the text parts joined; anything else named, not dumped.

    A result with no content but structured content is that content as JSON. An error result
    raises McpToolError with the server's text, which `run_tool` turns into an observation.
    """
    import mcp_types

    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
            parts.append(f"[{block.type} {block.mime_type}, {len(block.data)} base64 characters]")
        elif isinstance(block, mcp_types.ResourceLink):
            parts.append(f"[resource {block.name}: {block.uri}]")
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, mcp_types.TextResourceContents):
                parts.append(resource.text)
            else:
                parts.append(f"[binary resource {resource.uri} ({resource.mime_type or '?'})]")
    text = "\n".join(parts)
    if not parts and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False, default=str)
    if result.is_error:
        raise McpToolError(text or "the server reported an error without details")
    return text


def server_environment(names: Sequence[str] = ()) -> dict[str, str]:
    """The environment of a stdio server: BASE_ENV and `names`, where set; nothing else.

    A name that is not a valid variable name is a ValueError (it is a typo, not a request)."""
    for name in names:
        if not ENV_NAME.fullmatch(name):
            raise ValueError(f"--mcp-env {name!r} is not an environment variable name")
    return {n: os.environ[n] for n in (*BASE_ENV, *names) if n in os.environ}


def _leaf_errors(err: BaseException) -> list[BaseException]:
    """The real causes inside the SDK's task-group ExceptionGroups."""
    if isinstance(err, BaseExceptionGroup):
        return [leaf for sub in err.exceptions for leaf in _leaf_errors(sub)]
    return [err]


def _describe(err: BaseException) -> str:
    return "; ".join(f"{type(e).__name__}: {e}" for e in _leaf_errors(err))


class McpToolbox:
    """An async context manager holding one open session per MCP server, and their tools.

        async with McpToolbox(["echo=python echo_server.py"]) as toolbox:
            worker = await create_worker(..., extra_tools=toolbox.tools)

    Stdio servers get `server_environment(env)`: a minimal environment plus the variables
    named in `env`, so the worker's secrets never reach a server's process.
    """

    def __init__(
        self,
        specs: Sequence[str | McpServerSpec],
        *,
        connect_timeout_seconds: float = 60.0,
        tool_timeout_seconds: float = 60.0,
        separator: str = TOOL_SEPARATOR,
        env: Sequence[str] = (),
    ) -> None:
        self.servers = parse_mcp_specs(specs)  # bad specs fail here, before anything starts
        self.env_names = list(env)
        server_environment(self.env_names)  # and bad --mcp-env names
        self.connect_timeout_seconds = connect_timeout_seconds
        self.tool_timeout_seconds = tool_timeout_seconds
        self.separator = separator
        self.tools: list[Tool] = []
        self.tools_by_server: dict[str, list[str]] = {}
        self._stack = AsyncExitStack()

    async def __aenter__(self) -> McpToolbox:
        try:
            for server in self.servers:
                await self._connect(server)
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._stack.aclose()

    async def _connect(self, server: McpServerSpec) -> None:
        from mcp import ClientSession, StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client

        try:
            async with AsyncExitStack() as attempt:
                if server.transport == "http":
                    assert server.url is not None
                    transport = streamable_http_client(server.url)
                else:
                    assert server.command is not None
                    transport = stdio_client(
                        StdioServerParameters(
                            command=server.command[0],
                            args=server.command[1:],
                            env=server_environment(self.env_names),
                        )
                    )
                read, write = await attempt.enter_async_context(transport)
                session = await attempt.enter_async_context(
                    ClientSession(read, write, read_timeout_seconds=self.connect_timeout_seconds)
                )
                # the whole handshake within the connect timeout, not each request in it: a
                # server paging its tools forever held the worker's start-up for good
                async with asyncio.timeout(self.connect_timeout_seconds):
                    await session.initialize()
                    listed = await _list_all_tools(session)
                # Connected: hand the open transport and session to the toolbox's own stack.
                self._stack.push_async_exit(attempt.pop_all())
        except Exception as err:
            raise McpConnectionError(
                f"MCP server {server.spec!r}: cannot connect ({_describe(err)})"
            ) from err
        tools = [self._tool(server, session, t) for t in listed]
        self.tools.extend(tools)
        self.tools_by_server[server.name] = [t.name for t in tools]

    def _tool(self, server: McpServerSpec, session: ClientSession, spec: mcp_types.Tool) -> Tool:
        fallback = f"The {spec.name} tool of MCP server {server.name}."
        return Tool(
            name=f"{server.name}{self.separator}{spec.name}",
            description=spec.description or spec.title or fallback,
            function=_caller(session, spec.name, self.tool_timeout_seconds),
            timeout_seconds=self.tool_timeout_seconds,
            json_schema=dict(spec.input_schema),
        )


MAX_TOOL_PAGES = 100
"""Pages of `tools/list` read from one server; a server with more, or one that names a page
it sent already, is refused (it would be read forever)."""


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


def _caller(session: ClientSession, tool_name: str, timeout_seconds: float) -> ToolFunction:
    async def call(**arguments: Any) -> str:
        # The MCP read timeout is a backstop a little past run_tool's own, which normally fires.
        result = await session.call_tool(
            tool_name, arguments, read_timeout_seconds=timeout_seconds + 5
        )
        return render_call_result(result)

    return call
