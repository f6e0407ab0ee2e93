"""MCP replies the worker gives up on: a stdio server that, asked for a tool, writes one line
that never ends.

The SDK's stdio reader has no cap on a line and joins it again with every chunk: after the
call timed out it went on reading, and holding, the endless line (+58 MB in 60 s) in the worker
that runs every other agent's tools. Now the call's end stops that server and the next call
starts it again; and one message is capped whatever the timeout.

The server (tests/fixtures/mcp_raw_server.py `--state DIR`) keeps, in DIR/<pid>, how many
bytes it has managed to write: the tests read that and the pid, so they measure the server
being stopped and the pipe no longer read, not the toolbox's own account of it.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from reactive_temporal.config import Settings
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from reactive_temporal.mcp_tools import McpConnectionError, McpToolbox
from tests.adversarial.conftest import (
    assert_no_failed_tasks,
    by_name,
    eventually,
    observations,
    unique,
    within,
)
from tests.workflow.conftest import running_worker

RAW_SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_raw_server.py"
SLOW: dict[str, Any] = {"chunk_bytes": 16_384, "interval": 0.01}
"""~1.6 MB/s: within the default cap for as long as the short timeouts below."""
FAST: dict[str, Any] = {"chunk_bytes": 65_536, "interval": 0}


def raw_spec(name: str, state: Path, *flags: str) -> str:
    state.mkdir(exist_ok=True)
    return f"{name}={sys.executable} {RAW_SERVER} --state {state} {' '.join(flags)}".strip()


def written(state: Path) -> dict[int, int]:
    """Bytes written by each server process started with `--state state`, by pid."""
    return {int(p.name): int(p.read_text()) for p in state.iterdir() if p.name.isdigit()}


def alive(pid: int) -> bool:
    """Running (a zombie has stopped running; it only waits to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def test_an_endless_reply_abandoned_at_its_timeout_is_read_no_more(tmp_path: Path):
    hostile, other = tmp_path / "hostile", tmp_path / "other"
    specs = [raw_spec("raw", hostile), raw_spec("other", other)]
    async with McpToolbox(specs, tool_timeout_seconds=2) as toolbox:
        tools = by_name(toolbox)
        [other_pid] = written(other)
        with pytest.raises(TimeoutError):
            await within(2, tools["raw/endless"], **SLOW)
        [first] = written(hostile)
        assert written(hostile)[first] > 100_000  # it was still writing when the call gave up
        await eventually(lambda: not alive(first))
        stopped_at = written(hostile)[first]
        await asyncio.sleep(0.5)
        assert written(hostile)[first] == stopped_at

        assert await within(10, tools["raw/hello"]) == "hello"  # from a new server process
        assert [pid for pid in written(hostile) if alive(pid)] == [max(written(hostile))] != [first]
        assert list(written(other)) == [other_pid] and alive(other_pid)  # untouched
        assert await within(10, tools["other/hello"]) == "hello"


async def test_a_message_over_the_cap_fails_its_call_at_once_and_is_read_no_further(
    tmp_path: Path,
):
    cap = 1024 * 1024
    async with McpToolbox(
        [raw_spec("raw", tmp_path)], tool_timeout_seconds=30, max_message_bytes=cap
    ) as toolbox:
        tools = by_name(toolbox)
        with pytest.raises(McpConnectionError) as info:  # at the cap, not the 30 s timeout
            await within(30, tools["raw/endless"], **FAST)
        assert str(info.value) == f"MCP server 'raw' sent a message longer than {cap} bytes"
        [first] = written(tmp_path)
        await eventually(lambda: not alive(first))
        # the cap, plus what the pipe and one read held when reading stopped
        assert cap < written(tmp_path)[first] < 2 * cap
        assert await within(10, tools["raw/hello"]) == "hello"


async def test_a_call_waiting_behind_an_abandoned_reply_fails_saying_why(tmp_path: Path):
    """The calls sharing the abandoned reply's pipe end with its session (this server answers
    nothing while it writes), with an error that says what happened, not 'Connection closed'."""
    async with McpToolbox([raw_spec("raw", tmp_path)], tool_timeout_seconds=30) as toolbox:
        tools = by_name(toolbox)
        endless = asyncio.create_task(within(5, tools["raw/endless"], **SLOW))
        await eventually(lambda: any(written(tmp_path).values()), seconds=60)  # it writes
        with pytest.raises(McpConnectionError) as info:
            await within(10, tools["raw/hello"])
        assert str(info.value) == (
            "MCP server 'raw' was restarted: a call to its tool endless was abandoned mid-reply"
        )
        with pytest.raises(TimeoutError):
            await endless


async def test_a_server_that_cannot_start_again_is_the_next_calls_error(tmp_path: Path):
    async with McpToolbox([raw_spec("raw", tmp_path, "--once")], tool_timeout_seconds=1) as toolbox:
        tools = by_name(toolbox)
        with pytest.raises(TimeoutError):
            await within(1, tools["raw/endless"], **SLOW)
        for _ in range(2):  # each call tries again
            with pytest.raises(McpConnectionError) as info:
                await within(10, tools["raw/hello"])
            assert str(info.value) == (
                "MCP server 'raw': cannot start again (MCPError: Connection closed)"
            )


async def test_in_a_run_the_timed_out_call_is_an_observation_and_the_next_call_answers(
    client: Client, settings: Settings, llm: ScriptedLLM, database_url: str, tmp_path: Path
):
    model = llm.script(unique("mcp-endless"), [
        Reply(None, [call("raw__endless", **SLOW)]),
        Reply(None, [call("raw__hello")]),
        Reply("FINAL ANSWER: greeted"),
    ])  # fmt: skip
    async with (
        McpToolbox([raw_spec("raw", tmp_path)], tool_timeout_seconds=2) as toolbox,
        running_worker(client, settings, extra_tools=toolbox.tools) as h,
    ):
        result = await h.run(model, "Call the server", agent_id=unique("mcp-endless"), memory=False)
    assert [content for _, content in await observations(database_url, result.run_id)] == [
        "[Tool error: raw/endless timed out after 2s]",
        "hello",
    ]
    assert (result.terminated_by, result.success) == ("final_answer", True)
    assert len(written(tmp_path)) == 2
    await assert_no_failed_tasks(client, result.run_id)


async def test_a_call_abandoned_with_nothing_half_read_leaves_the_session_alone(tmp_path: Path):
    """`null_result`'s reply is read whole and dropped by the client, so its call waits for its
    timeout: there is nothing left to read, so the session and the calls beside it go on."""
    async with McpToolbox([raw_spec("raw", tmp_path)], tool_timeout_seconds=30) as toolbox:
        tools = by_name(toolbox)
        [pid] = written(tmp_path)
        with pytest.raises(TimeoutError):
            await within(1, tools["raw/null_result"])
        assert await within(10, tools["raw/hello"]) == "hello"
        assert list(written(tmp_path)) == [pid] and alive(pid)
