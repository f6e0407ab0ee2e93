"""Bad input, table-driven: the CLI, the Python API, the chat update and the tools.

Each case asserts a clear error naming what was wrong, the CLI's exit status (2 for bad
input or configuration, 1 for a failed operation), and that nothing already stored changed
(every row of the Postgres tables, a session's history, the model's request log). Where a
"bad" string is valid text (SQL metacharacters), it must be stored verbatim and safely.

The worker runs in this process (a module-wide one on its own task queue), so CLI
subprocesses are awaited with asyncio, never with a blocking subprocess.run. The CLI cases
run concurrently, once per table, and each case is then asserted on its own.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pytest
from pydantic import ValidationError
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError

from reactive_temporal.api.agents import Agent
from reactive_temporal.api.builder import AgentBuilder, ReactiveAgents
from reactive_temporal.api.bulk_cancel import cancel_running
from reactive_temporal.api.chat_refusals import ChatError
from reactive_temporal.api.replay import HISTORY_FILE_MAX_BYTES
from reactive_temporal.api.run_results import AgentRunError
from reactive_temporal.api.sessions import Session
from reactive_temporal.config import Settings
from reactive_temporal.contracts.entity import ChatRequest
from reactive_temporal.embedded.dev_server import StackError
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from tests.adversarial.conftest import assert_no_failed_tasks
from tests.processes import CliResult, clean_env, starter_async
from tests.workflow.conftest import Harness, running_worker

pytestmark = pytest.mark.e2e
T = TypeVar("T")

TABLES = ("run_messages", "agent_debriefs", "agent_lessons", "chat_sessions", "chat_messages")
SQL = "'; DROP TABLE agent_debriefs; --"
SQL_SESSIONS = "'; DROP TABLE chat_sessions; --"
UNREACHABLE = "127.0.0.1:1"
SHORT_KEY = base64.b64encode(b"0123456789abcdef").decode()  # 16 bytes: not AES-256
GOOD_KEY = base64.b64encode(b"0123456789abcdef" * 2).decode()
CLI_CONCURRENCY = max(4, min(16, (os.cpu_count() or 4) * 2))
"""CLI processes a table runs at once (each imports the whole SDK: CPU-bound at start)."""
HUNG_SECONDS = 5.0
"""How long a case that should finish at once may take before it counts as hung (a good
run of the scripted model takes well under a second)."""


# -- helpers -----------------------------------------------------------------------------------


async def table_contents(database_url: str) -> dict[str, list[str]]:
    """Every row of every table, as text, in a stable order: "nothing changed" means these
    are equal (an edited row changes them as surely as an added or deleted one)."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        contents = {}
        for table in TABLES:  # fixed names, no input
            cur = await conn.execute(f"SELECT t::text FROM {table} t ORDER BY 1")
            contents[table] = [row[0] for row in await cur.fetchall()]
        return contents


def rows_added(before: dict[str, list[str]], after: dict[str, list[str]], table: str) -> int:
    """How many rows `table` gained, every row it had before still there, unchanged."""
    old, new = Counter(before[table]), Counter(after[table])
    assert old <= new, f"{table}: rows changed or went away: {list((old - new).elements())[:3]}"
    return new.total() - old.total()


async def tables_exist(database_url: str) -> bool:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM pg_tables WHERE tablename = ANY(%s)", (list(TABLES),)
        )
        row = await cur.fetchone()
        return row is not None and row[0] == len(TABLES)


async def fetch(database_url: str, query: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(query, params)  # type: ignore[arg-type]
        return await cur.fetchall()


def flat(text: str) -> str:
    """Terminal output with its line wrapping undone (rich wraps long error lines)."""
    return " ".join(text.split())


def assert_refused(result: CliResult, code: int, message: str, *, as_json: bool = False) -> None:
    assert result.code == code, result.describe()
    assert message in flat(result.stderr), result.describe()
    assert "Traceback" not in result.stderr, result.describe()  # a clear error, not a crash
    if as_json:  # --json: stdout is one JSON object naming the error, for scripts
        assert message in flat(json.loads(result.stdout)["error"]), result.describe()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
async def h(client: Client, settings: Settings) -> AsyncIterator[Harness]:
    """One worker for the whole module, on its own task queue."""
    async with running_worker(client, settings, max_cached_workflows=None) as harness:
        yield harness


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The CLI's working directory (no .env) and its files."""
    path = tmp_path_factory.mktemp("bad-input")
    (path / "not-history.json").write_text(json.dumps({"runs": []}))
    (path / "garbage.json").write_text("this is not JSON")
    (path / "bad-events.json").write_text(json.dumps({"events": "nope"}))
    (path / "nested.json").write_text('{"events": ' + NESTED_TOO_DEEP + "}")
    with (path / "endless.json").open("wb") as endless:  # sparse: no disk, a bounded stand-in
        endless.truncate(HISTORY_FILE_MAX_BYTES + 1)  # for /dev/zero, which read whole took
        # every byte of memory until the kernel killed the process (or a process beside it)
    (path / "no-events.json").write_text(json.dumps({"workflowId": "run-x", "events": []}))
    return path


def cli_env(**extra: str) -> dict[str, str]:
    return clean_env(COLUMNS="400", **extra)  # wide: rich wraps less


async def terminate_quietly(client: Client, workflow_id: str) -> None:
    with contextlib.suppress(Exception):
        await client.get_workflow_handle(workflow_id).terminate("bad-input test cleanup")


async def within(call: Awaitable[T], seconds: float, client: Client, workflow_id: str) -> T:
    """`call`'s result, or AssertionError when it hangs; a hung workflow is terminated (which
    ends the call too, so no pending RPC is left behind)."""
    task = asyncio.ensure_future(call)
    done, _ = await asyncio.wait({task}, timeout=seconds)
    if not done:
        await terminate_quietly(client, workflow_id)
        await asyncio.wait({task}, timeout=10)
        if task.done():
            task.exception()  # retrieved: it failed because of the termination
        else:
            task.cancel()
        raise AssertionError(f"{workflow_id}: still not done after {seconds:g}s (it hangs)")
    return task.result()


# -- the CLI before any server: validation and configuration ------------------------------------

# (id, args, environment, exit status, distinctive part of the message). The environment's
# "{temporal}" is the test server, "{db}" the test Postgres; "{dir}" in args is the work dir.
NESTED_TOO_DEEP = "[" * 5_000 + "]" * 5_000
"""JSON past what a parser nests (Python's stops at its recursion limit, ~1,000)."""
NO_SERVER = {"TEMPORAL_ADDRESS": UNREACHABLE, "DATABASE_URL": "{db}"}
LIVE = {"TEMPORAL_ADDRESS": "{temporal}", "DATABASE_URL": "{db}"}
CLI_CASES: list[tuple[str, list[str], dict[str, str], int, str]] = [
    ("run-empty-task", ["run", ""], NO_SERVER, 2,
     "invalid run: task: String should have at least 1 character"),
    ("run-empty-task-json", ["run", "", "--json"], NO_SERVER, 2,
     "task: String should have at least 1 character"),
    ("run-oversized-task", ["run", "x" * 100_001], NO_SERVER, 2,
     "task: String should have at most 100000 characters"),
    ("run-bad-agent-name", ["run", "hi", "--agent", "bad name!"], NO_SERVER, 2,
     "invalid agent configuration: agent_id: String should match pattern"),
    ("run-sql-agent-name", ["run", "hi", "--agent", SQL], NO_SERVER, 2,
     "agent_id: String should match pattern"),
    ("run-max-iterations-0", ["run", "hi", "--max-iterations", "0"], NO_SERVER, 2,
     "Invalid value for '--max-iterations': Input should be greater than or equal to 1"),
    ("run-max-iterations-many", ["run", "hi", "--max-iterations", "many"], NO_SERVER, 2,
     "Invalid value for '--max-iterations': Input should be a valid integer"),
    ("run-max-iterations-10001", ["run", "hi", "--max-iterations", "10001"], NO_SERVER, 2,
     "Input should be less than or equal to 10000"),
    ("chat-bad-agent-name", ["chat", "hi", "--agent", "bad name!"], NO_SERVER, 2,
     "agent_id: String should match pattern"),
    ("runs-unknown-status", ["runs", "--status", "sleeping"], NO_SERVER, 2,
     "unknown status 'sleeping': use one of running, completed, failed"),
    ("runs-limit-0", ["runs", "--limit", "0"], NO_SERVER, 2,
     "Invalid value for '--limit': Input should be greater than or equal to 1"),
    ("runs-limit-many", ["runs", "--limit", "many"], NO_SERVER, 2,
     "Invalid value for '--limit': Input should be a valid integer"),
    ("runs-agent-quote-injection", ["runs", "--agent", "x' OR '1'='1"], NO_SERVER, 2,
     "Invalid value for '--agent': invalid agent name"),
    ("runs-terminated-by-backslash", ["runs", "--terminated-by", "a\\b"], NO_SERVER, 2,
     "unknown ending 'a\\\\b': use one of final_answer_tool"),
    ("runs-terminated-by-unknown", ["runs", "--terminated-by", "exploded"], NO_SERVER, 2,
     "unknown ending 'exploded': use one of final_answer_tool, final_answer, max_iterations, "
     "end_turn, llm_error, cancelled, budget_exceeded, timeout"),
    ("replay-id-and-file", ["replay", "run-x", "--file", "{dir}/garbage.json"], NO_SERVER, 2,
     "give a WORKFLOW_ID, --file HISTORY.json or --recent N (one of them)"),
    ("replay-neither", ["replay"], NO_SERVER, 2, "give a WORKFLOW_ID, --file"),
    ("replay-recent-zero", ["replay", "--recent", "0"], NO_SERVER, 2,
     "--recent must be between 1 and 1000, not 0"),
    ("replay-agent-without-recent", ["replay", "run-x", "--agent", "a"], NO_SERVER, 2,
     "--agent and --query select runs for --recent N"),
    ("replay-agent-and-query", ["replay", "--recent", "3", "--agent", "a", "--query", "x"],
     NO_SERVER, 2, "give --agent or --query, not both"),
    ("replay-missing-file", ["replay", "--file", "{dir}/missing.json"], NO_SERVER, 2,
     "cannot read history file"),
    ("replay-directory", ["replay", "--file", "{dir}"], NO_SERVER, 2, "cannot read history file"),
    ("replay-not-a-history", ["replay", "--file", "{dir}/not-history.json"], NO_SERVER, 2,
     "is not a Temporal history JSON: no 'events'"),
    ("replay-not-json", ["replay", "--file", "{dir}/garbage.json"], NO_SERVER, 2,
     "is not a Temporal history JSON: Expecting value"),
    ("replay-events-not-a-list", ["replay", "--file", "{dir}/bad-events.json"], NO_SERVER, 2,
     "is not a Temporal history JSON"),
    ("replay-no-events", ["replay", "--file", "{dir}/no-events.json"], NO_SERVER, 2,
     "is not a Temporal history JSON"),
    ("replay-endless-file", ["replay", "--file", "{dir}/endless.json"], NO_SERVER, 2,
     "endless.json holds more than 200,000,000 bytes, more than the JSON of any history"),
    # a RecursionError and its traceback, before
    ("replay-nested-too-deep", ["replay", "--file", "{dir}/nested.json"], NO_SERVER, 2,
     "is not a Temporal history JSON: nested deeper than a JSON parser takes"),
    ("model-prices-nested-too-deep", ["run", "hi"],
     {**NO_SERVER, "AGENT_MODEL_PRICES": NESTED_TOO_DEEP}, 2,
     'AGENT_MODEL_PRICES is not valid (error parsing value for field "model_prices": JSON '
     "nested deeper than a parser takes)"),
    ("model-capabilities-nested-too-deep", ["chat", "hi"],
     {**NO_SERVER, "AGENT_MODEL_CAPABILITIES": '{"m": ' + NESTED_TOO_DEEP + "}"}, 2,
     "AGENT_MODEL_CAPABILITIES is not valid"),
    ("unknown-command", ["teleport"], NO_SERVER, 2, "No such command 'teleport'"),
    ("database-url-mysql", ["run", "hi"], {**NO_SERVER, "DATABASE_URL": "mysql://x"}, 2,
     "invalid configuration: DATABASE_URL: DATABASE_URL='mysql://x' is not a PostgreSQL URL"),
    # named as it is set, without pydantic's "Value error, " (it said "model: …")
    ("agent-model-empty", ["run", "hi"], {**NO_SERVER, "AGENT_MODEL": ""}, 2,
     "invalid configuration: AGENT_MODEL: String should have at least 1 character"),
    ("temporal-address-not-host-port", ["run", "hi"],
     {**NO_SERVER, "TEMPORAL_ADDRESS": "not-an-address"}, 2,
     "TEMPORAL_ADDRESS='not-an-address' is not host:port"),
    ("temporal-unreachable-run", ["run", "hi"], NO_SERVER, 2,
     f"cannot reach Temporal at {UNREACHABLE}"),
    ("temporal-unreachable-runs", ["runs"], NO_SERVER, 2,
     f"cannot reach Temporal at {UNREACHABLE}"),
    ("temporal-bad-port", ["runs"], {**NO_SERVER, "TEMPORAL_ADDRESS": "localhost:99999"}, 2,
     "cannot reach Temporal at localhost:99999"),
    ("model-prices-negative", ["run", "hi"],
     {**NO_SERVER, "AGENT_MODEL_PRICES": '{"m": {"input_per_mtok": -1, "output_per_mtok": 1}}'},
     2, "invalid configuration: AGENT_MODEL_PRICES.m.input_per_mtok"),
    ("model-prices-not-json", ["run", "hi"], {**NO_SERVER, "AGENT_MODEL_PRICES": "notjson"}, 2,
     "AGENT_MODEL_PRICES"),
    ("keys-not-an-entry-run", ["run", "hi"],
     {**NO_SERVER, "REACTIVE_TEMPORAL_ENCRYPTION_KEYS": "nope"}, 2,
     "REACTIVE_TEMPORAL_ENCRYPTION_KEYS entry 1 is not KEY_ID:BASE64KEY"),
    ("keys-short-key-run", ["run", "hi"],
     {**NO_SERVER, "REACTIVE_TEMPORAL_ENCRYPTION_KEYS": f"k1:{SHORT_KEY}"}, 2,
     "the key for id 'k1' is 16 bytes; AES-256 needs exactly 32"),
    ("keys-not-base64-chat", ["chat", "hi"],
     {**NO_SERVER, "REACTIVE_TEMPORAL_ENCRYPTION_KEYS": "k1:!!!"}, 2,
     "the key for id 'k1' is not valid base64"),
    ("keys-duplicate-id-run", ["run", "hi"],
     {**NO_SERVER, "REACTIVE_TEMPORAL_ENCRYPTION_KEYS": f"k1:{GOOD_KEY},k1:{GOOD_KEY}"}, 2,
     "names key id 'k1' twice"),
    ("keys-bad-codec-server", ["codec-server"],
     {**NO_SERVER, "REACTIVE_TEMPORAL_ENCRYPTION_KEYS": "nope",
      "REACTIVE_TEMPORAL_CODEC_TOKEN": "a-long-enough-secret"}, 2,
     "REACTIVE_TEMPORAL_ENCRYPTION_KEYS entry 1 is not KEY_ID:BASE64KEY"),
    ("codec-server-no-keys", ["codec-server"], NO_SERVER, 2, "no encryption keys"),
    ("keys-bad-debrief", ["debrief", "run-x"],
     {**NO_SERVER, "REACTIVE_TEMPORAL_ENCRYPTION_KEYS": "nope"}, 2,
     "REACTIVE_TEMPORAL_ENCRYPTION_KEYS entry 1 is not KEY_ID:BASE64KEY"),
    ("keys-bad-runs", ["runs"], {**NO_SERVER, "REACTIVE_TEMPORAL_ENCRYPTION_KEYS": "nope"}, 2,
     "REACTIVE_TEMPORAL_ENCRYPTION_KEYS entry 1 is not KEY_ID:BASE64KEY"),
    # on the live server, no worker needed: the operation fails (exit 1)
    ("debrief-unknown-run", ["debrief", "run-nope-123"], LIVE, 1, "no run with id 'run-nope-123'"),
    ("debrief-sql-run-id", ["debrief", SQL], LIVE, 1, "no run with id"),
    ("export-unknown", ["export", "run-nope-123"], LIVE, 1, "no workflow with id 'run-nope-123'"),
    ("replay-unknown", ["replay", "run-nope-123"], LIVE, 1, "no workflow with id 'run-nope-123'"),
    ("rerun-unknown", ["rerun", "run-nope-123"], LIVE, 1, "no run with id 'run-nope-123'"),
    ("rerun-from-start-unknown", ["rerun", "run-nope-123", "--from-start"], LIVE, 1,
     "no run with id 'run-nope-123'"),
    ("agent-reset-no-entity", ["agent", "reset", "nobody-at-all"], LIVE, 1,
     "agent nobody-at-all's chat workflow (agent-nobody-at-all) does not exist: nothing to "
     "reset"),
    ("agent-reset-bad-name", ["agent", "reset", "bad name!"], NO_SERVER, 2,
     "invalid agent configuration: agent_id"),
    # run controls (issue 12): limits, approvals, cancel, watch
    ("run-token-budget-0", ["run", "hi", "--token-budget", "0"], NO_SERVER, 2,
     "Invalid value for '--token-budget': Input should be greater than or equal to 1"),
    ("run-cost-budget-0", ["run", "hi", "--cost-budget", "0"], NO_SERVER, 2,
     "Invalid value for '--cost-budget': must be more than 0, not 0"),
    ("run-cost-budget-negative", ["run", "hi", "--cost-budget", "-1"], NO_SERVER, 2,
     "Invalid value for '--cost-budget'"),
    # no budget at all (JSON writes inf as null), as with_budget(cost=inf) was
    ("run-cost-budget-inf", ["run", "hi", "--cost-budget", "inf"], NO_SERVER, 2,
     "Invalid value for '--cost-budget': must be a finite number, not inf (leave it out for "
     "no limit)"),
    ("run-timeout-0", ["run", "hi", "--timeout", "0"], NO_SERVER, 2,
     "Invalid value for '--timeout': must be more than 0, not 0"),
    ("run-timeout-past-a-year", ["run", "hi", "--timeout", "99999999999"], NO_SERVER, 2,
     "timeout_seconds: Input should be less than or equal to 31622400"),
    ("run-approval-timeout-0", ["run", "hi", "--approve", "calculator", "--approval-timeout",
     "0"], NO_SERVER, 2, "Invalid value for '--approval-timeout': must be more than 0"),
    # an empty session id was a new session (chat), or "session  has no messages" (exit 0)
    ("chat-empty-session", ["chat", "hi", "--session", ""], NO_SERVER, 2,
     "Invalid value for '--session': invalid session id ''"),
    ("session-history-empty-id", ["session", "history", ""], NO_SERVER, 2,
     "invalid session id ''"),
    ("deny-without-reason", ["deny", "run-nope-123"], NO_SERVER, 2,
     "a denial needs a reason: --reason TEXT"),
    ("watch-negative-offset", ["watch", "run-nope-123", "--from-offset", "-1"], NO_SERVER, 2,
     "Invalid value for '--from-offset'"),
    ("approvals-agent-quote", ["approvals", "--agent", "x'y"], NO_SERVER, 2,
     "Invalid value for '--agent': invalid agent name"),
    ("cancel-reason-too-long", ["cancel", "run-nope-123", "--reason", "x" * 501], NO_SERVER, 2,
     "the reason is 501 characters; the limit is 500"),
    ("cancel-unknown", ["cancel", "run-nope-123"], LIVE, 1, "no run with id 'run-nope-123'"),
    ("cancel-neither", ["cancel"], NO_SERVER, 2, "give a RUN_ID or --agent NAME (one of them)"),
    ("cancel-both", ["cancel", "run-x", "--agent", "a"], NO_SERVER, 2,
     "give a RUN_ID or --agent NAME (one of them)"),
    ("cancel-agent-quote", ["cancel", "--agent", "x'y"], NO_SERVER, 2,
     "Invalid value for '--agent': invalid agent name"),
    ("approve-unknown", ["approve", "run-nope-123"], LIVE, 1, "no run with id 'run-nope-123'"),
    ("deny-unknown", ["deny", "run-nope-123", "call-1", "--reason", "no"], LIVE, 1,
     "no run with id 'run-nope-123'"),
    ("watch-unknown", ["watch", "run-nope-123", "--json"], LIVE, 1,
     "no run with id 'run-nope-123'"),
    # numbers past what a timer takes: OverflowError tracebacks
    ("worker-graceful-shutdown-inf", ["worker", "--graceful-shutdown", "inf"], NO_SERVER, 2,
     "graceful_shutdown_seconds: Input should be a finite number"),
    ("worker-graceful-shutdown-huge", ["worker", "--graceful-shutdown", "1e300"], NO_SERVER, 2,
     "graceful_shutdown_seconds: Input should be less than or equal to 86400"),
    ("sticky-queue-timeout-inf", ["runs"],
     {**NO_SERVER, "REACTIVE_TEMPORAL_STICKY_QUEUE_TIMEOUT": "inf"}, 2,
     "REACTIVE_TEMPORAL_STICKY_QUEUE_TIMEOUT: Input should be a finite number"),
    # MCP headers are checked before anything is connected, and named without their values
    ("worker-mcp-header-unset-variable",
     ["worker", "--mcp", "docs=https://mcp.example/mcp", "--mcp-header",
      "docs=Authorization: Bearer ${NO_SUCH_TOKEN_VAR}"], NO_SERVER, 2,
     "--mcp-header for MCP server 'docs', header 'Authorization': environment variable "
     "NO_SUCH_TOKEN_VAR is not set"),
    ("worker-mcp-header-missing-file",
     ["worker", "--mcp", "docs=https://mcp.example/mcp", "--mcp-header",
      "docs=Authorization: Bearer ${file:/nonexistent/mcp-token}"], NO_SERVER, 2,
     "--mcp-header for MCP server 'docs', header 'Authorization': cannot read file "
     "/nonexistent/mcp-token (No such file or directory)"),
    ("dev-mcp-header-stdio-server",
     ["dev", "--mcp", "fs=python server.py", "--mcp-header", "fs=X-Api-Key: sk-literal-9"],
     NO_SERVER, 2, "it is a stdio server, which takes no headers"),
    ("worker-mcp-header-unknown-server",
     ["worker", "--mcp", "docs=https://mcp.example/mcp", "--mcp-header", "doc=X-Key: 1"],
     NO_SERVER, 2, "no --mcp server has that name (docs)"),
    # model endpoints' keys are read before anything is connected, named without their values
    ("worker-key-file-missing", ["worker"],
     {**NO_SERVER, "OPENAI_API_KEY_FILE": "/nonexistent/openai-key"}, 2,
     "OPENAI_API_KEY_FILE: cannot read file /nonexistent/openai-key (No such file or "
     "directory)"),
    ("dev-key-and-key-file", ["dev"],
     {**NO_SERVER, "OPENAI_API_KEY": "sk-1", "OPENAI_API_KEY_FILE": "/k"}, 2,
     "OPENAI_API_KEY and OPENAI_API_KEY_FILE are both set: set one"),
    ("worker-endpoint-key-unset", ["worker"],
     {**NO_SERVER, "AGENT_LLM_ENDPOINTS":
      '{"claude-*": {"base_url": "https://x.example/v1", "api_key_env": "NO_SUCH_KEY_VAR_2"}}'},
     2, "AGENT_LLM_ENDPOINTS['claude-*']: environment variable NO_SUCH_KEY_VAR_2 is not set"),
    ("llm-headers-reserved", ["run", "hi"], {**NO_SERVER, "AGENT_LLM_HEADERS": '{"Host": "x"}'},
     2, "invalid configuration: AGENT_LLM_HEADERS: Host is set by the worker itself"),
    # a namespace the server does not have: a traceback (RPCError) from most commands
    ("namespace-unknown-runs", ["runs", "--json"],
     {**LIVE, "TEMPORAL_NAMESPACE": "no-such-namespace"}, 1,
     "the Temporal server refused the request: Namespace no-such-namespace is not found"),
    ("namespace-unknown-run", ["run", "hi"], {**LIVE, "TEMPORAL_NAMESPACE": "no-such-namespace"},
     1, "Namespace no-such-namespace is not found"),
    # ...where these said "no run with id": the namespace's NOT_FOUND is not the run's
    ("namespace-unknown-debrief", ["debrief", "run-nope-123"],
     {**LIVE, "TEMPORAL_NAMESPACE": "no-such-namespace"}, 1,
     "Namespace no-such-namespace is not found"),
    ("namespace-unknown-export", ["export", "run-nope-123"],
     {**LIVE, "TEMPORAL_NAMESPACE": "no-such-namespace"}, 1,
     "Namespace no-such-namespace is not found"),
    # run and workflow ids no workflow can have: refused before any server is asked (exit 2),
    # where "" reached it ("WorkflowId is not set on request", exit 1), and an id past
    # Temporal's limit was sent, then echoed whole
    ("debrief-empty-run-id", ["debrief", ""], NO_SERVER, 2,
     "Invalid value for 'run_id': a run id is a non-empty string without NUL, not ''"),
    ("export-empty-id", ["export", ""], LIVE, 2,
     "Invalid value for 'workflow_id': a workflow id is a non-empty string without NUL"),
    ("watch-huge-run-id", ["watch", "w" * 100_000], NO_SERVER, 2,  # quoted cut, not whole
     f"a run id is 100,000 bytes; Temporal's ids are at most 1,000: '{'w' * 80}'… (100,000 "
     "characters)"),
    # agent filters take only a name an agent can have: `cancel --agent ""` cancelled every
    # running run of every agent; `lessons`/`costs` listed nothing (exit 0), or hung (100k)
    ("cancel-agent-empty", ["cancel", "--agent", ""], NO_SERVER, 2,
     "Invalid value for '--agent': invalid agent name ''"),
    ("lessons-agent-escape", ["lessons", "--agent", "\x1b]0;pwned\x07"], NO_SERVER, 2,
     "invalid agent name '\\x1b]0;pwned\\x07'"),
    # a traceback (ValueError raised outside the command's try)
    ("run-model-empty", ["run", "hi", "--model", ""], NO_SERVER, 2,
     "model must be a model's name, not ''"),
    # past a Postgres bigint: the driver's traceback
    ("lessons-limit-past-bigint", ["lessons", "--limit", "99999999999999999999"], NO_SERVER, 2,
     "Invalid value for '--limit': Input should be less than or equal to 100000"),
    # past a port: socket's OverflowError; a bind that failed: an AttributeError from
    # server_close that hid it; an origin no browser sends, printed raw in the banner
    ("codec-server-port-past-65535", ["codec-server", "--port", "70000"], NO_SERVER, 2,
     "Invalid value for '--port': Input should be less than or equal to 65535"),
    ("codec-server-unknown-host", ["codec-server", "--host", "nohost.invalid", "--port", "0"],
     {**NO_SERVER, "REACTIVE_TEMPORAL_ENCRYPTION_KEYS": f"k1:{GOOD_KEY}",
      "REACTIVE_TEMPORAL_CODEC_TOKEN": "a-long-enough-secret"}, 2,
     "cannot listen on nohost.invalid:0"),
    ("codec-server-origin-escape", ["codec-server", "--origin", "\x1b[2J"], NO_SERVER, 2,
     "Invalid value for '--origin': '\\x1b[2J' is not an origin"),
    # names the server refuses, named as the variable (they were exit 1, "the Temporal server
    # refused the request: missing task queue name")
    ("task-queue-empty", ["runs"], {**NO_SERVER, "TEMPORAL_TASK_QUEUE": ""}, 2,
     "invalid configuration: TEMPORAL_TASK_QUEUE: TEMPORAL_TASK_QUEUE is empty"),
    # argv bytes that are not UTF-8 (held as lone surrogates): a traceback from protobuf's
    # encoder, "'utf-8' codec can't encode…", or pydantic's "unable to parse raw data"
    ("export-id-not-utf8", ["export", "\udcff"], LIVE, 2, "argument 2 is not UTF-8 text"),
    # the run's own refusals, checked before connecting ("run … refused", exit 1, before)
    ("deny-reason-past-limit", ["deny", "run-nope-123", "--reason", "r" * 2_001], NO_SERVER,
     2, "the reason is 2001 characters; the limit is 2000"),
    ("approve-by-past-limit", ["approve", "run-nope-123", "--by", "b" * 201], NO_SERVER, 2,
     "--by is 201 characters; the limit is 200"),
    ("cancel-reason-not-utf8", ["cancel", "run-x", "--reason", "\udcfe"], NO_SERVER, 2,
     "the value of --reason is not UTF-8 text: '\\udcfe'"),
    # typed as a Path, "" was "." ("cannot read history file .: Is a directory")
    ("replay-file-empty", ["replay", "--file", ""], NO_SERVER, 2,
     "Invalid value for '--file': the path is empty: name a file"),
    # sent, and echoed whole by the run's "unknown call id" (exit 1)
    ("approve-huge-call-id", ["approve", "run-nope-123", "c" * 2_000], NO_SERVER, 2,
     f"unknown call id '{'c' * 80}'… (2,000 characters): no call waiting for approval has an "
     "id over 128 characters"),
    # clipped to 1,000 characters without a word, after connecting
    ("agent-reset-reason-past-limit", ["agent", "reset", "a1", "--reason", "r" * 100_000],
     NO_SERVER, 2, "the reason is 100,000 characters; the limit is 500"),
]  # fmt: skip


def _cli_params() -> list[Any]:
    return [case[0] for case in CLI_CASES]


@pytest.fixture(scope="module")
async def cli_results(
    h: Harness, workdir: Path, temporal_address: str, database_url: str
) -> dict[str, Any]:
    """Every CLI case, run concurrently; the table counts before and after them all (the
    worker `h` has created the tables)."""

    def expand(value: str) -> str:
        for name, real in (("temporal", temporal_address), ("db", database_url), ("dir", workdir)):
            value = value.replace("{" + name + "}", str(real))
        return value

    before = await table_contents(database_url)
    limit = asyncio.Semaphore(CLI_CONCURRENCY)

    async def one(case_id: str, args: list[str], env: dict[str, str]) -> CliResult:
        async with limit:
            return await starter_async(
                *[expand(a) if "{dir}" in a else a for a in args],
                env=cli_env(REACTIVE_TEMPORAL_DATA_DIR=str(workdir / "data"),
                            **{k: expand(v) for k, v in env.items()}),
                cwd=workdir,
                seconds=90,
            )  # fmt: skip

    results = await asyncio.gather(*(one(c[0], c[1], c[2]) for c in CLI_CASES))
    after = await table_contents(database_url)
    return {
        "results": dict(zip([c[0] for c in CLI_CASES], results, strict=True)),
        "before": before,
        "after": after,
        "tables_exist": await tables_exist(database_url),
    }


@pytest.mark.timeout(1200)  # the first case's setup runs every case (~100 CLI processes)
@pytest.mark.parametrize("case_id", _cli_params())
def test_cli_refuses_bad_input(case_id: str, cli_results: dict[str, Any]):
    _, args, _, code, message = next(c for c in CLI_CASES if c[0] == case_id)
    result = cli_results["results"][case_id]
    assert_refused(result, code, message, as_json="--json" in args)
    assert SHORT_KEY not in result.stderr  # errors never echo key material


def test_cli_bad_input_changed_nothing_stored(cli_results: dict[str, Any]):
    assert cli_results["after"] == cli_results["before"]
    assert cli_results["tables_exist"]


async def test_the_nothing_changed_check_sees_an_edited_row(h: Harness, database_url: str):
    """Not a row count: a row edited in place (same count) is a change."""
    agent_id = unique("bad-sentinel")
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            "INSERT INTO chat_sessions (agent_id, session_id, messages) VALUES (%s, 's', '[]')",
            (agent_id,),
        )
        try:
            before = await table_contents(database_url)
            await conn.execute(
                "UPDATE chat_sessions SET messages = '[{\"planted\": 1}]' WHERE agent_id = %s",
                (agent_id,),
            )
            after = await table_contents(database_url)
        finally:
            await conn.execute("DELETE FROM chat_sessions WHERE agent_id = %s", (agent_id,))
    assert len(after["chat_sessions"]) == len(before["chat_sessions"])
    assert after != before


# -- the CLI against the worker: chat refusals, rerun/debrief of the wrong kind of workflow -----


@pytest.fixture(scope="module")
async def worker_cli(
    h: Harness, llm: ScriptedLLM, workdir: Path, temporal_address: str, database_url: str
) -> dict[str, Any]:
    """Workflows the cases point at (a completed run, a failed run, an agent entity), then
    every worker-backed CLI case, run concurrently, with the table counts around them."""
    model = unique("bad-cli")
    llm.script(model, [Reply("FINAL ANSWER: 4"), Reply("hello")])
    agent_id = unique("bad-cli")
    completed = await h.agent(model, agent_id=agent_id, memory=False).run("2+2")
    await h.agent(model, agent_id=agent_id, memory=False).chat("hi")  # the entity exists
    failed = await h.agent(model, agent_id=agent_id, tools=["teleport"]).start("anything")
    with pytest.raises(WorkflowFailureError):
        await failed.result()
    env = cli_env(
        TEMPORAL_ADDRESS=temporal_address,
        TEMPORAL_TASK_QUEUE=h.task_queue,
        DATABASE_URL=database_url,
        AGENT_MODEL=model,
        REACTIVE_TEMPORAL_DATA_DIR=str(workdir / "data"),
    )
    entity = f"agent-{agent_id}"
    cases: dict[str, tuple[list[str], int, str]] = {
        "chat-empty-message": (["chat", "", "--agent", agent_id], 2, "message is empty"),
        "chat-blank-message": (["chat", " \n\t ", "--agent", agent_id], 2, "message is empty"),
        "chat-over-long-message": (
            ["chat", "y" * 20_001, "--agent", agent_id, "--json"], 2,
            "message is 20001 characters; the limit is 20000",
        ),
        "chat-bad-session-id": (
            ["chat", "hi", "--agent", agent_id, "--session", "bad id!"], 2,
            "invalid session id 'bad id!'",
        ),
        "chat-sql-session-id": (
            ["chat", "hi", "--agent", agent_id, "--session", SQL_SESSIONS], 2,
            "invalid session id",
        ),
        "session-end-bad-id": (
            ["session", "end", "bad id!", "--agent", agent_id], 2, "invalid session id"
        ),
        "session-repl-bad-id": (
            ["session", "--agent", agent_id, "--id", "bad id!"], 2, "invalid session id"
        ),
        "rerun-completed-run": (
            ["rerun", completed.run_id, "--json"], 1,
            f"cannot rerun {completed.run_id}: this run has no failed step",
        ),
        "debrief-failed-run": (
            ["debrief", failed.id], 1, "failed before it could be debriefed"
        ),
        "debrief-agent-entity": (["debrief", entity], 1, entity),
        "rerun-agent-entity": (["rerun", entity], 1, entity),
        "export-to-missing-directory": (
            ["export", completed.run_id, "-o", str(workdir / "missing" / "run.json")], 1,
            "cannot write",
        ),
        "export-to-a-directory": (
            ["export", completed.run_id, "-o", str(workdir)], 1, "Is a directory"
        ),
    }  # fmt: skip
    before = await table_contents(database_url)
    # A few at a time, each with the CLI cases' limit: eleven CLI processes starting at once
    # on a loaded two-core machine took 43 s each, and a tighter limit for some only made them
    # flaky (a hang still shows: it never ends).
    limit = asyncio.Semaphore(CLI_CONCURRENCY)

    async def one(args: list[str]) -> CliResult:
        async with limit:
            return await starter_async(*args, env=env, cwd=workdir, seconds=90)

    results = await asyncio.gather(*(one(args) for args, _, _ in cases.values()))
    after = await table_contents(database_url)
    return {
        "cases": cases,
        "workflows": [completed.run_id, failed.id, entity],
        "results": dict(zip(cases, results, strict=True)),
        "before": before,
        "after": after,
    }


WORKER_CLI_IDS = [
    "chat-empty-message", "chat-blank-message", "chat-over-long-message", "chat-bad-session-id",
    "chat-sql-session-id", "session-end-bad-id", "session-repl-bad-id", "rerun-completed-run",
    "debrief-failed-run", "debrief-agent-entity", "rerun-agent-entity",
    "export-to-missing-directory", "export-to-a-directory",
]  # fmt: skip


@pytest.mark.parametrize(
    "case_id",
    WORKER_CLI_IDS,
)
def test_cli_against_worker_refuses_bad_input(case_id: str, worker_cli: dict[str, Any]):
    args, code, message = worker_cli["cases"][case_id]
    assert_refused(worker_cli["results"][case_id], code, message, as_json="--json" in args)


async def test_cli_against_worker_changed_nothing_stored(worker_cli: dict[str, Any], h: Harness):
    assert worker_cli["after"] == worker_cli["before"]
    await assert_no_failed_tasks(h.client, *worker_cli["workflows"])


async def test_cli_session_end_of_unknown_session(
    h: Harness, workdir: Path, temporal_address: str, database_url: str
):
    agent_id = unique("bad-end")
    env = cli_env(
        TEMPORAL_ADDRESS=temporal_address, TEMPORAL_TASK_QUEUE=h.task_queue,
        DATABASE_URL=database_url, REACTIVE_TEMPORAL_DATA_DIR=str(workdir / "data"),
    )  # fmt: skip
    before = await table_contents(database_url)
    result = await starter_async(
        "session", "end", "never-opened", "--agent", agent_id, env=env, cwd=workdir
    )
    after = await table_contents(database_url)
    assert after == before
    # ending a session nobody used succeeds (issue 11), and stores nothing
    assert result.code == 0, result.describe()
    assert "session never-opened saved (0 messages) and ended" in result.stdout + result.stderr


# -- the Python API ----------------------------------------------------------------------------

BUILDER_CASES: list[tuple[str, Callable[[AgentBuilder], object], str]] = [
    ("unknown-provider", lambda b: b.with_provider("anthropic", model="claude"),
     "unknown provider 'anthropic': use 'openai'"),
    ("bad-agent-name", lambda b: b.with_name("bad name!").config(),
     "invalid agent configuration: agent_id: String should match pattern"),
    ("sql-agent-name", lambda b: b.with_name(SQL).config(), "agent_id: String should match"),
    ("empty-agent-name", lambda b: b.with_name("").config(),
     "agent_id: String should have at least 1 character"),
    ("max-iterations-0", lambda b: b.with_reasoning(max_iterations=0).config(),
     "max_iterations: Input should be greater than or equal to 1"),
    ("max-iterations-10001", lambda b: b.with_reasoning(max_iterations=10_001).config(),
     "max_iterations: Input should be less than or equal to 10000"),
    ("empty-model", lambda b: b.with_provider(model=""), "model must be a model's name"),
    ("huge-debrief-model", lambda b: b.with_debrief_model("m" * 5_000_000).config(),
     "invalid agent configuration: debrief_model is over 200 characters"),
    ("thousands-of-tools", lambda b: b.with_tools([f"t{i}" for i in range(1_000)]).config(),
     "tools lists 1,000 names; the limit is 256"),
    ("a-huge-tool-name", lambda b: b.with_tools(approve=["x" * 3_000_000]).config(),
     "approve_tools has a name over 128 characters"),
    ("blank-model", lambda b: b.with_provider(model="   "), "model must be a model's name"),
]  # fmt: skip


@pytest.mark.parametrize("case", BUILDER_CASES, ids=[c[0] for c in BUILDER_CASES])
def test_builder_refuses_bad_configuration(case, settings: Settings):
    _, apply, message = case
    with pytest.raises(ValueError, match=re.escape(message)):
        apply(ReactiveAgents.create().with_settings(settings))


def test_builder_refuses_a_string_where_it_takes_names(settings: Settings):
    """`with_tools("calculator")` kept ['c', 'a', 'l', …]: the run failed later naming tools
    "a, c, l, o, r, t, u"."""
    builder = ReactiveAgents.create().with_settings(settings)
    with pytest.raises(TypeError, match="names takes a list of names, not the string 'calc"):
        builder.with_tools("calculator")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="approve takes a list"):
        builder.with_tools(["calculator"], approve="calculator")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="required_tools takes a list"):
        builder.with_reasoning(required_tools="calculator")  # type: ignore[arg-type]
    assert builder.with_tools(["calculator"]).config().tools == ["calculator"]


SETTINGS_CASES = [
    ("database-url-mysql", {"database_url": "mysql://x"},
     "DATABASE_URL='mysql://x' is not a PostgreSQL URL"),
    ("temporal-address", {"temporal_address": "not-an-address"},
     "TEMPORAL_ADDRESS='not-an-address' is not host:port"),
    ("model-prices", {"model_prices": {"m": {"input_per_mtok": -1, "output_per_mtok": 0}}},
     "greater than or equal to 0"),
    # "" reached the server ("missing task queue name", exit 1); past its limit as
    # "taskQueue length exceeds limit"
    ("task-queue-empty", {"temporal_task_queue": ""}, "TEMPORAL_TASK_QUEUE is empty"),
    ("namespace-blank", {"temporal_namespace": "  "}, "TEMPORAL_NAMESPACE is empty"),
    ("task-queue-past-limit", {"temporal_task_queue": "q" * 1_001},
     "TEMPORAL_TASK_QUEUE is 1,001 bytes; Temporal takes at most 1,000"),
    ("task-queue-escape", {"temporal_task_queue": "q\x1b[2J"},
     "TEMPORAL_TASK_QUEUE='q\\x1b[2J' holds control characters"),
]  # fmt: skip


@pytest.mark.parametrize("case", SETTINGS_CASES, ids=[c[0] for c in SETTINGS_CASES])
def test_settings_refuse_bad_configuration(case):
    _, values, message = case
    with pytest.raises(ValidationError, match=re.escape(message)):
        Settings(**values)


async def test_build_refuses_unreachable_temporal_and_bad_keys(
    settings: Settings, temporal_address: str, database_url: str
):
    before = await table_contents(database_url)
    unreachable = settings.model_copy(update={"temporal_address": UNREACHABLE})
    with pytest.raises(StackError, match=re.escape(f"cannot reach Temporal at {UNREACHABLE}")):
        await ReactiveAgents.create().with_settings(unreachable).build()
    for keys, message in [
        ("nope", "entry 1 is not KEY_ID:BASE64KEY"),
        (f"k1:{SHORT_KEY}", "is 16 bytes; AES-256 needs exactly 32"),
    ]:
        bad = settings.model_copy(
            update={"temporal_address": temporal_address, "encryption_keys": keys}
        )
        with pytest.raises(ValueError, match=re.escape(message)) as refused:
            await ReactiveAgents.create().with_settings(bad).build()
        assert SHORT_KEY not in str(refused.value)
    assert await table_contents(database_url) == before


RUN_CASES: list[tuple[str, str, dict[str, Any], str]] = [
    ("empty-task", "", {}, "invalid run: task: String should have at least 1 character"),
    ("oversized-task", "x" * 100_001, {}, "task: String should have at most 100000 characters"),
    ("max-iterations-0", "hi", {"max_iterations": 0},
     "invalid run: max_iterations: Input should be greater than or equal to 1"),
    ("max-iterations-10001", "hi", {"max_iterations": 10_001},
     "max_iterations: Input should be less than or equal to 10000"),
    ("required-tools-1000", "hi", {"required_tools": [f"t{i}" for i in range(1_000)]},
     "required_tools lists 1,000 names; the limit is 256"),
]  # fmt: skip


@pytest.mark.parametrize("case", RUN_CASES, ids=[c[0] for c in RUN_CASES])
async def test_run_refuses_bad_input_before_starting(
    case, h: Harness, llm: ScriptedLLM, database_url: str
):
    _, task, options, message = case
    model = llm.script(unique("bad-run"), [Reply("FINAL ANSWER: no")])
    agent = h.agent(model, agent_id=unique("bad-run"))
    before = await table_contents(database_url)
    with pytest.raises(ValueError, match=re.escape(message)):
        await agent.run(task, **options)
    assert await table_contents(database_url) == before
    assert llm.requests.get(model, []) == []  # nothing reached the model


RUN_ID_CASES: list[tuple[str, Callable[[Agent], Awaitable[object]], str]] = [
    # past Temporal's id limit: sent to the server anyway (its RPCError, not a ValueError)
    ("result-past-the-limit", lambda a: a.result("r" * 1_001),
     "a run id is 1,001 bytes; Temporal's ids are at most 1,000"),
    # protobuf's "'utf-8' codec can't encode character '\udcff'…"
    ("cancel-lone-surrogate", lambda a: a.cancel("run-\udcff"),
     "a run id must be valid UTF-8 text; 'run-\\udcff'"),
    ("approve-bytes", lambda a: a.approve(b"run-x"),  # type: ignore[arg-type]
     "a run id is a string, not bytes"),
]  # fmt: skip


@pytest.mark.parametrize("case", RUN_ID_CASES, ids=[c[0] for c in RUN_ID_CASES])
async def test_run_ids_no_run_can_have_are_refused(case, h: Harness, llm: ScriptedLLM):
    _, attempt, message = case
    agent = h.agent(llm.script(unique("bad-run-id"), [Reply("FINAL ANSWER: no")]))
    with pytest.raises(ValueError, match=re.escape(message)):
        await attempt(agent)


async def test_cancel_reason_of_the_wrong_type(h: Harness, llm: ScriptedLLM):
    agent = h.agent(llm.script(unique("bad-reason"), [Reply("FINAL ANSWER: no")]))
    with pytest.raises(TypeError, match="a cancel's reason is a string, not int"):
        await agent.cancel("run-nope-123", reason=5)  # type: ignore[arg-type]


async def test_cancel_running_refuses_a_name_no_agent_has(h: Harness, llm: ScriptedLLM):
    """An agent name of "" was no filter: every running run of every agent was cancelled."""
    model = llm.script(unique("bad-bulk"), [Reply(None, [call("calculator", expression="1+1")])])
    agent = h.agent(model, agent_id=unique("bad-bulk"), memory=False, approve_tools=["all"])
    handle = await agent.start("wait for an approval")
    try:
        with pytest.raises(ValueError, match="invalid agent name ''"):
            await cancel_running(h.client, "")
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
    finally:
        await terminate_quietly(h.client, handle.id)


async def test_run_refuses_blank_task(h: Harness, llm: ScriptedLLM, database_url: str):
    agent = h.agent(llm.script(unique("bad-blank"), [Reply("FINAL ANSWER: ?")]), memory=False)
    before = await table_contents(database_url)
    handle = None
    try:
        with pytest.raises(ValueError, match="task"):
            handle = await agent.start(" \n\t ")
    finally:
        if handle is not None:
            await terminate_quietly(h.client, handle.id)
    assert await table_contents(database_url) == before


async def test_run_with_nul_byte_in_task(h: Harness, llm: ScriptedLLM, database_url: str):
    model = llm.script(unique("bad-nul"), [Reply("FINAL ANSWER: a b")])
    agent = h.agent(model, agent_id=unique("bad-nul"), memory=False)
    before = await table_contents(database_url)
    try:
        handle = await agent.start("a\x00b")
    except ValueError as refused:  # refused before anything is stored: right
        assert "NUL" in str(refused)
        assert await table_contents(database_url) == before
        return
    try:  # or accepted and handled: the run completes
        result = await within(agent.result(handle), HUNG_SECONDS, h.client, handle.id)
        assert result.success
        await assert_no_failed_tasks(h.client, handle.id)
    finally:
        await terminate_quietly(h.client, handle.id)


async def test_unknown_tools_in_the_agent_configuration(
    h: Harness, llm: ScriptedLLM, database_url: str
):
    model = llm.script(unique("bad-tools"), [Reply("FINAL ANSWER: no")], repeat_last=True)
    before = await table_contents(database_url)
    for config in ({"tools": ["teleport"]}, {"required_tools": ["teleport"]}):
        agent = h.agent(model, agent_id=unique("bad-tools"), **config)
        with pytest.raises(AgentRunError, match="names tools this worker does not have: teleport"):
            await agent.run("Go to Mars")
    assert await table_contents(database_url) == before
    assert llm.requests.get(model, []) == []


async def test_sql_metacharacters_in_a_task_are_stored_verbatim(
    h: Harness, llm: ScriptedLLM, database_url: str
):
    task = f"Look up {SQL} and also \"; DELETE FROM run_messages; -- \\' $$ %s %(x)s"
    model = llm.script(unique("bad-sql"), [Reply(f"FINAL ANSWER: {SQL}")])
    agent = h.agent(model, agent_id=unique("bad-sql"))
    before = await table_contents(database_url)
    result = await agent.run(task)
    assert result.success and result.output == SQL
    await result.debrief_rich()  # persisted: the debrief row and its lessons are written
    rows = await fetch(
        database_url,
        "SELECT content FROM run_messages WHERE run_id = %s AND role = 'user' ORDER BY seq",
        (result.run_id,),
    )
    assert rows[0][0] == task
    debrief = await fetch(
        database_url, "SELECT task_prompt, output FROM agent_debriefs WHERE run_id = %s",
        (result.run_id,),
    )  # fmt: skip
    assert debrief == [(task, SQL)]
    assert await tables_exist(database_url)
    await assert_no_failed_tasks(h.client, result.run_id)
    after = await table_contents(database_url)
    assert rows_added(before, after, "run_messages") == 3  # system, task, answer
    assert rows_added(before, after, "agent_debriefs") == 1
    assert after["chat_sessions"] == before["chat_sessions"]


async def test_model_reply_with_a_nul_byte(h: Harness, llm: ScriptedLLM):
    model = llm.script(unique("bad-nul-reply"), [Reply("FINAL ANSWER: a\x00b")], repeat_last=True)
    agent = h.agent(model, agent_id=unique("bad-nul-reply"), memory=False)
    handle = await agent.start("Say a, NUL, b")
    try:
        result = await within(agent.result(handle), HUNG_SECONDS, h.client, handle.id)
        assert result.success and result.output.replace("\x00", "").replace("\ufffd", "") == "ab"
        await assert_no_failed_tasks(h.client, handle.id)
    finally:
        await terminate_quietly(h.client, handle.id)


# -- the tools: what a model may send them ------------------------------------------------------


async def test_model_emitted_bad_tool_calls_become_clear_observations(
    h: Harness, llm: ScriptedLLM, settings: Settings, database_url: str, tmp_path: Path
):
    d = unique("ws")
    root = settings.workspace
    (root / d).mkdir(parents=True)
    outside = tmp_path / "outside.txt"
    outside.write_text("original")
    (root / d / "etc-link").symlink_to("/etc")
    (root / d / "passwd-link").symlink_to("/etc/passwd")
    (root / d / "out-link").symlink_to(outside)
    escape = root.parent / f"escape-{d}.txt"
    table: list[tuple[str, Any, str]] = [
        ("traversal", call("file_read", path="../../etc/passwd"),
         "path '../../etc/passwd' is outside the workspace"),
        ("absolute", call("file_read", path="/etc/passwd"), "'/etc/passwd' is outside"),
        ("symlinked-dir", call("file_read", path=f"{d}/etc-link/passwd"), "is outside"),
        ("symlinked-file", call("file_read", path=f"{d}/passwd-link"), "is outside"),
        ("write-traversal", call("file_write", path=f"../escape-{d}.txt", content="x"),
         "is outside the workspace"),
        ("write-through-symlink", call("file_write", path=f"{d}/out-link", content="pwned"),
         "is outside the workspace"),
        ("nul-in-path", call("file_read", path="notes\x00.txt"), "contains a NUL byte"),
        ("empty-path", call("file_read", path=""), "path is empty"),
        ("wrong-type", call("calculator", expression=5),
         "invalid arguments for calculator: expression: Input should be a valid string"),
        ("path-wrong-type", call("file_read", path=["a"]), "path: Input should be a valid string"),
        ("missing-argument", call("calculator"), "expression: Field required"),
        ("extra-key", call("calculator", expression="1+1", shell="rm -rf /"),
         "shell: Extra inputs are not permitted"),
        ("not-json", call("calculator", raw_arguments="expression=1+1"),
         "arguments are not valid JSON"),
        ("json-array", call("calculator", raw_arguments="[1, 2]"),
         "arguments must be a JSON object"),
        ("code-injection", call("calculator", expression="__import__('os').system('id')"),
         "unsupported element in expression"),
        ("huge-exponent", call("calculator", expression="9**99999"),
         "exponent 99999 is too large"),
        ("file-url", call("http_get", url="file:///etc/passwd"),
         "only http:// and https:// URLs can be fetched"),
        ("zero-bytes", call("http_get", url="http://127.0.0.1:1/", max_bytes=0),
         "max_bytes: Input should be greater than or equal to 1"),
        ("unknown-zone", call("current_time", timezone="Mars/Olympus"),
         "unknown time zone 'Mars/Olympus'"),
        ("zone-traversal", call("current_time", timezone="../../etc/passwd"),
         "unknown time zone"),
        ("unknown-tool", call("teleport", to="Mars"), "unknown tool 'teleport'"),
        ("sql-in-arguments", call("file_read", path=f"{SQL}.txt"), "no file at"),
    ]  # fmt: skip
    calls = [c for _, c, _ in table]
    replies = [Reply(None, calls[i : i + 8]) for i in range(0, len(calls), 8)]  # under the cap
    model = llm.script(unique("bad-calls"), [*replies, Reply("FINAL ANSWER: all refused")])
    agent = h.agent(model, agent_id=unique("bad-calls"), memory=False, max_parallel_tools=8)
    before = await table_contents(database_url)
    result = await agent.run("Try everything you should not")
    assert result.terminated_by == "final_answer" and result.output == "all refused"
    observations = await fetch(
        database_url,
        "SELECT content FROM run_messages WHERE run_id = %s AND role = 'tool' ORDER BY seq",
        (result.run_id,),
    )
    assert len(observations) == len(table)
    problems = [
        f"{case}: {content!r} lacks {message!r}"
        for (case, _, message), (content,) in zip(table, observations, strict=True)
        if not (content.startswith("[Tool error:") and message in content)
    ]
    assert not problems, "\n".join(problems)
    assert not any("root:" in content for (content,) in observations)  # /etc/passwd not read
    assert not escape.exists() and outside.read_text() == "original"
    await assert_no_failed_tasks(h.client, result.run_id)
    after = await table_contents(database_url)
    # system, task, each reply, each observation, the answer
    assert rows_added(before, after, "run_messages") == 2 + len(replies) + len(table) + 1
    assert {t: after[t] for t in TABLES[1:]} == {t: before[t] for t in TABLES[1:]}
    assert await tables_exist(database_url)


async def test_tool_output_with_a_nul_byte_is_handled(
    h: Harness, llm: ScriptedLLM, settings: Settings, database_url: str
):
    """A file holding a NUL byte: the run goes on; the model reads either the content (NUL
    replaced) or an error naming the NUL; nothing garbled is stored."""
    name = f"{unique('nul')}.dat"
    settings.workspace.mkdir(parents=True, exist_ok=True)
    (settings.workspace / name).write_bytes(b"left\x00right")
    model = llm.script(
        unique("bad-nul-file"),
        [Reply(None, [call("file_read", path=name)]), Reply("FINAL ANSWER: read it")],
    )
    agent = h.agent(model, agent_id=unique("bad-nul-file"), memory=False)
    result = await agent.run("Read the file")
    assert result.success
    rows = await fetch(
        database_url,
        "SELECT content FROM run_messages WHERE run_id = %s AND role = 'tool'",
        (result.run_id,),
    )
    (content,) = rows[0]
    assert ("NUL" in content and content.startswith("[Tool error:")) or (
        "left" in content and "right" in content
    ), content
    await assert_no_failed_tasks(h.client, result.run_id)


# -- chat: the update's validator ----------------------------------------------------------------


@dataclass
class ChatSetup:
    agent: Agent
    session: Session
    ended: Session
    model: str


@pytest.fixture(scope="module")
async def chat_setup(h: Harness, llm: ScriptedLLM) -> ChatSetup:
    model = llm.script(unique("bad-chat"), [Reply("noted")], repeat_last=True)
    agent = h.agent(model, agent_id=unique("bad-chat"), memory=False)
    session = agent.session(unique("open"))
    await session.chat("hello")
    ended = agent.session(unique("ended"))
    await ended.chat("bye")
    await ended.end()
    return ChatSetup(agent, session, ended, model)


def raw(setup: ChatSetup, session_id: str, message: str = "hi") -> Awaitable[Any]:
    """The chat update itself, without the client's open-first convenience."""
    return setup.agent.entity.chat(ChatRequest(message=message, session_id=session_id))


CHAT_CASES: list[tuple[str, Callable[[ChatSetup], Awaitable[Any]], str]] = [
    ("empty-message", lambda s: s.session.chat(""), "message is empty"),
    ("blank-message", lambda s: s.session.chat(" \n\t "), "message is empty"),
    ("over-long-message", lambda s: s.session.chat("x" * 20_001),
     "message is 20001 characters; the limit is 20000"),
    ("over-long-default-session", lambda s: s.agent.chat("x" * 20_001), "the limit is 20000"),
    ("max-iterations-0", lambda s: s.session.chat("calculate 1+1", max_iterations=0),
     "max_iterations must be between 1 and 50"),
    ("max-iterations-51", lambda s: s.session.chat("calculate 1+1", max_iterations=51),
     "max_iterations must be between 1 and 50"),
    ("max-iterations-negative", lambda s: s.agent.chat("hi", max_iterations=-1),
     "max_iterations must be between 1 and 50"),
    ("never-opened-session", lambda s: raw(s, "never-opened"),
     "unknown session 'never-opened'; open it first"),
    ("ended-session", lambda s: raw(s, s.ended.id), "has ended; open it again to resume it"),
    ("nul-session-id-update", lambda s: raw(s, "a\x00b"), "unknown session"),
    ("sql-session-id-update", lambda s: raw(s, SQL_SESSIONS), "unknown session"),
    ("bad-session-id", lambda s: s.agent.session("bad id!").chat("hi"),
     "invalid session id 'bad id!'"),
    ("nul-session-id", lambda s: s.agent.session("a\x00b").chat("hi"), "invalid session id"),
    ("sql-session-id", lambda s: s.agent.session(SQL_SESSIONS).chat("hi"), "invalid session id"),
    ("long-session-id", lambda s: s.agent.session("s" * 129).chat("hi"),
     "at most 128 characters"),
    ("end-bad-session-id", lambda s: s.agent.session("bad id!").end(), "invalid session id"),
    ("newline-session-id", lambda s: s.agent.session("sess\n").chat("hi"), "invalid session id"),
]  # fmt: skip


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, id=c[0]) for c in CHAT_CASES],
)
async def test_chat_update_refuses_bad_input(
    case, chat_setup: ChatSetup, llm: ScriptedLLM, database_url: str
):
    _, attempt, message = case
    history = await chat_setup.session.history()
    default_history = await chat_setup.agent.session("default").history()
    ended_history = await chat_setup.ended.history()  # read back from Postgres
    requests = len(llm.requests[chat_setup.model])
    before = await table_contents(database_url)
    with pytest.raises(ChatError, match=re.escape(message)):
        await attempt(chat_setup)
    assert await chat_setup.session.history() == history
    assert await chat_setup.agent.session("default").history() == default_history
    assert [m.content for m in ended_history] == ["bye", "noted"]
    assert await chat_setup.ended.history() == ended_history
    assert len(llm.requests[chat_setup.model]) == requests  # no LLM call was made
    assert await table_contents(database_url) == before
    entity = chat_setup.agent.entity
    await assert_no_failed_tasks(entity.client, entity.workflow_id)


async def test_sql_metacharacters_in_chat_are_stored_verbatim(
    h: Harness, llm: ScriptedLLM, database_url: str
):
    model = llm.script(unique("bad-chat-sql"), [Reply(SQL_SESSIONS), Reply("ok")])
    agent = h.agent(model, agent_id=unique("bad-chat-sql"), memory=False)
    session = agent.session(unique("sql"))
    reply = await session.chat(f"What does {SQL_SESSIONS} do?", use_tools=False)
    assert reply.message == SQL_SESSIONS
    await agent.chat(SQL, use_tools=False)  # the default session too
    saved = await session.end()
    assert [m.content for m in saved] == [f"What does {SQL_SESSIONS} do?", SQL_SESSIONS]
    rows = await fetch(
        database_url,
        "SELECT content FROM chat_messages WHERE agent_id = %s AND session_id = %s"
        " ORDER BY position",
        (agent.name, session.id),
    )
    assert [r[0] for r in rows] == [f"What does {SQL_SESSIONS} do?", SQL_SESSIONS]
    default = await agent.session("default").history()
    assert [m.content for m in default] == [SQL, "ok"]
    assert await tables_exist(database_url)
    await assert_no_failed_tasks(h.client, agent.entity.workflow_id)


async def test_chat_message_with_a_nul_byte(h: Harness, llm: ScriptedLLM, database_url: str):
    model = llm.script(unique("bad-chat-nul"), [Reply("ok")], repeat_last=True)
    agent = h.agent(model, agent_id=unique("bad-chat-nul"), memory=False)
    session = agent.session(unique("nul"))
    await session.open()
    before = await table_contents(database_url)
    try:
        try:
            await session.chat("hello\x00world")
        except ChatError as refused:  # refused before anything is recorded: right
            assert "NUL" in str(refused)
            assert await session.history() == []
            assert await table_contents(database_url) == before
            return
        # or accepted, and then the session can be saved
        saved = await within(session.end(), HUNG_SECONDS, h.client, agent.entity.workflow_id)
        assert len(saved) == 2
        rows = await fetch(
            database_url,
            "SELECT content FROM chat_messages WHERE agent_id = %s AND session_id = %s"
            " ORDER BY position",
            (agent.name, session.id),
        )
        assert rows[0][0].replace("\x00", "").replace("\ufffd", "") == "helloworld"
        await assert_no_failed_tasks(h.client, agent.entity.workflow_id)
    finally:
        await terminate_quietly(h.client, agent.entity.workflow_id)
