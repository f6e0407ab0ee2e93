"""Headers a worker sends to an HTTP MCP server: how hosted servers take their credentials.

A hosted MCP server (a company's own, GitHub's, a SaaS vendor's) asks for an API key or a
token in a header, `Authorization: Bearer …` most often; without one, every request is a 401
and the worker cannot start. `--mcp-header 'NAME=Header-Name: value'` (repeatable) sends a
header to the server named NAME, on every request of its sessions.

A value names the worker's environment variables as `${VARIABLE}`, read when the worker
starts: written in single quotes, the secret is in neither the shell's history nor the
worker's command line (`ps`, and the command line each process of `--processes N` is started
with), only in the environment, where the worker's other secrets are. A literal value works
too, and is as visible as any other argument.

A value names a file as `${file:PATH}`: its content, stripped of surrounding whitespace (the
trailing newline), read at the worker's start and again for each new session with the server
(`SessionHeaders`), and after the server refused the credentials, to tell whether they were
renewed. Tokens that rotate are written to a file in place (Kubernetes' projected
service-account tokens, Vault agent's sidecar) or expire (OAuth access tokens, renewed by
whatever writes the file): a variable, read once, would take a worker restart at each.

Errors name the server, the header and the variable or the file, never a value: they are
printed and logged, and a value is a secret more often than not.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from reactive_temporal.http_headers import RESERVED, name_problem, read_header_file, value_problem
from reactive_temporal.sanitize import redact_dsn

MCP_RESERVED = RESERVED | {"accept", "last-event-id", "mcp-protocol-version", "mcp-session-id"}
"""Besides what the HTTP client sets: what the MCP protocol's transport sets (a session id of
the operator's would break every session)."""
_REFERENCE = re.compile(r"\$\{([^}]*)\}")
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
FILE_PREFIX = "file:"
"""`${file:PATH}`: a reference to a file rather than to a variable (no variable has a colon)."""


@dataclass(frozen=True)
class McpHeader:
    """One `--mcp-header`: the server it goes to, its name, and its value as written (with
    `${VARIABLE}` references, read by `value()`)."""

    server: str
    name: str
    template: str

    @property
    def where(self) -> str:
        """How an error names this header: its server and name, not its value."""
        return f"--mcp-header for MCP server {self.server!r}, header {self.name!r}"

    @property
    def files(self) -> tuple[str, ...]:
        """The paths its `${file:PATH}` references name, as written."""
        return tuple(
            ref.removeprefix(FILE_PREFIX)
            for ref in _REFERENCE.findall(self.template)
            if ref.startswith(FILE_PREFIX)
        )

    @property
    def variables(self) -> tuple[str, ...]:
        """The names its `${VARIABLE}` references give, as written."""
        return tuple(
            ref for ref in _REFERENCE.findall(self.template) if not ref.startswith(FILE_PREFIX)
        )

    def value(self, environ: Mapping[str, str] | None = None) -> str:
        """The value to send: `${VARIABLE}` references read from `environ` (the process's
        environment), `${file:PATH}` ones from their files (`read_header_file`); a ValueError
        naming the variable or the file when one is unset, unreadable or empty, or when the
        value would hold a line break (a second header smuggled into the request)."""
        env = os.environ if environ is None else environ

        def read(match: re.Match[str]) -> str:
            variable = match.group(1)
            if variable.startswith(FILE_PREFIX):
                return read_header_file(variable.removeprefix(FILE_PREFIX), self.where)
            if not _VARIABLE.fullmatch(variable):
                raise ValueError(
                    f"{self.where}: ${{{variable}}} does not name an environment variable"
                )
            found = env.get(variable)
            if not found:
                raise ValueError(
                    f"{self.where}: environment variable {variable} is "
                    f"{'empty' if found == '' else 'not set'}"
                )
            return found

        if "${" in _REFERENCE.sub("", self.template):
            raise ValueError(f"{self.where}: an unterminated '${{' in the value")
        value = _REFERENCE.sub(read, self.template).strip()
        if (problem := value_problem(value)) is not None:
            raise ValueError(f"{self.where}: {problem}")
        return value


def parse_mcp_header(text: str) -> McpHeader:
    """`NAME=Header-Name: value`, or a ValueError saying what is wrong (without the value)."""
    server, sep, header = text.partition("=")
    name, colon, template = header.partition(":")
    server, name = server.strip(), name.strip()
    shape = "expected NAME=Header-Name: value, e.g. 'docs=Authorization: Bearer ${DOCS_TOKEN}'"
    if not sep or not colon:
        raise ValueError(f"invalid --mcp-header for {server or '?'!r}: {shape}")
    if (problem := name_problem(name, MCP_RESERVED)) is not None:
        raise ValueError(f"invalid --mcp-header for {server!r}: {problem} ({shape})")
    return McpHeader(server=server, name=name, template=template.strip())


@dataclass
class ServerHeaders:
    """One HTTP server's `--mcp-header`s: their values as read at the worker's start, and what
    reading their `${file:PATH}`s again takes (the variables, kept as they were then: a
    `${VARIABLE}` is read once)."""

    server: str
    headers: list[McpHeader] = field(default_factory=list)
    environ: dict[str, str] = field(default_factory=dict)
    values: dict[str, str] = field(default_factory=dict)

    @property
    def files(self) -> tuple[str, ...]:
        """The files its values are read from: none, and they are never read again."""
        return tuple(path for header in self.headers for path in header.files)

    def read(self) -> dict[str, str]:
        """The values to send now: the files read again (a ValueError naming one that cannot
        be read or holds no value), the variables as they were at the start."""
        return {header.name: header.value(self.environ) for header in self.headers}


def header_sources(
    texts: Sequence[str], transports: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, ServerHeaders]:
    """The headers of each HTTP server, read now: `transports` maps each `--mcp` server's
    name to its transport. A header for no server, for a stdio server (its secrets go in its
    environment: `--mcp-env`) or given twice is a ValueError, as is a value that cannot be
    read (`McpHeader.value`)."""
    env = os.environ if environ is None else environ
    sources: dict[str, ServerHeaders] = {}
    for text in texts:
        header = parse_mcp_header(text)
        transport = transports.get(header.server)
        if transport is None:
            known = ", ".join(sorted(transports)) or "none given"
            raise ValueError(f"{header.where}: no --mcp server has that name ({known})")
        if transport != "http":
            raise ValueError(
                f"{header.where}: it is a stdio server, which takes no headers; pass its "
                "secrets in its environment with --mcp-env NAME"
            )
        source = sources.setdefault(header.server, ServerHeaders(header.server))
        if header.name.lower() in (n.lower() for n in source.values):
            raise ValueError(f"{header.where}: given twice")
        source.values[header.name] = header.value(env)
        source.headers.append(header)
        source.environ.update({v: env[v] for v in header.variables if v in env})
    return sources


def headers_by_server(
    texts: Sequence[str], transports: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, dict[str, str]]:
    """The headers each HTTP server gets, read now (`header_sources`)."""
    sources = header_sources(texts, transports, environ)
    return {server: source.values for server, source in sources.items()}


class SessionHeaders:
    """The headers one HTTP server's sessions send: read again (its files) as each session
    opens, so a token rotated in its file is sent from the next session on, and read again
    after the server refused them, to tell whether a new session would send others.

    Read once a session, not once a request: a request is a tool call, and a worker makes
    many more of those than a token rotates."""

    def __init__(self, source: ServerHeaders | None) -> None:
        self._source = source if source is not None and source.files else None
        self.sent: dict[str, str] = {} if source is None else dict(source.values)
        """What the current (or the last) session was opened with."""

    @property
    def renewable(self) -> bool:
        """Whether any of them is read from a file (only those can change)."""
        return self._source is not None

    def for_session(self) -> dict[str, str]:
        """The headers a session opening now sends: its files read again."""
        if self._source is not None:
            self.sent = self._source.read()
        return self.sent

    def renewed(self) -> bool:
        """Whether a new session would send other headers than the current one: the files
        read again now (a ValueError naming one that cannot be read); False when none of its
        headers is read from a file."""
        return self._source is not None and self._source.read() != self.sent


def shown_url(url: str) -> str:
    """`url` as messages show it: a password in it (`redact_dsn`), and its query (where API
    keys are often put), replaced by `***`; they are secrets as often as a header is."""
    parts = urlsplit(redact_dsn(url))
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "***" if parts.query else "", ""))
