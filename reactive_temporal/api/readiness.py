"""`starter.py check`'s checks, run together, and whether a worker polls the task queue.

The task queue's check needs the client API (`worker_waits`), so it is here, not in hosting.
Temporal's, Postgres's and the model endpoints' checks are independent and run at once
(`hosting/preflight.py`, `hosting/preflight_models.py`, `hosting/preflight_updates.py`);
within Temporal's, the namespace, what the credentials may do there, the search attributes,
the updates the namespace takes and the task queue are asked at once once the client is
connected.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.client import Client
from temporalio.service import RPCError

from reactive_temporal.api.entity_health import (
    ProblemsUnreported,
    stuck_entities,
    stuck_line,
)
from reactive_temporal.api.worker_waits import POLL_SILENCE, TaskQueuePollers
from reactive_temporal.config import Settings
from reactive_temporal.hosting.access_probes import permissions_check
from reactive_temporal.hosting.preflight import (
    Check,
    Late,
    Targets,
    certificate_check,
    connect_temporal,
    namespace_check,
    not_checked,
    postgres_checks,
    resolve_targets,
    search_attributes_check,
    within,
)
from reactive_temporal.hosting.preflight_models import model_checks
from reactive_temporal.hosting.preflight_updates import updates_check


async def run_checks(settings: Settings, seconds: float) -> list[Check]:
    """Every check of what a worker started now with `settings` would serve.

    Each call within `seconds`, in a fixed order: Temporal's, Postgres's, the model endpoints'.
    """
    targets = resolve_targets(settings)
    temporal, postgres, models = await asyncio.gather(
        temporal_checks(settings, targets, seconds),
        postgres_checks(targets, seconds),
        model_checks(settings, seconds),
    )
    return [*temporal, *postgres, *models]


async def temporal_checks(settings: Settings, targets: Targets, seconds: float) -> list[Check]:
    """The rows of Temporal's checks, `temporal` to `task queue`, in the report's order."""
    reached, client = await connect_temporal(settings, targets, seconds)
    certificate = certificate_check(targets.connection)
    if client is None or targets.connection is None:
        return [
            reached,
            not_checked("namespace", "Temporal is unreachable"),
            not_checked("permissions", "Temporal is unreachable"),
            not_checked("search attributes", "Temporal is unreachable"),
            not_checked("workflow updates", "Temporal is unreachable"),
            certificate,
            not_checked("task queue", "Temporal is unreachable"),
            not_checked("agent chat", "Temporal is unreachable"),
        ]
    namespace, permissions, attributes, updates, queue, chat = await asyncio.gather(
        namespace_check(client, seconds),
        permissions_check(client, targets.connection, seconds),
        search_attributes_check(client, seconds),
        updates_check(client, seconds),
        task_queue_check(client, targets.task_queue, seconds),
        agent_chat_check(client, targets.task_queue, seconds),
    )
    return [reached, namespace, permissions, attributes, updates, certificate, queue, chat]


async def task_queue_check(client: Client, task_queue: str, seconds: float) -> Check:
    """Whether a worker polls `task_queue` now (`worker_waits`), for information.

    A preflight before the first worker starts finds none: `warn` then, never `fail`.
    """
    pollers = TaskQueuePollers(client)
    kinds = (TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY)
    try:
        polls = await within(
            seconds,
            asyncio.gather(*(pollers.last_poll(task_queue, kind) for kind in kinds)),
            f"the description of task queue {task_queue!r}",
        )
    except Late as err:
        return Check("task queue", "fail", str(err))
    except RPCError as err:
        return Check("task queue", "warn", f"the server would not describe it ({err.message})")
    last = max((p for p in polls if p is not None), default=None)
    if last is None:
        return Check(
            "task queue",
            "warn",
            f"no worker polls {task_queue!r} now (none has before the first starts); "
            "workers and clients must share TEMPORAL_TASK_QUEUE",
        )
    ago = datetime.now(UTC) - last
    if ago >= POLL_SILENCE:
        return Check(
            "task queue",
            "warn",
            f"no worker has polled {task_queue!r} for {ago.total_seconds():.0f} s: runs wait "
            "until one does (are the workers down, or on another TEMPORAL_TASK_QUEUE?)",
        )
    return Check(
        "task queue", "ok", f"workers poll {task_queue!r} (last {ago.total_seconds():.0f} s ago)"
    )


async def agent_chat_check(client: Client, task_queue: str, seconds: float) -> Check:
    """Whether any agent's chat on `task_queue` is stuck (`api/entity_health.py`).

    `warn` when one is: the workers are not at fault, and a preflight does not fail for it.
    """
    name = "agent chat"
    try:
        stuck = await within(
            seconds, stuck_entities(client, task_queue), "the list of stuck agent entities"
        )
    except Late as err:
        return Check(name, "fail", str(err))
    except ProblemsUnreported:
        return Check(
            name,
            "warn",
            "not checked: this Temporal server does not report workflow task problems "
            "(TemporalReportedProblems, Temporal 1.28 and later); a stuck agent says so when "
            "chatted with",
        )
    except RPCError as err:
        return Check(name, "warn", f"the server would not list agent entities ({err.message})")
    except ValueError as err:  # a task queue no visibility query can name
        return Check(name, "warn", f"not checked: the task queue {err}")
    if stuck:
        return Check(name, "warn", stuck_line(stuck, task_queue))
    return Check(name, "ok", f"no agent's chat workflow on {task_queue!r} is stuck")
