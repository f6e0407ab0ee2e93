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

Errors name the server, the header and the variable, never a value: they are printed and
logged, and a value is a secret more often than not.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from reactive_temporal.http_headers import RESERVED, name_problem, value_problem
from reactive_temporal.sanitize import redact_dsn

MCP_RESERVED = RESERVED | {"accept", "last-event-id", "mcp-protocol-version", "mcp-session-id"}
"""Besides what the HTTP client sets: what the MCP protocol's transport sets (a session id of
the operator's would break every session)."""
_REFERENCE = re.compile(r"\$\{([^}]*)\}")
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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

    def value(self, environ: Mapping[str, str] | None = None) -> str:
        """The value to send: `${VARIABLE}` references read from `environ` (the process's
        environment); a ValueError naming the variable when one is unset or empty, or when
        the value would hold a line break (a second header smuggled into the request)."""
        env = os.environ if environ is None else environ

        def read(match: re.Match[str]) -> str:
            variable = match.group(1)
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


def headers_by_server(
    texts: Sequence[str], transports: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, dict[str, str]]:
    """The headers each HTTP server gets, read now: `transports` maps each `--mcp` server's
    name to its transport. A header for no server, for a stdio server (its secrets go in its
    environment: `--mcp-env`) or given twice is a ValueError."""
    sent: dict[str, dict[str, str]] = {}
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
        server = sent.setdefault(header.server, {})
        if header.name.lower() in (n.lower() for n in server):
            raise ValueError(f"{header.where}: given twice")
        server[header.name] = header.value(environ)
    return sent


def shown_url(url: str) -> str:
    """`url` as messages show it: a password in it (`redact_dsn`), and its query (where API
    keys are often put), replaced by `***`; they are secrets as often as a header is."""
    parts = urlsplit(redact_dsn(url))
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "***" if parts.query else "", ""))
