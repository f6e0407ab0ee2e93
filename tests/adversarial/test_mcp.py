"""MCP servers: what a stdio server can see of the worker, and what it may send back.

Rows: `input` is the (tool, arguments) of the hostile test server
(tests/fixtures/mcp_hostile_server.py) the scripted model calls in a real run; `expect` is a
distinctive part of the observation. The environment tests start the server as the worker
does (in process, and as `worker.py --mcp … --mcp-env …`) with secrets in the environment.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from reactive_temporal.api.agents import Agent
from reactive_temporal.config import Settings
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from reactive_temporal.hosting.runtime import Runtime
from reactive_temporal.limits import OBSERVATION_MAX_CHARS
from reactive_temporal.mcp_tools import McpConnectionError, McpToolbox
from tests.adversarial.cases import Hostile, params, table
from tests.adversarial.conftest import (
    StoreSnapshot,
    assert_no_failed_tasks,
    observations,
    owned_by,
    unique,
)
from tests.processes import start_worker, stop, worker_env
from tests.workflow.conftest import running_worker

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SPEC = f"hostile={sys.executable} {FIXTURES / 'mcp_hostile_server.py'}"
RAW_SPEC = f"raw={sys.executable} {FIXTURES / 'mcp_raw_server.py'}"
"""A hand-written server that sends what the SDK's server never would."""
TOOL_TIMEOUT = 15.0
"""Long enough for the SDK server to answer a 5 MB call on a loaded machine (3 s was not);
the rows that time out on purpose wait for it, together."""
SECRETS = {
    "OPENAI_API_KEY": "sk-adversarial-openai-secret",
    "DATABASE_URL": "postgresql://admin:adversarial-db-secret@db.internal/prod",
    "REACTIVE_TEMPORAL_ENCRYPTION_KEYS": "k1:YWR2ZXJzYXJpYWwtZW5jcnlwdGlvbi1rZXktc2VjcmV0IQ==",
    "REACTIVE_TEMPORAL_CODEC_TOKEN": "adversarial-codec-secret",
    "TEMPORAL_API_KEY": "adversarial-temporal-secret",
    "AWS_SECRET_ACCESS_KEY": "adversarial-aws-secret",
}
PASSED = {"MY_MCP_TOKEN": "meant-for-the-mcp-server"}

MCP_OUTPUT = table("mcp-output", [
    Hostile("mcp-huge-output", ("hostile__huge", {"megabytes": 5}), "characters cut]",
            "5 MB into the transcript and the next prompt"),
    Hostile("mcp-markup-output", ("hostile__markup", {}), "[/] [bold red]red[/]",
            "stored as it came (it is data); the terminal shows it as text"),
    Hostile("mcp-lone-surrogate", ("raw__surrogate", {}), f"timed out after {TOOL_TIMEOUT:g}s",
            "a reply the MCP client cannot parse: it drops it, and the call waits for its "
            "timeout instead of hanging"),
    Hostile("mcp-nested-structured-content", ("raw__nested", {}), "timed out",
            "5,000-deep structured content: the same"),
    Hostile("mcp-megabyte-error", ("raw__huge_error", {}), "characters cut]",
            "a 1 MB error text in the transcript, the next prompt and the run's state"),
    Hostile("mcp-ten-thousand-blocks", ("raw__many_blocks", {}), "characters cut]",
            "60 KB of blocks into the next prompt"),
    Hostile("mcp-rpc-error-megabyte", ("raw__rpc_error", {}), "failed: MCPError: RRRR",
            "a 1 MB JSON-RPC error message into the transcript and the next prompt"),
    Hostile("mcp-null-result", ("raw__null_result", {}), "timed out",
            "a null result: the client drops it, the call waits for its timeout, not forever"),
    Hostile("mcp-content-not-a-list", ("raw__bad_content", {}),
            "failed: ValidationError: 1 validation error for CallToolResult",
            "content that is not a list: an unexplained crash of the call"),
    Hostile("mcp-unknown-block-type", ("raw__unknown_block", {}),
            "validation errors for CallToolResult",
            "1 MB in a content block of an unknown type"),
])  # fmt: skip


def leaked(environment: dict[str, str]) -> list[str]:
    values = set(SECRETS.values())
    return sorted(k for k, v in environment.items() if k in SECRETS or v in values)


async def test_stdio_server_sees_none_of_the_workers_secrets(
    client: Client,
    settings: Settings,
    llm: ScriptedLLM,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
):
    for name, value in {**SECRETS, **PASSED}.items():
        monkeypatch.setenv(name, value)
    model = llm.script(unique("mcp-env"), [
        Reply(None, [call("hostile__environment")]), Reply("FINAL ANSWER: looked"),
    ])  # fmt: skip
    async with (
        McpToolbox([SPEC], env=list(PASSED)) as toolbox,
        running_worker(client, settings, extra_tools=toolbox.tools) as h,
    ):
        result = await h.run(model, "What can you see?", agent_id=unique("mcp-env"), memory=False)
    [(_, seen)] = await observations(database_url, result.run_id)
    environment = json.loads(seen)
    assert leaked(environment) == []
    assert environment["MY_MCP_TOKEN"] == PASSED["MY_MCP_TOKEN"]
    assert "PATH" in environment
    await assert_no_failed_tasks(client, result.run_id)


async def test_worker_py_gives_stdio_servers_only_the_named_variables(
    client: Client, temporal_address: str, database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    task_queue = f"adv-mcp-{uuid.uuid4().hex[:8]}"
    env = worker_env(temporal_address, database_url, llm.base_url, task_queue, tmp_path)
    env.update({**{k: v for k, v in SECRETS.items() if k != "DATABASE_URL"}, **PASSED})
    env.pop("REACTIVE_TEMPORAL_ENCRYPTION_KEYS")  # the worker must still read our histories
    env["REACTIVE_TEMPORAL_CODEC_TOKEN"] = SECRETS["REACTIVE_TEMPORAL_CODEC_TOKEN"]
    # The worker really uses TEMPORAL_API_KEY (envconfig; it implies TLS): the dev server takes
    # it in plaintext, so the secret is live in the worker and still must not reach MCP servers.
    env["TEMPORAL_TLS"] = "false"
    worker = start_worker(env, tmp_path / "worker.log", "--mcp", SPEC, "--mcp-env", "MY_MCP_TOKEN")
    try:
        model = llm.script(unique("mcp-env-cli"), [
            Reply(None, [call("hostile__environment")]), Reply("FINAL ANSWER: looked"),
        ])  # fmt: skip
        config = AgentConfig(agent_id=unique("mcp-env-cli"), model=model, memory=False)
        agent = Agent(config, Runtime(client, task_queue, offline_model=False))
        result = await asyncio.wait_for(agent.run("What can you see?"), 120)
    finally:
        stop(worker)
    [(_, seen)] = await observations(database_url, result.run_id)
    environment = json.loads(seen)
    assert leaked(environment) == [] and database_url not in seen
    assert environment["MY_MCP_TOKEN"] == PASSED["MY_MCP_TOKEN"]
    await assert_no_failed_tasks(client, result.run_id)


@pytest.fixture(scope="module")
async def mcp_observed(
    client: Client, settings: Settings, llm: ScriptedLLM, database_url: str
) -> dict[str, Any]:
    calls = [call(row.input[0], **row.input[1]) for row in MCP_OUTPUT]
    model = llm.script(unique("mcp-out"), [Reply(None, calls), Reply("FINAL ANSWER: read")])
    async with (
        McpToolbox([SPEC, RAW_SPEC], tool_timeout_seconds=TOOL_TIMEOUT) as toolbox,
        running_worker(client, settings, extra_tools=toolbox.tools, max_cached_workflows=None) as h,
    ):
        before = await StoreSnapshot.take(database_url)
        result = await h.run(model, "Call the servers", agent_id=unique("mcp-out"), memory=False,
                             max_parallel_tools=8)  # fmt: skip
        after = await StoreSnapshot.take(database_url)
    await assert_no_failed_tasks(client, result.run_id)
    found = await observations(database_url, result.run_id)
    return {
        "observations": {
            row.id: content for row, (_, content) in zip(MCP_OUTPUT, found, strict=True)
        },
        "changes": after.changes_since(before, own=owned_by(result.run_id)),
    }


@pytest.mark.parametrize("row", params(MCP_OUTPUT))
def test_hostile_mcp_output_is_bounded_data(row: Hostile, mcp_observed: dict[str, Any]):
    content = mcp_observed["observations"][row.id]
    assert row.expect in content, content[:300]
    assert len(content) <= OBSERVATION_MAX_CHARS
    assert mcp_observed["changes"] == []


async def test_a_server_that_pages_its_tools_forever_is_refused():
    """`tools/list` naming the same next page forever held the worker's start-up for good
    (the connect timeout was each request's, and memory grew 12 MB a second)."""
    endless = f"endless={sys.executable} {FIXTURES / 'mcp_raw_server.py'} --endless-list"
    with pytest.raises(McpConnectionError, match="named page 'again' again"):
        async with asyncio.timeout(30), McpToolbox([endless], connect_timeout_seconds=10):
            pass
