"""How a worker starts, runs and stops: the same for `starter.py worker` (and `worker.py`),
`starter.py dev`, and the worker an in-process runtime hosts.

- `WorkerTarget.resolve(settings)`: which Temporal, Postgres, task queue and LLM a worker
  process serves (the environment, else the `starter.py dev` stack running here);
- `start_worker_host(...)`: connect the MCP servers, build the worker (`worker_factory`)
  and start polling; everything it opened is owned by the returned `WorkerHost`
  (`start_embedded_worker` does the same on a freshly started embedded stack);
- `WorkerHost.stop()`: a graceful shutdown (`/healthz` turns 503, polling stops, in-flight
  activities finish for up to `graceful_shutdown_seconds`), then the LLM client, the Postgres
  pool, the MCP servers and an offline model started for it are closed, in reverse order,
  and last the metrics endpoint and tracing (`hosting/observability.py`);
- `stop_signals()`: SIGINT and SIGTERM become a stop request instead of a KeyboardInterrupt.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio.client import Client

from reactive_temporal.access_calls import worker_refusal
from reactive_temporal.config import Settings
from reactive_temporal.connection import TemporalConnection
from reactive_temporal.embedded.scripted_llm import ScriptedLLM
from reactive_temporal.embedded.stack import EmbeddedStack, read_published_stack
from reactive_temporal.hosting.approval_watch import ApprovalWatch
from reactive_temporal.hosting.credential_watch import CredentialWatch
from reactive_temporal.hosting.observability import Observability
from reactive_temporal.tools import Tool

if TYPE_CHECKING:
    from reactive_temporal.hosting.worker_factory import AgentWorker

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkerOptions:
    """What the `worker` and `dev` commands (and the Python API) let people choose."""

    tool_modules: Sequence[str] = ()
    """Modules whose `@tool` functions the worker loads."""
    mcp_specs: Sequence[str] = ()
    """MCP servers: `NAME=URL` or `NAME=COMMAND ARGS`."""
    mcp_env: Sequence[str] = ()
    """Environment variables passed to stdio MCP servers (they get only these and the basics)."""
    mcp_headers: Sequence[str] = ()
    """Headers sent to HTTP MCP servers: `NAME=Header-Name: value`, with `${VARIABLE}`s and
    `${file:PATH}`s in the value (`mcp_headers`)."""


class NoServerError(RuntimeError):
    """A worker process has nothing to serve: no server configured and no dev stack running."""


@dataclass(frozen=True)
class WorkerTarget:
    """The servers a worker process serves, and its LLM endpoint (None: the offline model)."""

    temporal_address: str
    database_url: str
    task_queue: str
    llm_base_url: str | None
    offline_model: bool
    connection: TemporalConnection
    """How to reach `temporal_address`: TLS, API key, metadata (none for the dev stack)."""

    @classmethod
    def resolve(cls, settings: Settings) -> WorkerTarget:
        """From the environment, else from the `starter.py dev` stack running here."""
        published = read_published_stack(settings.data_dir.resolve())
        address = settings.temporal_address or (published.temporal_address if published else None)
        database_url = settings.database_url or (published.database_url if published else None)
        if address is None or database_url is None:
            missing = "TEMPORAL_ADDRESS" if address is None else "DATABASE_URL"
            raise NoServerError(
                f"no {missing} and no `python starter.py dev` running here: set {missing}, "
                "or start the dev stack first"
            )
        task_queue = settings.temporal_task_queue
        if published is not None and settings.temporal_address is None:
            task_queue = published.task_queue
        llm_base_url = settings.openai_base_url
        if settings.uses_offline_model:
            llm_base_url = published.llm_base_url if published is not None else None
        if settings.temporal_address is not None:
            connection = settings.temporal_connection()
        else:
            namespace = published.namespace if published else settings.temporal_namespace
            connection = TemporalConnection(address=address, namespace=namespace)
        return cls(
            address,
            database_url,
            task_queue,
            llm_base_url,
            settings.uses_offline_model,
            connection,
        )


@dataclass
class WorkerHost:
    """A polling worker and everything opened for it."""

    agent_worker: AgentWorker
    resources: contextlib.AsyncExitStack
    task_queue: str
    observability: Observability | None = None
    credentials: CredentialWatch | None = None
    polling: asyncio.Task[None] | None = field(default=None, repr=False)
    _watch: asyncio.Task[None] | None = field(default=None, repr=False)
    _renewing: asyncio.Task[None] | None = field(default=None, repr=False)
    _approvals: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def tool_names(self) -> list[str]:
        return self.agent_worker.registry.names

    def start(self) -> None:
        self.polling = asyncio.create_task(self.agent_worker.worker.run())
        if self.observability is not None:
            self._watch = asyncio.create_task(
                self.observability.watch(self.agent_worker.worker, self.polling)
            )
            if self.observability.endpoint is not None:  # served: count runs waiting
                self._approvals = self._count_approvals()
        if self.credentials is not None and self.credentials.needed:
            worker = self.agent_worker
            self._renewing = asyncio.create_task(
                self.credentials.run(lambda: worker.client, worker.replace_client)
            )

    def _count_approvals(self) -> asyncio.Task[None] | None:
        """The gauge of runs waiting for approval on this worker's queue
        (`hosting/approval_watch.py`), counted while the worker runs."""
        try:
            watch = ApprovalWatch(self.task_queue)
        except ValueError as err:
            log.warning("runs waiting for approval are not counted: %s", err)
            return None
        worker = self.agent_worker
        return asyncio.create_task(watch.run(lambda: worker.client))

    async def wait(self, stop: asyncio.Event) -> None:
        """Until `stop` is set or the worker stops by itself (a fatal error)."""
        assert self.polling is not None, "start() the host first"
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({self.polling, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()

    async def stop(self) -> None:
        """Stop polling, let in-flight tasks finish, then close what the worker opened.

        Raises what made the worker stop by itself, if anything did (after closing)."""
        polling, self.polling = self.polling, None
        for task in (self._watch, self._renewing, self._approvals):
            if task is not None:
                task.cancel()
        if self.observability is not None:
            self.observability.draining()
        try:
            if polling is not None:
                await self.agent_worker.worker.shutdown()
                with contextlib.suppress(asyncio.CancelledError):
                    try:
                        await polling
                    except Exception as err:  # the SDK's words name no call, no credentials
                        client, queue = self.agent_worker.client, self.task_queue
                        if (refusal := worker_refusal(err, client, queue)) is None:
                            raise
                        raise refusal from err
        finally:
            try:
                await self.resources.aclose()
            finally:
                if self.observability is not None:
                    # off the event loop: the trace exporter's last flush blocks while its
                    # collector is slow or down (18 s), and signals go unheard meanwhile
                    await asyncio.to_thread(self.observability.close)


async def start_worker_host(
    client: Client,
    settings: Settings,
    *,
    database_url: str,
    llm_base_url: str | None = None,
    options: WorkerOptions = WorkerOptions(),
    extra_tools: Sequence[Tool] = (),
    task_queue: str | None = None,
    offline_model: bool = False,
    max_cached_workflows: int | None = None,
    observability: Observability | None = None,
    credentials: CredentialWatch | None = None,
) -> WorkerHost:
    """Build a worker (with its MCP servers, and an offline model when asked) and start it;
    `extra_tools` are tools built in code rather than loaded from a module. The host owns
    `observability` (the process's metrics endpoint and tracing) from here on, and renews
    the client's `credentials` while it runs."""
    # imported here, not above: the worker's modules (the model client, MCP, activities) are
    # about a second of every CLI command's start, and most commands host no worker
    from reactive_temporal.hosting.worker_factory import create_worker
    from reactive_temporal.mcp_tools import McpToolbox

    resources = contextlib.AsyncExitStack()
    try:
        if offline_model and llm_base_url is None:
            llm = ScriptedLLM().start()
            resources.callback(llm.stop)
            llm_base_url = llm.base_url
        toolbox = await resources.enter_async_context(
            McpToolbox(
                list(options.mcp_specs),
                env=list(options.mcp_env),
                headers=list(options.mcp_headers),
            )
        )
        agent_worker = await create_worker(
            client,
            settings,
            database_url=database_url,
            llm_base_url=llm_base_url,
            tool_modules=options.tool_modules,
            extra_tools=[*extra_tools, *toolbox.tools],
            task_queue=task_queue,
            max_cached_workflows=max_cached_workflows,
            graceful_shutdown=timedelta(seconds=settings.graceful_shutdown_seconds),
        )
        resources.push_async_callback(agent_worker.close)
    except BaseException:
        await resources.aclose()
        if observability is not None:
            observability.close()
        raise
    host = WorkerHost(
        agent_worker,
        resources,
        task_queue or settings.temporal_task_queue,
        observability,
        credentials,
    )
    host.start()
    return host


async def start_embedded_worker(
    settings: Settings,
    options: WorkerOptions = WorkerOptions(),
    *,
    observability: Observability | None = None,
    **stack_options: Any,
) -> tuple[EmbeddedStack, WorkerHost]:
    """The embedded stack (`stack_options` go to `EmbeddedStack.start`) and a worker serving
    it; the stack is stopped again when the worker cannot start. With `observability`, the
    stack's client connects on its runtime and plugins (metrics, tracing) and the host owns it."""
    if observability is not None:
        stack_options.setdefault("runtime", observability.runtime)
        stack_options.setdefault("plugins", observability.plugins)
    stack = await EmbeddedStack(settings).start(**stack_options)
    try:
        assert stack.client is not None
        host = await start_worker_host(
            stack.client,
            settings,
            database_url=stack.database_url,
            llm_base_url=stack.llm_base_url,
            options=options,
            observability=observability,
        )
    except BaseException:
        await stack.stop()
        raise
    return stack, host


QUIT_NOW = 130
"""The exit status of a worker stopped at once by a second signal while it drained."""


SIGNAL_ECHO_SECONDS = 1.0
"""A second signal this soon after the first is the same stop request, not "stop now": a
terminal's Ctrl-C reaches every process of its group, and `worker --processes N`'s supervisor
passes it on to each worker as SIGTERM too (systemd signals every process of a service): each
worker saw two at once and stopped without draining, exiting 130."""


@contextlib.contextmanager
def stop_signals(*, second_quits: bool = False) -> Iterator[asyncio.Event]:
    """An event set by SIGINT or SIGTERM while the block runs (install it before announcing
    readiness, so a Ctrl-C right after is a clean stop). With `second_quits`, a second signal
    ends the process at once (its activities in flight are retried elsewhere): a drain of a
    long graceful shutdown could not be cut short."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    first: float | None = None

    def on_signal() -> None:
        nonlocal first
        now = time.monotonic()
        if second_quits and stop.is_set():
            if first is not None and now - first < SIGNAL_ECHO_SECONDS:
                return  # the same request, reaching this process twice
            os.write(2, b"stopping now: activities in flight are left to be retried\n")
            os._exit(QUIT_NOW)
        first = now
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    try:
        yield stop
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
