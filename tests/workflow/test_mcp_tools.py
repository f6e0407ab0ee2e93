"""MCP servers' tools in a real run: a stdio server and a streamable-HTTP one, each a subprocess.

The toolbox is opened inside each test (not a fixture) because the SDK's transports are anyio
task groups, which must be closed by the task that opened them, as the worker does.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from temporalio.client import Client

from reactive_temporal.config import Settings
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from reactive_temporal.mcp_tools import McpConnectionError, McpToolbox
from tests.workflow.conftest import Harness, running_worker

pytestmark = pytest.mark.workflow

ECHO_SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_echo_server.py"
STDIO_SPEC = f"echo={sys.executable} {ECHO_SERVER}"


@asynccontextmanager
async def mcp_harness(
    client: Client, settings: Settings, specs: list[str], headers: list[str] | None = None
) -> AsyncIterator[tuple[Harness, McpToolbox]]:
    """The `harness` fixture's worker, with the servers' tools, for as long as the toolbox."""
    async with (
        McpToolbox(specs, headers=headers or []) as toolbox,
        running_worker(client, settings, extra_tools=toolbox.tools) as harness,
    ):
        yield harness, toolbox


def offered(request: dict, name: str) -> dict:
    [entry] = [t["function"] for t in request.get("tools", []) if t["function"]["name"] == name]
    return entry


def tool_messages(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


async def test_stdio_server_tool_is_offered_called_and_observed(
    client: Client, settings: Settings, llm: ScriptedLLM, model_name: str
):
    llm.script(
        model_name,
        [
            Reply(None, [call("echo__reverse", text="stressed")]),
            Reply("FINAL ANSWER: Reversed, 'stressed' is 'desserts'."),
        ],
    )
    async with mcp_harness(client, settings, [STDIO_SPEC]) as (harness, toolbox):
        assert toolbox.tools_by_server == {"echo": ["echo/reverse", "echo/add", "echo/explode"]}
        result = await harness.run(model_name, "Reverse the word 'stressed'.")

    first, second = llm.requests[model_name]
    reverse = offered(first, "echo__reverse")
    assert reverse["description"] == "Reverse a string."
    schema = reverse["parameters"]  # the server's own inputSchema, titles and all
    assert schema["type"] == "object" and schema["required"] == ["text"]
    assert schema["properties"]["text"]["type"] == "string"
    assert schema["title"] == "reverseArguments"
    assert offered(first, "echo__add")["parameters"]["required"] == ["a", "b"]
    assert tool_messages(second) == ["desserts"]
    assert (result.terminated_by, result.success) == ("final_answer", True)
    assert "desserts" in result.output
    assert result.tools_used == ["echo/reverse"]  # the model saw echo__reverse (OpenAI's rule)


async def test_a_failing_mcp_tool_is_an_error_observation_and_the_run_finishes(
    client: Client, settings: Settings, llm: ScriptedLLM, model_name: str
):
    llm.script(
        model_name,
        [
            Reply(
                None,
                [
                    call("echo__explode", reason="testing"),
                    call("echo__add", a=2),  # missing `b`: refused before the server sees it
                    call("echo__add", a="two", b=2),  # wrong type: the server's validation
                    call("echo__add", a=2, b=3),
                ],
            ),
            Reply("FINAL ANSWER: 5, despite the explosion."),
        ],
    )
    async with mcp_harness(client, settings, [STDIO_SPEC]) as (harness, _):
        result = await harness.run(model_name, "Blow up, then add 2 and 3.")

    assert (result.terminated_by, result.success) == ("final_answer", True)
    assert result.output == "5, despite the explosion."
    exploded, missing, wrong_type, added = tool_messages(llm.requests[model_name][1])
    assert exploded.startswith("[Tool error: echo/explode failed: McpToolError:")
    assert "boom: testing" in exploded
    assert missing == "[Tool error: invalid arguments for echo/add: missing required arguments: b]"
    assert wrong_type.startswith("[Tool error: echo/add failed: McpToolError:")
    assert "valid integer" in wrong_type
    assert added == "5"


async def test_a_server_that_cannot_start_names_its_spec():
    spec = f"broken={sys.executable} -c 'import sys; sys.exit(3)'"
    with pytest.raises(McpConnectionError) as info:
        async with McpToolbox([spec]):
            pass
    assert str(info.value) == f"MCP server {spec!r}: cannot connect (MCPError: Connection closed)"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_echo_server(tmp_path: Path) -> Iterator[str]:
    """The echo server over streamable HTTP on a free port; its URL once it accepts connections."""
    yield from serve_echo(tmp_path, {})


ECHO_TOKEN = "tok-3f9a61c2e8"
"""What the hosted echo server asks for, as `Authorization: Bearer ECHO_TOKEN`."""


@pytest.fixture
def hosted_echo_server(tmp_path: Path) -> Iterator[str]:
    """The echo server over HTTP asking for a bearer token, as a hosted MCP server does."""
    yield from serve_echo(tmp_path, {"MCP_ECHO_TOKEN": ECHO_TOKEN})


def serve_echo(tmp_path: Path, env: dict[str, str]) -> Iterator[str]:
    port = free_port()
    log = (tmp_path / "mcp_http.log").open("w")
    process = subprocess.Popen(
        [sys.executable, str(ECHO_SERVER), "--http", str(port)],
        stdout=log,
        stderr=log,
        env={**os.environ, **env},
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                pytest.fail(f"the HTTP MCP server exited with {process.returncode}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("the HTTP MCP server did not listen within 60s")
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


async def test_streamable_http_server_tool_runs(
    client: Client, settings: Settings, llm: ScriptedLLM, model_name: str, http_echo_server: str
):
    llm.script(
        model_name,
        [
            Reply(None, [call("web__add", a=17, b=25)]),
            Reply("FINAL ANSWER: 42"),
        ],
    )
    async with mcp_harness(client, settings, [f"web={http_echo_server}"]) as (harness, toolbox):
        assert [t.name for t in toolbox.tools] == ["web/reverse", "web/add", "web/explode"]
        result = await harness.run(model_name, "Add 17 and 25.")

    first, second = llm.requests[model_name]
    assert offered(first, "web__add")["parameters"]["properties"]["a"]["type"] == "integer"
    assert tool_messages(second) == ["42"]
    assert (result.terminated_by, result.output, result.success) == ("final_answer", "42", True)


async def test_a_hosted_server_takes_its_token_from_the_environment_named_in_a_header(
    client: Client,
    settings: Settings,
    llm: ScriptedLLM,
    model_name: str,
    hosted_echo_server: str,
    monkeypatch: pytest.MonkeyPatch,
):
    """`--mcp-header 'web=Authorization: Bearer ${VARIABLE}'`: without it a hosted server's
    401 stopped the worker saying only "Server returned an error response"; now the 401 is
    named with what to do, a wrong token is said to be refused (and not shown), and the right
    one, read from the environment, serves a run's call."""
    spec = f"web={hosted_echo_server}"
    with pytest.raises(McpConnectionError) as info:
        async with McpToolbox([spec]):
            pass
    assert str(info.value) == (
        f"MCP server {spec!r}: cannot connect (it answered HTTP 401 Unauthorized (invalid_token): "
        "it wants credentials; send them with --mcp-header 'web=Authorization: Bearer ${VARIABLE}')"
    )

    monkeypatch.setenv("WEB_MCP_TOKEN", "wrong-4d2c")
    header = "web=Authorization: Bearer ${WEB_MCP_TOKEN}"
    with pytest.raises(McpConnectionError) as info:
        async with McpToolbox([spec], headers=[header]):
            pass
    assert "refused the credentials sent (check its --mcp-header)" in str(info.value)
    assert "wrong-4d2c" not in str(info.value)

    monkeypatch.setenv("WEB_MCP_TOKEN", ECHO_TOKEN)
    llm.script(model_name, [Reply(None, [call("web__reverse", text="abc")]), Reply("Done.")])
    async with mcp_harness(client, settings, [spec], [header]) as (harness, toolbox):
        assert [t.name for t in toolbox.tools] == ["web/reverse", "web/add", "web/explode"]
        result = await harness.run(model_name, "Reverse abc.")
    assert tool_messages(llm.requests[model_name][1]) == ["cba"]
    assert result.success, result


async def test_a_url_s_secrets_are_not_shown_in_its_errors(hosted_echo_server: str):
    """A URL's password (sent as Basic credentials) and its query (where API keys are put)
    are secrets: a server's errors show the URL without them."""
    port = hosted_echo_server.split(":")[2].split("/")[0]
    spec = f"web=http://me:pw-77e1@127.0.0.1:{port}/mcp?api_key=key-9b0f"
    with pytest.raises(McpConnectionError) as info:
        async with McpToolbox([spec]):
            pass
    message = str(info.value)
    assert message.startswith(f"MCP server 'web=http://me:***@127.0.0.1:{port}/mcp?***'"), message
    assert "refused the credentials sent" in message
    assert "pw-77e1" not in message and "key-9b0f" not in message


@pytest.fixture
def rotating_echo_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The hosted echo server asking for the token its file holds, read at each request: a
    token rotated on the server's side refuses the old one at once, as an expired one is."""
    served = tmp_path / "served-token"
    served.write_text(ECHO_TOKEN)
    for url in serve_echo(tmp_path, {"MCP_ECHO_TOKEN_FILE": str(served)}):
        yield url, served


def refused_posts(tmp_path: Path) -> int:
    """How many requests (calls, handshakes) the echo server has refused a token so far."""
    return (tmp_path / "mcp_http.log").read_text().count("refused: POST")


REFUSED = (
    "MCP server 'web' answered HTTP 401 Unauthorized (invalid_token): it refused the "
    "credentials sent (check its --mcp-header)"
)


async def test_a_token_rotated_in_its_file_is_sent_without_a_restart(
    rotating_echo_server: tuple[str, Path], tmp_path: Path
):
    """`${file:PATH}`: a call the server refuses is sent again, once, on a new session, when
    the file holds another token than the one refused; a token that did not change fails
    the call as before, after that one attempt; a file gone is named."""
    url, served = rotating_echo_server
    held = tmp_path / "token"
    held.write_text(f"{ECHO_TOKEN}\n")
    header = f"web=Authorization: Bearer ${{file:{held}}}"
    async with McpToolbox([f"web={url}"], headers=[header]) as toolbox:
        [reverse] = [t.function for t in toolbox.tools if t.name == "web/reverse"]
        assert await reverse(text="abc") == "cba"

        held.write_text("tok-2\n")  # a sidecar renews the worker's file, and the server
        served.write_text("tok-2")  # then refuses the old token
        assert await reverse(text="rotated") == "detator"
        assert refused_posts(tmp_path) == 1  # that call's first attempt; the second was taken

        served.write_text("tok-3")  # renewed on the server's side, not yet in the file
        with pytest.raises(McpConnectionError) as info:
            await reverse(text="stale")
        assert str(info.value) == REFUSED
        assert refused_posts(tmp_path) == 2  # one attempt: the file held the token refused

        held.write_text("tok-3")  # the file renewed later: the next call goes on
        assert await reverse(text="renewed") == "dewener"

        served.write_text("tok-4")
        held.unlink()
        with pytest.raises(McpConnectionError) as info:
            await reverse(text="gone")
        assert str(info.value) == (
            f"{REFUSED}, and its credentials cannot be read again: --mcp-header for MCP server "
            f"'web', header 'Authorization': cannot read file {held} (No such file or directory)"
        )
        assert "tok-" not in str(info.value)


async def test_a_token_from_the_environment_refused_mid_session_is_not_sent_again(
    rotating_echo_server: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A `${VARIABLE}` is read once: a refusal of it fails the call, after one attempt."""
    url, served = rotating_echo_server
    monkeypatch.setenv("WEB_MCP_TOKEN", ECHO_TOKEN)
    header = "web=Authorization: Bearer ${WEB_MCP_TOKEN}"
    async with McpToolbox([f"web={url}"], headers=[header]) as toolbox:
        [reverse] = [t.function for t in toolbox.tools if t.name == "web/reverse"]
        assert await reverse(text="abc") == "cba"
        served.write_text("tok-2")
        monkeypatch.setenv("WEB_MCP_TOKEN", "tok-2")  # too late: read at the start
        with pytest.raises(McpConnectionError) as info:
            await reverse(text="expired")
        assert str(info.value) == REFUSED
        assert refused_posts(tmp_path) == 1
