"""How a worker process runs: its slots, its processes, its shutdown, its Postgres pool and its
Worker Versioning build. The options of `worker` and `dev` of the same names override these.

A part of `config.Settings` (which adds what clients read too), as `DatabaseSettings` is.
"""

from __future__ import annotations

from pydantic import AliasChoices, Field, field_validator

from reactive_temporal.database_settings import DatabaseSettings

DEFAULT_MAX_CONCURRENT_ACTIVITIES = 500
"""An LLM call waits seconds on the network: a worker holds hundreds in flight (the SDK's 100
would cap it at 100 calls whatever its CPU)."""
DEFAULT_MAX_CONCURRENT_WORKFLOW_TASKS = 100
"""Workflow tasks are short and CPU-bound: the SDK's default."""
MAX_WORKER_PROCESSES = 64
"""More worker processes than this on one host is a typo, not a plan."""
MIN_DB_POOL_SIZE = 10
MAX_DEFAULT_DB_POOL_SIZE = 50
"""A default pool never asks for more: Postgres allows 100 connections unless told otherwise,
and several workers share them. More is one setting away (REACTIVE_TEMPORAL_DB_POOL_SIZE)."""
DEFAULT_GRACEFUL_SHUTDOWN_SECONDS = 30.0
DEFAULT_STICKY_QUEUE_TIMEOUT_SECONDS = 30.0
"""How long a run's next workflow task waits for the worker that has the run in memory before
any worker may take it (the SDK's default is 10 s). A saturated worker is late to poll: at
1,000 runs on 2 cores 58–545 tasks of a bench passed that 10 s and went to the shared queue,
each a timeout in its run's history and handed out again with the whole history; at 30 s and
at 60 s none did, the longest wait being 12–14 s (bench/README.md).
The cost: tasks already queued for a worker that dies without shutting down wait this long
(newer tasks of its runs go to the shared queue once it stops polling): 30 s, as long as
Temporal waits for a dead worker's steps to stop heartbeating."""


class WorkerSettings(DatabaseSettings):
    """The worker process's settings (see the module's docstring)."""

    # -- operating workers (worker / dev; the options of the same names override these) -----
    metrics_port: int | None = Field(
        default=None,
        ge=1,
        le=65_535,
        validation_alias=AliasChoices("REACTIVE_TEMPORAL_METRICS_PORT", "metrics_port"),
    )
    """Serve Prometheus text at /metrics and /healthz on this port (worker and dev)."""
    worker_processes: int = Field(
        default=1,
        ge=1,
        le=MAX_WORKER_PROCESSES,
        validation_alias=AliasChoices("REACTIVE_TEMPORAL_WORKER_PROCESSES", "worker_processes"),
    )
    """`worker`: how many worker processes to run on this host, one per core it can give
    them (`hosting/worker_processes.py`)."""
    graceful_shutdown_seconds: float = Field(
        default=DEFAULT_GRACEFUL_SHUTDOWN_SECONDS,
        ge=0,
        le=86_400,
        validation_alias=AliasChoices(
            "REACTIVE_TEMPORAL_GRACEFUL_SHUTDOWN", "graceful_shutdown_seconds"
        ),
    )
    """On SIGTERM, how long in-flight activities may run on before they are cancelled."""
    max_concurrent_activities: int = Field(
        default=DEFAULT_MAX_CONCURRENT_ACTIVITIES,
        ge=1,
        validation_alias=AliasChoices(
            "REACTIVE_TEMPORAL_MAX_CONCURRENT_ACTIVITIES", "max_concurrent_activities"
        ),
    )
    max_concurrent_workflow_tasks: int = Field(
        default=DEFAULT_MAX_CONCURRENT_WORKFLOW_TASKS,
        ge=2,
        validation_alias=AliasChoices(
            "REACTIVE_TEMPORAL_MAX_CONCURRENT_WORKFLOW_TASKS", "max_concurrent_workflow_tasks"
        ),
    )
    sticky_queue_timeout_seconds: float = Field(
        default=DEFAULT_STICKY_QUEUE_TIMEOUT_SECONDS,
        gt=0,
        le=3_600,
        validation_alias=AliasChoices(
            "REACTIVE_TEMPORAL_STICKY_QUEUE_TIMEOUT", "sticky_queue_timeout_seconds"
        ),
    )
    """Seconds a workflow task waits on the sticky queue of the worker that holds its run."""
    sandbox_workflows: bool = Field(
        default=False,
        validation_alias=AliasChoices("REACTIVE_TEMPORAL_SANDBOX_WORKFLOWS", "sandbox_workflows"),
    )
    """Run the project's own workflows in Temporal's sandbox as well (default: outside it, a
    quarter less worker CPU per run; `reactive_temporal/hosting/sandbox.py` says why that is
    safe). Any other workflow on the worker is sandboxed either way."""
    db_pool_size: int | None = Field(
        default=None,
        ge=1,
        validation_alias=AliasChoices("REACTIVE_TEMPORAL_DB_POOL_SIZE", "db_pool_size"),
    )
    """The worker's Postgres pool, at most this many connections (unset: `store_pool_size()`)."""
    deployment_name: str | None = Field(
        default=None, validation_alias=AliasChoices("TEMPORAL_DEPLOYMENT_NAME", "deployment_name")
    )
    """Worker Versioning: the worker deployment this worker belongs to (with `build_id`)."""
    build_id: str | None = Field(
        default=None, validation_alias=AliasChoices("TEMPORAL_WORKER_BUILD_ID", "build_id")
    )
    """Worker Versioning: this worker's build (one per release of the workflow code)."""

    def store_pool_size(self) -> int:
        """The worker's Postgres pool size: the setting, else half the activity slots.

        Within [10, 50]. A step's reads and writes take milliseconds of its seconds, but on a
        busy worker every statement's round trip also waits for the event loop, and runs
        start in bursts: at 200 runs on 2 cores a pool of a tenth of the slots (20) had 1,821
        checkouts wait, 50 had 223 (bench/README.md). The pool opens connections as they are
        needed, up to this.
        """
        if self.db_pool_size is not None:
            return self.db_pool_size
        wanted = self.max_concurrent_activities // 2
        return max(MIN_DB_POOL_SIZE, min(wanted, MAX_DEFAULT_DB_POOL_SIZE))

    @field_validator("metrics_port", "deployment_name", "build_id", mode="before")
    @classmethod
    def _blank_means_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    def worker_version(self) -> tuple[str, str] | None:
        """(deployment name, build id) when a worker uses Worker Versioning, else None.

        Checked where a worker starts (clients ignore these): ValueError when one is missing.
        """
        if self.deployment_name is None and self.build_id is None:
            return None
        if self.deployment_name is None or self.build_id is None:
            raise ValueError(
                "TEMPORAL_DEPLOYMENT_NAME (--deployment-name) and TEMPORAL_WORKER_BUILD_ID "
                "(--build-id) go together: Worker Versioning needs both, or neither"
            )
        return self.deployment_name, self.build_id
