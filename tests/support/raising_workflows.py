"""A worker whose workflow code raises on chosen task queues: a bad deploy, for fault tests.

A RuntimeError is not among the workflows' failure types: the SDK fails the workflow task,
and Temporal tries it again forever (the worker runs our workflows unsandboxed here).
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.client import Interceptor as ClientInterceptor
from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

failing_queues: set[str] = set()
"""Task queues whose workflows' every task raises."""


class TasksFail(ClientInterceptor, Interceptor):
    """Given to a client's interceptors: its workers' workflows on `failing_queues` raise."""

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor]:
        return _Raises


class _Raises(WorkflowInboundInterceptor):
    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        if workflow.info().task_queue in failing_queues:
            raise RuntimeError("the database of regions is missing\n  at line 2")
        return await super().execute_workflow(input)
