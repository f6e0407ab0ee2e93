"""What the credentials may do in the namespace, asked without doing any of it.

A frontend's authorization interceptor judges a call before the call's handler reads it
(`service/frontend/fx.go` puts it ahead of the handler, after the namespace's validation), so
a call made for its handler to refuse is answered by the authorizer when the caller may not
make it, and by the handler's refusal when it may. Nothing is started, sent or taken. The
handlers' answers, measured on the dev server (Server 1.32):

| may it…                 | the call                                            | allowed answer   |
|-------------------------|-----------------------------------------------------|------------------|
| start runs              | StartWorkflowExecution without a workflow id        | INVALID_ARGUMENT |
| send updates            | UpdateWorkflowExecution of a workflow no one starts | NOT_FOUND        |
| send signals            | SignalWorkflowExecution of a workflow no one starts | NOT_FOUND        |
| read runs               | ListWorkflowExecutions of that one id, one a page   | (empty page)     |
| poll for workflow tasks | PollWorkflowTaskQueue without a task queue          | INVALID_ARGUMENT |
| poll for activity tasks | PollActivityTaskQueue without a task queue          | INVALID_ARGUMENT |

A refusal is PERMISSION_DENIED or UNAUTHENTICATED (`access.refusal_kind`). `starter.py check`
shows them all in its `permissions` row; a worker's start asks the two polls, and refuses to
start when either is refused (its polls would be, silently, for a minute, before the SDK
stops it: `hosting/worker_lifecycle.py`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.update.v1 import Input, Meta, Request
from temporalio.api.workflowservice.v1 import (
    ListWorkflowExecutionsRequest,
    PollActivityTaskQueueRequest,
    PollWorkflowTaskQueueRequest,
    SignalWorkflowExecutionRequest,
    StartWorkflowExecutionRequest,
    UpdateWorkflowExecutionRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from reactive_temporal.access import (
    Access,
    Operation,
    TemporalAccessDenied,
    credentials_of,
    grant_hint,
    operation,
    refusal_kind,
    refused,
    server_words,
)
from reactive_temporal.access_calls import connection_of
from reactive_temporal.connection import TemporalConnection
from reactive_temporal.hosting.preflight import Check, within

NAME = "permissions"
PROBE_ID = "reactive-temporal-check-no-such-workflow-"


@dataclass(frozen=True)
class Probe:
    op: Operation
    call: Callable[[Client, timedelta], Awaitable[object]]
    allowed: RPCStatusCode | None
    """The handler's answer when the call is allowed (None: it succeeds)."""


def _start(client: Client, timeout: timedelta) -> Awaitable[object]:
    return client.workflow_service.start_workflow_execution(
        StartWorkflowExecutionRequest(namespace=client.namespace, request_id=str(uuid.uuid4())),
        retry=False,
        timeout=timeout,
    )


def _update(client: Client, timeout: timedelta) -> Awaitable[object]:
    return client.workflow_service.update_workflow_execution(
        UpdateWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=PROBE_ID + uuid.uuid4().hex),
            request=Request(meta=Meta(update_id=uuid.uuid4().hex), input=Input(name="check")),
        ),
        retry=False,
        timeout=timeout,
    )


def _signal(client: Client, timeout: timedelta) -> Awaitable[object]:
    return client.workflow_service.signal_workflow_execution(
        SignalWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=PROBE_ID + uuid.uuid4().hex),
            signal_name="check",
            request_id=str(uuid.uuid4()),
        ),
        retry=False,
        timeout=timeout,
    )


def _read(client: Client, timeout: timedelta) -> Awaitable[object]:
    return client.workflow_service.list_workflow_executions(
        ListWorkflowExecutionsRequest(
            namespace=client.namespace,
            page_size=1,
            query=f"WorkflowId = '{PROBE_ID}{uuid.uuid4().hex}'",
        ),
        retry=False,
        timeout=timeout,
    )


def _poll_workflow_tasks(client: Client, timeout: timedelta) -> Awaitable[object]:
    return client.workflow_service.poll_workflow_task_queue(
        PollWorkflowTaskQueueRequest(namespace=client.namespace), retry=False, timeout=timeout
    )


def _poll_activity_tasks(client: Client, timeout: timedelta) -> Awaitable[object]:
    return client.workflow_service.poll_activity_task_queue(
        PollActivityTaskQueueRequest(namespace=client.namespace), retry=False, timeout=timeout
    )


INVALID, MISSING = RPCStatusCode.INVALID_ARGUMENT, RPCStatusCode.NOT_FOUND
POLLS = (
    Probe(
        operation("poll for workflow tasks", "PollWorkflowTaskQueue"), _poll_workflow_tasks, INVALID
    ),
    Probe(
        operation("poll for activity tasks", "PollActivityTaskQueue"), _poll_activity_tasks, INVALID
    ),
)
PROBES = (
    Probe(operation("start runs", "StartWorkflowExecution"), _start, INVALID),
    Probe(operation("send updates", "UpdateWorkflowExecution"), _update, MISSING),
    Probe(operation("send signals", "SignalWorkflowExecution"), _signal, MISSING),
    Probe(operation("read runs", "ListWorkflowExecutions"), _read, None),
    *POLLS,
)


@dataclass(frozen=True)
class Answer:
    probe: Probe
    refusal: RPCError | None = None
    """The authorizer's refusal (PERMISSION_DENIED or UNAUTHENTICATED)."""
    unclear: str | None = None
    """An answer that tells neither (the server's words)."""


async def ask(client: Client, probe: Probe, seconds: float) -> Answer:
    """Whether the credentials may make `probe`'s call: Late past `seconds`."""
    try:
        await within(seconds, probe.call(client, timedelta(seconds=seconds)), probe.op.said())
    except RPCError as err:
        if refusal_kind(err.status, err.message) is not None:
            return Answer(probe, refusal=err)
        if err.status != probe.allowed:
            return Answer(probe, unclear=f"{err.status.name} {err.message!r}")
        return Answer(probe)
    if probe.allowed is not None:
        return Answer(probe, unclear="the call was taken")  # no server does
    return Answer(probe)


async def poll_refusal(
    client: Client, task_queue: str, seconds: float = 10.0
) -> TemporalAccessDenied | None:
    """The refusal of a worker's polls, when its credentials may not poll: the error naming
    `task_queue` and what to grant. None when they may, or the server did not say."""
    for probe in POLLS:
        err = (await ask(client, probe, seconds)).refusal
        if err is not None:
            op = operation(f"{probe.op.action} on task queue {task_queue!r}", probe.op.api)
            kind = refusal_kind(err.status, err.message)
            assert kind is not None  # `ask` keeps only refusals there
            said = server_words(err)
            return refused(kind, op, connection_of(client), said, err.status, err.raw_grpc_status)
    return None


async def permissions_check(
    client: Client, connection: TemporalConnection, seconds: float
) -> Check:
    """The `permissions` row: every probe asked at once, each within `seconds`."""
    answers = await asyncio.gather(*(ask(client, probe, seconds) for probe in PROBES))
    refusals = [a for a in answers if a.refusal is not None]
    unclear = [a for a in answers if a.unclear is not None]
    allowed = [a.probe.op.action for a in answers if a.refusal is None and a.unclear is None]
    who = credentials_of(connection)
    if refusals:
        first = refusals[0].refusal
        assert first is not None
        if refusal_kind(first.status, first.message) == "credentials":
            said = refused("credentials", refusals[0].probe.op, connection, server_words(first))
            return Check(NAME, "fail", str(said))
        writes = any(a.probe.op.access == "write" for a in refusals)
        access: Access = "write" if writes else "read"
        may = f"; it may {', '.join(allowed)}" if allowed else ""
        return Check(
            NAME,
            "fail",
            f"{who} may not {', '.join(a.probe.op.action for a in refusals)} in namespace "
            f"{connection.namespace!r} ({server_words(first)}){may}. "
            f"{grant_hint(access, connection)}",
        )
    if unclear:
        words = "; ".join(f"{a.probe.op.action}: {a.unclear}" for a in unclear)
        return Check(NAME, "warn", f"could not tell whether {who} may {words}")
    return Check(NAME, "ok", f"{who} may {', '.join(allowed)}")
