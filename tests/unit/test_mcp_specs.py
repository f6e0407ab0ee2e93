"""`--mcp` specs: NAME=URL is streamable HTTP, NAME=COMMAND ARGS… is stdio, anything else fails."""

from __future__ import annotations

import pytest

from reactive_temporal.mcp_tools import McpToolbox, parse_mcp_spec, parse_mcp_specs


def test_http_and_https_urls_are_streamable_http():
    spec = parse_mcp_spec("docs=https://example.com/mcp")
    assert (spec.name, spec.transport, spec.url, spec.command) == (
        "docs",
        "http",
        "https://example.com/mcp",
        None,
    )
    assert parse_mcp_spec("local=http://127.0.0.1:8000/mcp").url == "http://127.0.0.1:8000/mcp"
    assert parse_mcp_spec("up=HTTP://Example.com/mcp").transport == "http"


def test_a_command_is_stdio_split_like_a_shell():
    spec = parse_mcp_spec('fs=npx -y @modelcontextprotocol/server-filesystem "/tmp/my dir"')
    assert spec.name == "fs" and spec.transport == "stdio" and spec.url is None
    assert spec.command == ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp/my dir"]


def test_only_the_first_equals_sign_separates_the_name():
    spec = parse_mcp_spec("gh-2=docker run -e TOKEN=abc image")
    assert spec.name == "gh-2"
    assert spec.command == ["docker", "run", "-e", "TOKEN=abc", "image"]
    assert parse_mcp_spec(" my_server = python server.py ").command == ["python", "server.py"]


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("github", "no '='"),
        ("=python server.py", "server name ''"),
        ("git hub=python server.py", "server name 'git hub'"),
        ("github/x=python server.py", "server name 'github/x'"),
        ("github=", "nothing after '='"),
        ("github=   ", "nothing after '='"),
        ("github=python 'unterminated", "cannot split the command"),
        ("github=ftp://example.com/mcp", "only http and https"),
        ("github=http:///mcp", "not a valid URL"),
    ],
)
def test_bad_specs_name_the_spec_and_the_problem(spec: str, problem: str):
    with pytest.raises(ValueError) as info:
        parse_mcp_spec(spec)
    message = str(info.value)
    assert repr(spec) in message
    assert problem in message
    assert "NAME=URL or NAME=COMMAND" in message


def test_server_names_must_be_unique():
    with pytest.raises(ValueError, match="two MCP servers are named 'a'"):
        parse_mcp_specs(["a=python one.py", "a=https://example.com/mcp"])
    assert [s.name for s in parse_mcp_specs(["a=python one.py", "b=python two.py"])] == ["a", "b"]


def test_toolbox_rejects_bad_specs_before_starting_anything():
    with pytest.raises(ValueError, match="'oops'"):
        McpToolbox(["good=python server.py", "oops"])
