"""`--mcp-header NAME=Header-Name: value`: parsed, checked and read from the environment (and
from files) at the worker's start, files again for each session; every error names the server,
the header and the variable or the file, never a value."""

from __future__ import annotations

import os
from pathlib import Path

import httpx2
import pytest

from reactive_temporal.mcp_headers import (
    SessionHeaders,
    header_sources,
    headers_by_server,
    parse_mcp_header,
    shown_url,
)
from reactive_temporal.mcp_http import ReplyLimits
from reactive_temporal.mcp_tools import McpToolbox, parse_mcp_spec

SERVERS = {"docs": "http", "fs": "stdio"}
SECRET = "sk-live-5e1f0c"


def test_a_value_reads_its_variables_from_the_environment():
    sent = headers_by_server(
        ["docs=Authorization: Bearer ${DOCS_TOKEN}", "docs=X-Team:  ${TEAM}-${REGION} "],
        SERVERS,
        {"DOCS_TOKEN": SECRET, "TEAM": "core", "REGION": "eu"},
    )
    assert sent == {"docs": {"Authorization": f"Bearer {SECRET}", "X-Team": "core-eu"}}


def test_a_literal_value_is_sent_as_written():
    assert headers_by_server(["docs=X-Api-Key: abc:def=1"], SERVERS, {}) == {
        "docs": {"X-Api-Key": "abc:def=1"}
    }


@pytest.mark.parametrize(
    ("text", "environ", "problem"),
    [
        ("docs", {}, "expected NAME=Header-Name: value"),
        ("docs=Authorization Bearer x", {}, "expected NAME=Header-Name: value"),
        ("docs=Bad Name: x", {}, "'Bad Name' is not a header name"),
        ("docs=Host: evil.example", {}, "Host is set by the worker itself"),
        ("docs=accept-encoding: gzip", {}, "accept-encoding is set by the worker itself"),
        ("docs=Mcp-Session-Id: 1", {}, "Mcp-Session-Id is set by the worker itself"),
        ("docs=Authorization: Bearer ${TOKEN}", {}, "environment variable TOKEN is not set"),
        ("docs=Authorization: Bearer ${TOKEN}", {"TOKEN": ""}, "TOKEN is empty"),
        ("docs=Authorization: Bearer ${1X}", {}, "${1X} does not name an environment variable"),
        ("docs=Authorization: Bearer ${TOKEN", {"TOKEN": SECRET}, "an unterminated '${'"),
        ("docs=X-Key:", {}, "the value is empty"),
        ("docs=X-Key: ${T}", {"T": f"{SECRET}\r\nX-Admin: 1"}, "a line break or NUL"),
        ("web=X-Key: 1", {}, "no --mcp server has that name (docs, fs)"),
        ("fs=X-Key: 1", {}, "it is a stdio server, which takes no headers"),
    ],
)
def test_bad_headers_say_what_is_wrong_and_not_the_value(
    text: str, environ: dict[str, str], problem: str
):
    with pytest.raises(ValueError) as info:
        headers_by_server([text], SERVERS, environ)
    message = str(info.value)
    assert problem in message
    assert SECRET not in message


def test_a_header_given_twice_is_an_error_whatever_its_case():
    with pytest.raises(ValueError, match="header 'authorization': given twice"):
        headers_by_server(
            ["docs=Authorization: Bearer a", "docs=authorization: Bearer b"], SERVERS, {}
        )


def test_errors_name_the_server_and_header_not_a_literal_value():
    with pytest.raises(ValueError) as info:
        parse_mcp_header(f"docs=Content-Length: {SECRET}")
    assert SECRET not in str(info.value)
    header = parse_mcp_header(f"docs=X-Key: {SECRET}${{GONE}}")
    with pytest.raises(ValueError) as info:
        header.value({})
    assert str(info.value) == (
        "--mcp-header for MCP server 'docs', header 'X-Key': environment variable GONE is not set"
    )


def test_the_toolbox_checks_its_headers_before_connecting(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("DOCS_TOKEN", raising=False)
    with pytest.raises(ValueError, match="DOCS_TOKEN is not set"):
        McpToolbox(
            ["docs=https://example.com/mcp"], headers=["docs=Authorization: Bearer ${DOCS_TOKEN}"]
        )
    monkeypatch.setenv("DOCS_TOKEN", SECRET)
    toolbox = McpToolbox(
        ["docs=https://example.com/mcp"], headers=["docs=Authorization: Bearer ${DOCS_TOKEN}"]
    )
    assert toolbox.headers == {"docs": {"Authorization": f"Bearer {SECRET}"}}


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://example.com/mcp", "https://example.com/mcp"),
        ("https://me:pw@example.com:8443/mcp", "https://me:***@example.com:8443/mcp"),
        ("https://me@example.com/mcp", "https://me@example.com/mcp"),
        ("https://example.com/mcp?api_key=k&x=1#frag", "https://example.com/mcp?***"),
        ("https://a:b@c@example.com/mcp", "https://a:***@example.com/mcp"),
    ],
)
def test_a_url_is_shown_without_its_password_or_query(url: str, shown: str):
    assert shown_url(url) == shown
    assert parse_mcp_spec(f"docs={url}").shown == f"docs={shown}"


def test_a_stdio_spec_is_shown_as_written():
    assert parse_mcp_spec("fs=python server.py --x").shown == "fs=python server.py --x"


async def test_a_refusal_of_the_credentials_names_the_status_until_they_are_taken_again():
    """The SDK says "Server returned an error response" for any HTTP error; a 401 or 403 is
    said as such (a token expired mid-session fails each call saying so), until a request
    succeeds again."""
    limits = ReplyLimits(1024, call_seconds=5, connect_seconds=5, server="docs", credentials=True)
    error = "MCPError: Server returned an error response"

    async def answer(status: int, **headers: str) -> None:
        request = httpx2.Request("POST", "https://example.com/mcp")
        await limits._cap(
            httpx2.Response(status, headers=headers, request=request, stream=httpx2.ByteStream(b""))
        )

    assert limits.refusal(error) is None
    await answer(401, **{"WWW-Authenticate": 'Bearer error="invalid_token"'})
    assert limits.refusal(error) == (
        "answered HTTP 401 Unauthorized (invalid_token): it refused the credentials sent "
        "(check its --mcp-header)"
    )
    await answer(403)
    assert limits.refusal(error) == (
        "answered HTTP 403 Forbidden: the credentials sent do not allow this"
    )
    assert limits.refusal("MCPError: Method not found") is None
    await answer(200)
    assert limits.refusal(error) is None


def write(path: Path, content: str | bytes) -> str:
    if isinstance(content, str):
        content = content.encode()
    path.write_bytes(content)
    return str(path)


def test_a_value_reads_its_files_stripped_beside_its_variables(tmp_path: Path):
    """`${file:PATH}` is the file's content without its trailing newline (as `echo`, a Vault
    agent's template or a Kubernetes secret leaves it), beside `${VARIABLE}`s."""
    token = write(tmp_path / "token", f"  {SECRET}\n")
    sent = headers_by_server(
        [f"docs=Authorization: Bearer ${{file:{token}}}", "docs=X-Team: ${TEAM}"],
        SERVERS,
        {"TEAM": "core"},
    )
    assert sent == {"docs": {"Authorization": f"Bearer {SECRET}", "X-Team": "core"}}


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "cannot read file {path} (No such file or directory)"),
        ("", "file {path} is empty"),
        (" \n\n", "file {path} is empty"),
        (f"{SECRET}\r\nX-Admin: 1\n", "file {path}: the value holds a line break or NUL"),
        (f"{SECRET}\nX-Admin: 1", "file {path}: the value holds a line break or NUL"),
        (f"{SECRET}\0", "file {path}: the value holds a line break or NUL"),
        (f"{SECRET}\x1b[2J", "file {path}: it holds a control character, or one outside ASCII"),
        (f"{SECRET}é".encode(), "file {path}: it holds a control character, or one outside ASCII"),
        (b"\xff\xfe" + SECRET.encode(), "file {path}: it holds a control character"),
        (SECRET * 10_000, "file {path} is longer than 65536 bytes"),
    ],
)
def test_a_file_that_holds_no_header_value_is_named_and_its_content_is_not(
    tmp_path: Path, content: str | bytes | None, problem: str
):
    path = tmp_path / "token"
    if content is not None:
        write(path, content)
    with pytest.raises(ValueError) as info:
        headers_by_server([f"docs=Authorization: Bearer ${{file:{path}}}"], SERVERS, {})
    message = str(info.value)
    assert message.startswith(
        f"--mcp-header for MCP server 'docs', header 'Authorization': {problem.format(path=path)}"
    ), message
    assert SECRET not in message


def test_a_file_reference_must_name_a_regular_file(tmp_path: Path):
    """A directory is a wrong path; a FIFO would hold the worker's start until someone wrote
    to it, and would not hold the token when it was read again."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, problem in ((tmp_path, "is not a regular file"), (fifo, "is not a regular file")):
        with pytest.raises(ValueError, match=f"file {path} {problem}"):
            headers_by_server([f"docs=X-Key: ${{file:{path}}}"], SERVERS, {})
    with pytest.raises(ValueError, match="no file is named"):
        headers_by_server(["docs=X-Key: ${file:}"], SERVERS, {})


def test_a_session_reads_its_files_again_and_its_variables_never(tmp_path: Path):
    """Each new session sends the files' current content; a refusal asks whether a new
    session would send other headers. A `${VARIABLE}` is as it was at the start."""
    token = tmp_path / "token"
    write(token, "one\n")
    environ = {"TEAM": "core"}
    [source] = header_sources(
        [f"docs=Authorization: Bearer ${{file:{token}}}", "docs=X-Team: ${TEAM}"],
        SERVERS,
        environ,
    ).values()
    environ["TEAM"] = "changed"
    headers = SessionHeaders(source)
    assert headers.renewable
    assert headers.sent == {"Authorization": "Bearer one", "X-Team": "core"}
    assert not headers.renewed()
    write(token, "two\n")
    assert headers.renewed()
    assert headers.for_session() == {"Authorization": "Bearer two", "X-Team": "core"}
    assert not headers.renewed()
    token.unlink()
    with pytest.raises(ValueError, match=f"cannot read file {token}"):
        headers.renewed()


def test_headers_from_variables_alone_are_never_read_again():
    [source] = header_sources(["docs=X-Key: ${K}"], SERVERS, {"K": SECRET}).values()
    headers = SessionHeaders(source)
    assert not headers.renewable and not headers.renewed()
    assert headers.for_session() == {"X-Key": SECRET}
    assert not SessionHeaders(None).renewable and SessionHeaders(None).for_session() == {}


def test_the_toolbox_reads_a_file_named_in_a_header_before_connecting(tmp_path: Path):
    header = f"docs=Authorization: Bearer ${{file:{tmp_path / 'token'}}}"
    with pytest.raises(ValueError, match="No such file or directory"):
        McpToolbox(["docs=https://example.com/mcp"], headers=[header])
    write(tmp_path / "token", f"{SECRET}\n")
    toolbox = McpToolbox(["docs=https://example.com/mcp"], headers=[header])
    assert toolbox.headers == {"docs": {"Authorization": f"Bearer {SECRET}"}}


async def test_a_refusal_of_the_credentials_is_told_from_other_errors():
    """What lets a call refused for its credentials go again (the server did not run it)."""
    limits = ReplyLimits(1024, call_seconds=5, connect_seconds=5, server="docs", credentials=True)
    error = "MCPError: Server returned an error response"
    request = httpx2.Request("POST", "https://example.com/mcp")
    assert not limits.credentials_refused(error)
    await limits._cap(httpx2.Response(401, request=request, stream=httpx2.ByteStream(b"")))
    assert limits.credentials_refused(error)
    assert not limits.credentials_refused("MCPError: Method not found")
