"""A run's history read from its end, newest event first.

What a stalled run is stuck on was recorded by its last workflow tasks, a few events back:
reading the history from the start would fetch all of a long run's events to find it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryReverseRequest
from temporalio.client import Client

HISTORY_PAGE = 200
HISTORY_PAGES = 5
"""How far back from the end is looked: at most this many pages of HISTORY_PAGE events."""


async def events_from_end(
    client: Client, workflow_id: str, run_id: str, *, pages: int = HISTORY_PAGES
) -> AsyncIterator[HistoryEvent]:
    """The execution's events, newest first, up to `pages` pages of them.

    Raises:
        RPCError: the server would not give them (callers say less rather than fail).
    """
    token = b""
    for _ in range(pages):
        page = await client.workflow_service.get_workflow_execution_history_reverse(
            GetWorkflowExecutionHistoryReverseRequest(
                namespace=client.namespace,
                execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id),
                maximum_page_size=HISTORY_PAGE,
                next_page_token=token,
            )
        )
        for event in page.history.events:
            yield event
        token = page.next_page_token
        if not token:
            return
