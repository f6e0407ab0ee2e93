"""What a client process (the CLI or the Python API) needs to start runs.

Three situations, tried in order:
1. `TEMPORAL_ADDRESS` is set: connect to it; workers run elsewhere (`python worker.py`).
2. `python starter.py dev` is running here: connect to its published stack and worker.
3. Nothing is running: start the embedded stack and a worker inside this process, for as
   long as it lives (no worker for a command that only reads). This is what makes the first
   command on a fresh clone work.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from temporalio.client import Client

from reactive_temporal.config import Settings
from reactive_temporal.database_settings import Conninfo
from reactive_temporal.embedded.stack import EmbeddedStack, connect, read_published_stack
from reactive_temporal.hosting.credential_watch import CredentialWatch

if TYPE_CHECKING:
    from reactive_temporal.hosting.worker_lifecycle import WorkerHost

log = logging.getLogger("reactive_temporal")


@dataclass
class Runtime:
    """A client, the task queue it starts runs on, and what this process started for it."""

    client: Client
    task_queue: str
    offline_model: bool | None
    """True/False when this process knows which model serves runs; None when it cannot tell."""
    stack: EmbeddedStack | None = None
    host: WorkerHost | None = None
    """The worker this process runs, when nothing else serves its runs."""
    database_url: Conninfo | None = None
    """The workers' Postgres, where runs' live output is read (DATABASE_URL_FILE's read again
    for each connection: `database_settings.UrlFile`); None when unknown here."""
    unreachable_patience: float = 600.0
    """Seconds a wait for a run's result outlasts a Temporal server out of reach
    (`Settings.unreachable_patience_seconds`)."""
    closed: bool = False
    credentials: CredentialWatch | None = None
    """Renews the client's credentials while the runtime is open: its API key from
    TEMPORAL_API_KEY_FILE, its connection from renewed TLS files (`take_renewed`); and says
    when its client certificate nears its end."""
    loop: asyncio.AbstractEventLoop | None = field(default=None, init=False)
    """The event loop the in-process worker runs on (None: no worker here)."""
    _renewing: asyncio.Task[None] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.loop = asyncio.get_running_loop() if self.host is not None else None
        if self.credentials is not None and self.credentials.needed:
            self._renewing = asyncio.create_task(
                self.credentials.run(lambda: self.client, self.take_renewed)
            )

    def take_renewed(self, fresh: Client) -> None:
        """Go on through `fresh`, connected with renewed TLS files, from the next call on.

        The client stays the same object and takes `fresh`'s connection
        (`take_connection`): every agent, session and run handle made from it, the waits for
        results and debriefs under way and the caller's own uses of `runtime.client` move
        with it, where a new client in `self.client` would have left each of them on the old
        certificate. The in-process worker, when there is one, polls through it too (today
        only the embedded stack has one, which has no credentials to renew: moved anyway,
        so the two never part)."""
        take_connection(self.client, fresh)
        if self.host is not None:
            self.host.agent_worker.replace_client(self.client)

    def require_usable(self) -> None:
        """Raise a RuntimeError when runs started now could never run: the runtime was
        closed (its stack is gone: calls failed 5-10 s later with a connection error), or
        this is not the event loop its in-process worker runs on (built in one
        `asyncio.run`, used in another, the worker had died with its loop: runs waited for
        good)."""
        if self.closed:
            raise RuntimeError("this agent was disposed: build it again to use it")
        if self.loop is not None and (self.loop.is_closed() or _running_loop() is not self.loop):
            raise RuntimeError(
                "this agent's in-process worker runs on another event loop (the agent was "
                "built in another asyncio.run): build and use it in the same one"
            )

    async def close(self) -> None:
        """Stop the credentials' watch, the in-process worker (gracefully) and the embedded
        stack, if any."""
        self.closed = True
        await self._stop_renewing()
        if self.host is not None:
            host, self.host = self.host, None
            try:
                await host.stop()
            except Exception as err:  # the runs are durable: report it, close the rest
                log.warning("the in-process worker had stopped: %s", err)
        if self.stack is not None:
            stack, self.stack = self.stack, None
            await stack.stop()

    async def _stop_renewing(self) -> None:
        """Cancel the credentials' watch and wait for it to end: no task left behind."""
        renewing, self._renewing = self._renewing, None
        if renewing is None:
            return
        renewing.cancel()
        if renewing.get_loop() is not _running_loop():
            return  # built in another asyncio.run: its loop ended it
        await asyncio.wait([renewing])
        if not renewing.cancelled() and (err := renewing.exception()) is not None:
            log.warning("the watch of Temporal's credentials had stopped: %s", err)


def take_connection(client: Client, fresh: Client) -> None:
    """`client` talks through `fresh`'s connection from its next call on (calls under way
    finish on the old one, dropped after them).

    The SDK renews a connection's API key and metadata in place (`Client.api_key`), but not
    its TLS, and has no setter for the connection: it is the `service_client` of the
    client's configuration, which each call reads (`Client.workflow_service`), set here.
    `fresh` was connected as `client` was (`CredentialWatch.of`): its data converter,
    interceptors and plugins are `client`'s own. tests/faults/test_renewed_connections.py
    holds it against the SDK installed."""
    client._config["service_client"] = fresh.service_client
    client._initial_config["service_client"] = fresh.service_client


async def open_runtime(
    settings: Settings, *, tool_modules: Sequence[str] = (), worker: bool = True
) -> Runtime:
    """Connect to the configured server, else to `starter.py dev`'s, else start the embedded
    stack and a worker in this process (without the worker when `worker` is False: for a
    command that only reads what is stored, the worker's imports and start are most of its
    time)."""
    if settings.temporal_address is not None:
        connection = settings.temporal_connection()  # TLS, API key: temporal.toml, TEMPORAL_*
        client = await connect(
            connection,
            encryption_keys=settings.encryption_keys,
            encryption_required=settings.encryption_required,
        )
        return Runtime(
            client,
            settings.temporal_task_queue,
            offline_model=None,
            database_url=settings.database_conninfo(settings.database_url)
            if settings.database_url
            else None,
            unreachable_patience=settings.unreachable_patience_seconds,
            credentials=CredentialWatch.of(settings, connection),
        )

    published = read_published_stack(settings.data_dir.resolve())
    if published is not None:
        client = await connect(
            published.temporal_address,
            published.namespace,
            settings.encryption_keys,
            encryption_required=settings.encryption_required,
        )
        return Runtime(
            client,
            published.task_queue,
            published.offline_model,
            database_url=settings.database_url or published.database_url,
            unreachable_patience=settings.unreachable_patience_seconds,
        )

    host = None
    if worker:
        # imported here: the worker (the model client, MCP, the activities) is a second's
        # import that a command talking to running servers never needs
        from reactive_temporal.hosting.worker_lifecycle import (
            WorkerOptions,
            start_embedded_worker,
        )

        options = WorkerOptions(tool_modules=tool_modules)
        stack, host = await start_embedded_worker(settings, options)
    else:
        stack = await EmbeddedStack(settings).start()
    assert stack.client is not None
    return Runtime(
        stack.client,
        settings.temporal_task_queue,
        stack.offline_model,
        stack=stack,
        host=host,
        database_url=stack.database_url,
        unreachable_patience=settings.unreachable_patience_seconds,
    )


def offline_model_notice(settings: Settings, runtime: Runtime, model: str) -> str | None:
    """What to tell someone whose runs of `model` go to the offline scripted model, or None:
    that no model is configured, or that a `dev` stack started without one serves it whatever
    this process has (its worker answers every run). A model AGENT_LLM_ENDPOINTS routes is
    answered by its endpoint."""
    if not runtime.offline_model or settings.routed(model):
        return None
    if settings.uses_offline_model:
        return (
            "runs use the offline scripted model (no OPENAI_BASE_URL or OPENAI_API_KEY set): "
            "it does arithmetic and tells the time, nothing more"
        )
    return (
        "runs use the offline scripted model: the `starter.py dev` stack running in "
        f"{settings.data_dir} was started without OPENAI_BASE_URL or OPENAI_API_KEY, and its "
        "worker answers every run; restart `dev` with them for a real model"
    )


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
