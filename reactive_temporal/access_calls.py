"""Every client call this project makes, its authorizer's refusal said as `access.py` says it.

One client interceptor (`AccessRefusals`), put on every client this project connects
(`connection.connect_client`): the Python API, the CLI, a worker's activities and `check` all
get a TemporalPermissionDenied or TemporalCredentialsRejected naming the call, the namespace,
the credentials and what to grant, from the one place, and no entry point catches anything
for it. The few calls made on the raw service (a reset, a task queue's description, the
search attributes) go through `mapped_refusals` with their API named.

The listing and history iterators fetch their pages later, through the raw service: their
`fetch_next_page`, which `__anext__` calls, is replaced on the iterator returned.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from temporalio.client import (
    CancelWorkflowInput,
    Client,
    CountWorkflowsInput,
    DescribeWorkflowInput,
    FetchWorkflowHistoryEventsInput,
    Interceptor,
    ListWorkflowsInput,
    OutboundInterceptor,
    QueryWorkflowInput,
    SignalWorkflowInput,
    StartWorkflowInput,
    StartWorkflowUpdateInput,
    StartWorkflowUpdateWithStartInput,
    TerminateWorkflowInput,
    WorkflowExecutionAsyncIterator,
    WorkflowExecutionCount,
    WorkflowExecutionDescription,
    WorkflowHandle,
    WorkflowHistoryEventAsyncIterator,
    WorkflowUpdateHandle,
)
from temporalio.service import RPCError

from reactive_temporal.access import (
    Operation,
    TemporalAccessDenied,
    access_denied,
    core_refusal,
    operation,
    refusal_kind,
    refused,
)
from reactive_temporal.connection import TemporalConnection
from reactive_temporal.contracts import names
from reactive_temporal.errors import causes

T = TypeVar("T")
Pager = TypeVar("Pager", WorkflowExecutionAsyncIterator, WorkflowHistoryEventAsyncIterator)

STARTS = {
    names.AGENT_RUN_WORKFLOW: "start a run",
    names.AGENT_WORKFLOW: "start the agent's entity (chat and approvals)",
    names.DEBRIEF_WORKFLOW: "start a run's debrief",
}


class AccessRefusals(Interceptor):
    """Turns the authorizer's refusals of the client's calls into access errors."""

    def __init__(self, connection: TemporalConnection) -> None:
        self.connection = connection
        """The connection the client was made with: its namespace and credentials' sources."""

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _Outbound(next, self.connection)

    @contextlib.contextmanager
    def refusals(self, op: Operation) -> Iterator[None]:
        """Within the block, an access refusal is raised as the error naming `op`."""
        try:
            yield
        except Exception as err:
            denied = access_denied(err, op, self.connection)
            if denied is None:
                raise
            raise denied from err


@contextlib.contextmanager
def mapped_refusals(client: Client, action: str, api: str) -> Iterator[None]:
    """For a call of the raw service (`client.workflow_service.…`): an access refusal raised
    within is the error naming `action` through `api` (the connection looked up only then)."""
    try:
        yield
    except RPCError as err:
        if refusal_kind(err.status, err.message) is None:
            raise
        denied = access_denied(err, operation(action, api), connection_of(client))
        if denied is None:  # said already
            raise
        raise denied from err


def connection_of(client: Client) -> TemporalConnection:
    """The connection `client` was made with (`connect_client`'s); for a client connected
    otherwise (a test's), what the client itself tells: its address and namespace."""
    for interceptor in client.config()["interceptors"]:
        if isinstance(interceptor, AccessRefusals):
            return interceptor.connection
    return TemporalConnection(
        address=client.service_client.config.target_host, namespace=client.namespace
    )


POLLERS = {
    "Workflow worker failed": operation("poll for workflow tasks", "PollWorkflowTaskQueue"),
    "Activity worker failed": operation("poll for activity tasks", "PollActivityTaskQueue"),
    "Nexus worker failed": operation("poll for Nexus tasks", "PollNexusTaskQueue"),
}
NAMESPACE_CHECK = "Worker validation failed"


def worker_refusal(
    err: BaseException, client: Client, task_queue: str
) -> TemporalAccessDenied | None:
    """What stopped a worker, when it was the authorizer: its polls refused (the SDK retries
    a refused poll for a minute, silently, then the worker fails: "Workflow worker failed",
    caused by "Poll failure: … Status { code: PermissionDenied, … }"), or its start's
    description of the namespace ("Worker validation failed: …"). None for anything else."""
    said = [str(cause) for cause in causes(err)]
    found = next((r for r in map(core_refusal, said) if r is not None), None)
    if found is None:
        return None
    op = next((o for text, o in POLLERS.items() if any(text in s for s in said)), None)
    if op is not None:
        op = Operation(f"{op.action} on task queue {task_queue!r}", op.api, op.access)
    elif any(NAMESPACE_CHECK in s for s in said):
        op = operation("describe the namespace (a worker's start)", "DescribeNamespace")
    else:
        op = operation(f"serve task queue {task_queue!r}", "PollWorkflowTaskQueue")
    return refused(found.kind, op, connection_of(client), repr(found.message), found.status)


class _Outbound(OutboundInterceptor):
    def __init__(self, next: OutboundInterceptor, connection: TemporalConnection) -> None:
        super().__init__(next)
        self._refusals = AccessRefusals(connection)

    async def _call(self, op: Operation, call: Awaitable[T]) -> T:
        with self._refusals.refusals(op):
            return await call

    def _pages(self, op: Operation, pager: Pager) -> Pager:
        fetch: Callable[..., Awaitable[None]] = pager.fetch_next_page

        async def fetch_next_page(*, page_size: int | None = None) -> None:
            with self._refusals.refusals(op):
                await fetch(page_size=page_size)

        pager.fetch_next_page = fetch_next_page  # type: ignore[method-assign]
        return pager

    async def start_workflow(self, input: StartWorkflowInput) -> WorkflowHandle[Any, Any]:
        action = STARTS.get(input.workflow, f"start a workflow of type {input.workflow!r}")
        if input.start_signal:
            action += f" with the signal {input.start_signal!r}"
            op = operation(action, "SignalWithStartWorkflowExecution")
        else:
            op = operation(action, "StartWorkflowExecution")
        return await self._call(op, self.next.start_workflow(input))

    async def start_workflow_update(
        self, input: StartWorkflowUpdateInput
    ) -> WorkflowUpdateHandle[Any]:
        op = operation(f"send the update {input.update!r}", "UpdateWorkflowExecution")
        return await self._call(op, self.next.start_workflow_update(input))

    async def start_update_with_start_workflow(
        self, input: StartWorkflowUpdateWithStartInput
    ) -> WorkflowUpdateHandle[Any]:
        update = input.update_workflow_input.update
        op = operation(f"send the update {update!r} with start", "ExecuteMultiOperation")
        return await self._call(op, self.next.start_update_with_start_workflow(input))

    async def signal_workflow(self, input: SignalWorkflowInput) -> None:
        op = operation(f"send the signal {input.signal!r}", "SignalWorkflowExecution")
        return await self._call(op, self.next.signal_workflow(input))

    async def query_workflow(self, input: QueryWorkflowInput) -> Any:
        op = operation(f"query a workflow ({input.query!r})", "QueryWorkflow")
        return await self._call(op, self.next.query_workflow(input))

    async def describe_workflow(self, input: DescribeWorkflowInput) -> WorkflowExecutionDescription:
        op = operation("read a workflow's state", "DescribeWorkflowExecution")
        return await self._call(op, self.next.describe_workflow(input))

    async def cancel_workflow(self, input: CancelWorkflowInput) -> None:
        op = operation("cancel a workflow", "RequestCancelWorkflowExecution")
        return await self._call(op, self.next.cancel_workflow(input))

    async def terminate_workflow(self, input: TerminateWorkflowInput) -> None:
        op = operation("terminate a workflow", "TerminateWorkflowExecution")
        return await self._call(op, self.next.terminate_workflow(input))

    async def count_workflows(self, input: CountWorkflowsInput) -> WorkflowExecutionCount:
        op = operation("count workflows", "CountWorkflowExecutions")
        return await self._call(op, self.next.count_workflows(input))

    def list_workflows(self, input: ListWorkflowsInput) -> WorkflowExecutionAsyncIterator:
        op = operation("list workflows", "ListWorkflowExecutions")
        return self._pages(op, self.next.list_workflows(input))

    def fetch_workflow_history_events(
        self, input: FetchWorkflowHistoryEventsInput
    ) -> WorkflowHistoryEventAsyncIterator:
        op = operation("read a workflow's history", "GetWorkflowExecutionHistory")
        return self._pages(op, self.next.fetch_workflow_history_events(input))
