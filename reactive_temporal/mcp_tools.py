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

An HTTP server that asks for credentials gets them in headers, `--mcp-header
'docs=Authorization: Bearer ${DOCS_TOKEN}'`, read from the environment as the worker starts,
or `${file:PATH}`, read from a file at the start and again for each new session and after the
server refused them (`mcp_headers`): a call refused with credentials renewed since goes again
once, on a new session (`mcp_connection`). Errors show its URL without a password or query
(`McpServerSpec.shown`).

The worker opens the toolbox before it starts and closes it after it stops. In between, each
server's session lives in a task of its own (`mcp_connection`): a call to a stdio server that
is abandoned (timed out, or its run cancelled) while a reply is half read ends that server's
session, which stops reading and stops the server, and the next call starts it again. A stdio
server's messages are read by `mcp_stdio`, which caps one message at `max_message_bytes`; an
HTTP server's replies go through `mcp_http`, which caps them at the same number, stops reading
one nobody waits for any more, and refuses compressed ones.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from reactive_temporal.mcp_connection import (
    McpConnection,
    McpConnectionError,
    McpToolError,
    TransportFactory,
    TransportHooks,
    describe,
)
from reactive_temporal.mcp_headers import SessionHeaders, header_sources, shown_url
from reactive_temporal.tools import Tool, ToolFunction

if TYPE_CHECKING:
    # The MCP SDK is imported where a server is connected or a result read, not here: every
    # worker opens a toolbox, most with no server, and the SDK is ~0.4 s of CPU to import
    # (a tenth of `starter.py run` on the embedded stack).
    import mcp_types
    from mcp.client import Transport

SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
BASE_ENV = ("PATH", "HOME", "LANG")
"""What every stdio server gets from the worker's environment, besides `--mcp-env` names."""
_URL_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
TOOL_SEPARATOR = "/"
MAX_MESSAGE_BYTES = 32 * 1024 * 1024
"""The longest message a server may send (a stdio server's line; an HTTP server's JSON reply
body, or one event of its SSE stream): far above anything a model can use (an observation is
clipped to 16,000 characters, an image is described, not shown), and so the most one server can
make the worker hold for a reply. A longer one ends a stdio server's session; over HTTP it
fails the call it answered, and is read no further."""
READ_BACKSTOP_SECONDS = 5.0
"""How long past a call's timeout (run_tool's, which normally fires first) the SDK still waits
for its reply, and an HTTP server's reply is still read; the same past the connect timeout."""


class McpServerSpec(BaseModel):
    """One `--mcp` server: where it is and how to reach it."""

    model_config = ConfigDict(frozen=True)

    name: str
    transport: Literal["stdio", "http"]
    url: str | None = None
    command: list[str] | None = None
    spec: str
    """The text it was parsed from."""

    @property
    def shown(self) -> str:
        """The spec as messages show it: an HTTP server's URL without its secrets
        (`mcp_headers.shown_url`)."""
        return self.spec if self.url is None else f"{self.name}={shown_url(self.url)}"


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


class McpToolbox:
    """An async context manager holding one session per MCP server, and their tools.

        async with McpToolbox(["echo=python echo_server.py"]) as toolbox:
            worker = await create_worker(..., extra_tools=toolbox.tools)

    Stdio servers get `server_environment(env)`: a minimal environment plus the variables
    named in `env`, so the worker's secrets never reach a server's process. HTTP servers get
    the `headers` given for them (`NAME=Header-Name: value`, `${VARIABLE}`s and
    `${file:PATH}`s read now, the files again for each new session: `mcp_headers`). A stdio
    server's session is started again after a call abandoned it mid-reply or it sent a message
    over `max_message_bytes` (`mcp_connection`); an HTTP server's reply over `max_message_bytes`
    fails its call and the session goes on (`mcp_http`).
    """

    def __init__(
        self,
        specs: Sequence[str | McpServerSpec],
        *,
        connect_timeout_seconds: float = 60.0,
        tool_timeout_seconds: float = 60.0,
        separator: str = TOOL_SEPARATOR,
        env: Sequence[str] = (),
        headers: Sequence[str] = (),
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        self.servers = parse_mcp_specs(specs)  # bad specs fail here, before anything starts
        self.env_names = list(env)
        server_environment(self.env_names)  # and bad --mcp-env names
        self.header_sources = header_sources(headers, {s.name: s.transport for s in self.servers})
        self.headers = {name: source.values for name, source in self.header_sources.items()}
        """What each HTTP server's headers were when the toolbox was made."""
        if max_message_bytes < 1:
            raise ValueError(f"max_message_bytes must be positive, not {max_message_bytes!r}")
        self.connect_timeout_seconds = connect_timeout_seconds
        self.tool_timeout_seconds = tool_timeout_seconds
        self.separator = separator
        self.tools: list[Tool] = []
        self.tools_by_server: dict[str, list[str]] = {}
        self.max_message_bytes = max_message_bytes
        self._connections: list[McpConnection] = []

    async def __aenter__(self) -> McpToolbox:
        try:
            for server in self.servers:
                connection = self._connection(server)
                self._connections.append(connection)
                try:
                    listed = await connection.open()
                except Exception as err:
                    said = str(err) if isinstance(err, McpConnectionError) else describe(err)
                    raise McpConnectionError(
                        f"MCP server {server.shown!r}: cannot connect ({said})"
                    ) from err
                tools = [self._tool(server, connection, t) for t in listed]
                self.tools.extend(tools)
                self.tools_by_server[server.name] = [t.name for t in tools]
        except BaseException:
            await self._close()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._close()

    async def _close(self) -> None:
        """Every server stopped, together (each is a bounded wait)."""
        await asyncio.gather(*(c.close() for c in self._connections))
        self._connections.clear()

    def _connection(self, server: McpServerSpec) -> McpConnection:
        """`server`'s connection: an HTTP one's headers read again for each session it opens,
        and, after a refusal, to tell whether they were renewed."""
        headers = SessionHeaders(self.header_sources.get(server.name))
        return McpConnection(
            server.name,
            self._transport(server, headers),
            connect_timeout_seconds=self.connect_timeout_seconds,
            credentials_renewed=headers.renewed if headers.renewable else None,
        )

    def _transport(self, server: McpServerSpec, headers: SessionHeaders) -> TransportFactory:
        """How to open `server`'s transport, each time its session starts."""
        if server.transport == "http":
            from reactive_temporal.mcp_http import http_transport

            url = server.url
            assert url is not None
            limit, grace = self.max_message_bytes, READ_BACKSTOP_SECONDS
            call_seconds = self.tool_timeout_seconds + grace
            connect_seconds = self.connect_timeout_seconds + grace
            return lambda hooks: http_transport(
                url,
                hooks,
                server=server.name,
                headers=headers.for_session(),
                max_message_bytes=limit,
                call_seconds=call_seconds,
                connect_seconds=connect_seconds,
            )
        from reactive_temporal.mcp_stdio import LineSplitter, stdio_transport

        command = server.command
        assert command is not None
        env_names, limit = self.env_names, self.max_message_bytes

        def open_stdio(hooks: TransportHooks) -> Transport:
            lines = LineSplitter(limit)
            hooks.mid_message = lambda: lines.pending > 0
            return stdio_transport(command, server_environment(env_names), hooks.end, lines)

        return open_stdio

    def _tool(self, server: McpServerSpec, connection: McpConnection, spec: mcp_types.Tool) -> Tool:
        fallback = f"The {spec.name} tool of MCP server {server.name}."
        return Tool(
            name=f"{server.name}{self.separator}{spec.name}",
            description=spec.description or spec.title or fallback,
            function=_caller(connection, spec.name, self.tool_timeout_seconds),
            timeout_seconds=self.tool_timeout_seconds,
            json_schema=dict(spec.input_schema),
        )


def _caller(connection: McpConnection, tool_name: str, timeout_seconds: float) -> ToolFunction:
    async def call(**arguments: Any) -> str:
        result = await connection.call_tool(
            tool_name, arguments, timeout_seconds + READ_BACKSTOP_SECONDS
        )
        return render_call_result(result)

    return call
