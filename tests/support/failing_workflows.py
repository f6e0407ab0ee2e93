"""Workflows that fail with a message of any size or a tangled chain of causes, for the failure
budget's tests.

No workflow of the project fails with megabytes of words today (the activities' failures it
passes on are bounded where they are sent); this one does, as any could that quotes what it
was told, to show what the failure converter makes of a workflow's own failure.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

HUGE_FAILURE_TYPE = "HugeWorkflowFailure"


@workflow.defn(name="test-huge-failure")
class HugeFailure:
    """Fails at once, non-retryably, with a message of `size` characters ending in `the end`."""

    @workflow.run
    async def run(self, size: int) -> None:
        raise ApplicationError("w" * size + " the end", type=HUGE_FAILURE_TYPE, non_retryable=True)


TANGLED_FAILURE_TYPE = "TangledFailure"
TANGLES = ("a cycle", "a deep chain")
"""A chain of causes that comes back on itself (`raise err from err`), and one 2,000 deep:
the SDK's recursion into causes raised RecursionError on each."""


def tangled_failure(tangle: str) -> ApplicationError:
    """A non-retryable failure whose chain of causes is `tangle` (one of TANGLES)."""
    err = ApplicationError("tangled", type=TANGLED_FAILURE_TYPE, non_retryable=True)
    if tangle == "a cycle":
        err.__cause__ = err
        return err
    cause: BaseException | None = None
    for level in range(2_000):
        wrapped = ValueError(f"level {level}")
        wrapped.__cause__ = cause
        cause = wrapped
    err.__cause__ = cause
    return err


@activity.defn(name="test-tangled-failure")
async def tangled_activity(tangle: str) -> None:
    """Fails, non-retryably, with a tangled chain of causes."""
    raise tangled_failure(tangle)


@workflow.defn(name="test-tangled-failure")
class TangledFailure:
    """Fails with a tangled chain of causes: its own (`own`) or its activity's."""

    @workflow.run
    async def run(self, tangle: str, own: bool) -> None:
        if own:
            raise tangled_failure(tangle)
        await workflow.execute_activity(
            tangled_activity,
            tangle,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=3, initial_interval=timedelta(seconds=1)),
        )
