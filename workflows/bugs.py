"""When workflow code itself is wrong: fail the workflow visibly, never wedge it.

Temporal retries a workflow task that raises anything but a failure type, forever and
silently: the run sits "running" with no progress and no debrief. Every workflow here lists
BUG_EXCEPTIONS as its failure exception types, so such an exception fails the workflow (or
just the update whose handler raised it) where people see it. AgentRunWorkflow first ends the
run as `error` with its instant debrief and tells its agent (`RunState.fail_on_bug`).

Not in the list, on purpose: Temporal's own NondeterminismError (and the sandbox's
RestrictedWorkflowAccessError, its subclass): a deploy that changed a decision without a patch
should hold its runs until it is rolled back or fixed, not fail them all. Nor RuntimeError as
a whole, which the SDK raises for its own internal troubles; nor ValueError as a whole, which
it raises for a worker that lacks an activity (another worker, better deployed, may take the
task).
"""

from __future__ import annotations

import csv
import json

from pydantic import ValidationError
from temporalio.exceptions import ApplicationError

from reactive_temporal.payloads import PlaintextPayloadError
from reactive_temporal.sanitize import clip

BUG_EXCEPTIONS: tuple[type[BaseException], ...] = (
    ArithmeticError,
    AssertionError,
    AttributeError,
    LookupError,
    NameError,
    NotImplementedError,
    RecursionError,
    TypeError,
    UnicodeError,
    json.JSONDecodeError,
    ValidationError,  # a contract built from data that does not fit it
    csv.Error,
    PlaintextPayloadError,  # an input refused because encryption is required
)
WORKFLOW_BUG = "WorkflowBug"
"""The ApplicationError type a run fails with after ending on a bug."""


def bug_message(err: BaseException) -> str:
    """What failed, for the run's `error`, its debrief and the workflow's failure."""
    return clip(f"the run's workflow code failed: {type(err).__name__}: {err}", 2_000)


def bug_failure(err: BaseException) -> ApplicationError:
    """The non-retryable failure a run ends its workflow with, once its debrief is out."""
    return ApplicationError(bug_message(err), type=WORKFLOW_BUG, non_retryable=True)
