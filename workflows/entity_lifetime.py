"""When the agent entity continues as new: decided where its code runs, not in a condition.

Temporal tells a workflow, task by task, how long its history is and whether to continue as
new. A wait condition that reads those figures is deterministic only if conditions are
checked at the same points on replay, and they are not: in a live task that also held an
update its validator rejected (which leaves no trace in history), the SDK checks conditions
once more, before applying the task's other jobs (an activity's result), so the entity woke
before that result's handler ran, and on replay after it. Its commands came out in another
order; the replay failed with a nondeterminism error and the entity stood still.

So a handler notes, as it ends, whether it is time (`continue_due`), and the entity's
conditions read only that. Entities that began before this (without the
`entity-continues-after-handlers` patch) keep reading the figures in their conditions, as
their histories were made.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from reactive_temporal.contracts import names
    from workflows.entity_patches import EntityPatches

Handler = TypeVar("Handler", bound=Callable[..., Any])


class Lifetime(EntityPatches):
    """The entity's continue-as-new decision (a mixin of AgentWorkflow)."""

    continue_after: int | None = None
    """Continue as new past this many history events (tests); None: when Temporal suggests."""
    continue_due = False
    """A handler found, as it ended, that it is time to continue as new."""

    def _time_to_continue_as_new(self) -> bool:
        """Temporal's figures for this task: read them only where workflow code runs."""
        info = workflow.info()
        if self.continue_after is not None:
            return info.get_current_history_length() > self.continue_after
        return info.is_continue_as_new_suggested()

    def _due(self) -> bool:
        """For wait conditions: whether to continue as new."""
        if self.decides_after_handlers:
            return self.continue_due
        return self._time_to_continue_as_new()

    def _handler_ended(self) -> None:
        if self.decides_after_handlers and self._time_to_continue_as_new():
            self.continue_due = True

    def _refuse_while_leaving(self) -> None:
        """For validators: once it is time to continue as new, take no new update, so the
        handlers in flight can all finish (a busy agent's never did, and its history grew on
        towards Temporal's limits); the caller sends it again, to the next run."""
        if self.continue_due:
            raise ApplicationError(
                "the agent is moving to its next run; send this again",
                type=names.ENTITY_BETWEEN_RUNS,
                non_retryable=True,
            )


def notes_lifetime(handler: Handler) -> Handler:
    """A signal or update handler of a `Lifetime` that notes, as it ends (however it ends),
    whether it is time to continue as new."""
    if inspect.iscoroutinefunction(handler):

        @functools.wraps(handler)
        async def noted(self: Lifetime, *args: Any) -> Any:
            try:
                return await handler(self, *args)
            finally:
                self._handler_ended()

        return noted  # type: ignore[return-value]

    @functools.wraps(handler)
    def noted_sync(self: Lifetime, *args: Any) -> Any:
        try:
            return handler(self, *args)
        finally:
            self._handler_ended()

    return noted_sync  # type: ignore[return-value]
