"""What the adversarial tables share: a worker, store snapshots, task-failure checks, and
local HTTP servers on 127.0.0.1 whose every request is recorded."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from psycopg.rows import dict_row
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from reactive_temporal.config import Settings
from tests.workflow.conftest import Harness, running_worker

if TYPE_CHECKING:
    from reactive_temporal.mcp_tools import McpToolbox
    from reactive_temporal.tools import Tool

pytestmark = pytest.mark.workflow

PREFIX = "adv-"
"""Every agent and run this suite creates is named with it; a store row that appears during a
case and names another prefix belongs to some other test's background work, not to the case."""


def unique(name: str) -> str:
    return f"{PREFIX}{name}-{uuid.uuid4().hex[:8]}"


# -- the store, by content ----------------------------------------------------------------------

Row = tuple[Any, ...]


@dataclass
class StoreSnapshot:
    """Every row of every table of the project's schema, keyed by primary key."""

    tables: dict[str, dict[Row, dict[str, Any]]]

    @classmethod
    async def take(cls, database_url: str) -> StoreSnapshot:
        tables: dict[str, dict[Row, dict[str, Any]]] = {}
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            cur = await conn.execute(
                "SELECT c.relname, array_agg(a.attname ORDER BY k.ord) "
                "FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) "
                "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum "
                "WHERE i.indisprimary AND n.nspname = 'public' GROUP BY c.relname"
            )
            keys = {name: list(columns) for name, columns in await cur.fetchall()}
            for name, key_columns in sorted(keys.items()):
                rows = conn.cursor(row_factory=dict_row)
                await rows.execute(f'SELECT * FROM "{name}"')  # names from the catalog
                tables[name] = {
                    tuple(row[c] for c in key_columns): row for row in await rows.fetchall()
                }
        return cls(tables)

    def changes_since(
        self, before: StoreSnapshot, *, own: Callable[[dict[str, Any]], bool]
    ) -> list[str]:
        """What changed, as readable lines: rows edited or removed, and added rows that are
        not the case's own (`own(row)`) while they carry this suite's prefix. An agent's
        last run (`agent_last_runs`, one row per agent) moves with every run of that agent:
        its edits are expected for the case's own agents."""
        problems: list[str] = []
        for name in sorted(set(before.tables) | set(self.tables)):
            old, new = before.tables.get(name), self.tables.get(name)
            if old is None or new is None:
                problems.append(f"table {name} {'appeared' if old is None else 'disappeared'}")
                continue
            for key, row in old.items():
                if key not in new:
                    problems.append(f"{name}{key} was deleted")
                elif new[key] != row and not (name in MOVES_WITH_RUNS and own(new[key])):
                    changed = sorted(c for c in row if row[c] != new[key].get(c))
                    problems.append(f"{name}{key} changed: {changed}")
            for key, row in new.items():
                if key not in old and not own(row) and _ours(row):
                    problems.append(f"{name}{key} was added, and is not the case's own")
        return problems


MOVES_WITH_RUNS = {"agent_last_runs"}
"""Tables whose row for an agent each of its runs replaces."""


def _ours(row: dict[str, Any]) -> bool:
    values = (row.get("run_id"), row.get("agent_id"))
    return any(isinstance(v, str) and v.startswith((PREFIX, f"run-{PREFIX}")) for v in values)


def owned_by(*ids: str) -> Callable[[dict[str, Any]], bool]:
    """Rows of these runs or agents (ids or id prefixes)."""

    def own(row: dict[str, Any]) -> bool:
        values = [row.get("run_id"), row.get("agent_id")]
        return any(isinstance(v, str) and v.startswith(ids) for v in values)

    return own


async def fetch(database_url: str, query: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(query, params)  # type: ignore[arg-type]
        return await cur.fetchall()


async def observations(database_url: str, run_id: str) -> list[tuple[str, str]]:
    """(tool name, observation) of every tool message of a run, in order."""
    rows = await fetch(
        database_url,
        "SELECT name, content FROM run_messages WHERE run_id = %s AND role = 'tool' ORDER BY seq",
        (run_id,),
    )
    return [(name, content) for name, content in rows]


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Callable[..., Any]]:
    """`await store()` is a snapshot of the test database."""

    async def take() -> StoreSnapshot:
        return await StoreSnapshot.take(database_url)

    yield take


# -- workflow tasks ------------------------------------------------------------------------------


async def largest_event_bytes(client: Client, workflow_id: str) -> int:
    """The largest event of the workflow's (latest run's) history, serialized: it bounds
    every payload in it (an activity's input or result, a signal, the run's result)."""
    largest = 0
    async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
        largest = max(largest, event.ByteSize())
    return largest


async def started_attempts(client: Client, run_id: str, activity: str) -> list[int]:
    """The attempt each `activity` of the run started on, in order."""
    scheduled: dict[int, str] = {}
    attempts: list[int] = []
    async for event in client.get_workflow_handle(run_id).fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            scheduled[event.event_id] = attrs.activity_type.name
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started = event.activity_task_started_event_attributes
            if scheduled.get(started.scheduled_event_id) == activity:
                attempts.append(started.attempt)
    return attempts


async def failed_tasks(client: Client, workflow_id: str) -> list[str]:
    """The failure messages of every failed workflow task in the workflow's history (all runs)."""
    found: list[str] = []
    handle = client.get_workflow_handle(workflow_id)
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            found.append(event.workflow_task_failed_event_attributes.failure.message)
    return found


async def assert_no_failed_tasks(client: Client, *workflow_ids: str) -> None:
    for workflow_id in workflow_ids:
        failures = await failed_tasks(client, workflow_id)
        assert not failures, f"{workflow_id}: workflow task failed: {failures}"


# -- MCP tools -----------------------------------------------------------------------------------


async def eventually(check: Callable[[], bool], seconds: float = 60.0) -> None:
    """Waits until `check()` holds, failing the test after `seconds` (a hang guard: a loaded
    machine is slow, not stuck)."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"still not true after {seconds:g}s"
        await asyncio.sleep(0.05)


async def within(seconds: float, tool: Tool, **arguments: Any) -> Any:
    """Call `tool` as `run_tool` does: under `asyncio.timeout`, which cancels it."""
    async with asyncio.timeout(seconds):
        return await tool(**arguments)


def by_name(toolbox: McpToolbox) -> dict[str, Tool]:
    """A toolbox's tools by name (`server/tool`)."""
    return {t.name: t for t in toolbox.tools}


# -- a worker for the module ---------------------------------------------------------------------


@pytest.fixture(scope="module")
async def adv(client: Client, settings: Settings) -> AsyncIterator[Harness]:
    """One worker for the module, with the SDK's default workflow cache (the tables' runs
    have many steps; tests/workflow replays every task)."""
    async with running_worker(client, settings, max_cached_workflows=None) as harness:
        yield harness


# -- local HTTP servers --------------------------------------------------------------------------

Route = Callable[[BaseHTTPRequestHandler], None]


@dataclass
class LocalServer:
    """An HTTP server on 127.0.0.1 answering GET from `routes`, recording every request."""

    routes: dict[str, Route] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server.requests.append(self.path)
                route = server.routes.get(self.path.split("?", 1)[0])
                if route is None:
                    send(self, 404, b"no such route")
                    return
                try:
                    route(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client stopped reading: what a bounded reader does

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def host_port(self) -> str:
        return f"127.0.0.1:{self.port}"

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def send(
    handler: BaseHTTPRequestHandler,
    status: int,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
) -> None:
    handler.send_response(status)
    headers = {"Content-Length": str(len(body)), **(headers or {})}
    for name, value in headers.items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(body)


@pytest.fixture
def local_server() -> Iterator[Callable[..., LocalServer]]:
    """`local_server(routes)` starts a server; all are closed after the test."""
    started: list[LocalServer] = []

    def start(routes: dict[str, Route] | None = None) -> LocalServer:
        server = LocalServer(dict(routes or {}))
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()
