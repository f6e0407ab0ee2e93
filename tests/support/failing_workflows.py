"""A workflow that fails with a message of any size, for the failure budget's tests.

No workflow of the project fails with megabytes of words today (the activities' failures it
passes on are bounded where they are sent); this one does, as any could that quotes what it
was told, to show what the failure converter makes of a workflow's own failure.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ApplicationError

HUGE_FAILURE_TYPE = "HugeWorkflowFailure"


@workflow.defn(name="test-huge-failure")
class HugeFailure:
    """Fails at once, non-retryably, with a message of `size` characters ending in `the end`."""

    @workflow.run
    async def run(self, size: int) -> None:
        raise ApplicationError("w" * size + " the end", type=HUGE_FAILURE_TYPE, non_retryable=True)
