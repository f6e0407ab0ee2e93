"""What a run, a debrief or a chat turn does when Postgres refused its data for good.

A store activity whose data Postgres will never take (a value out of range, a violated
constraint) fails non-retryably as a `StoreDataError` naming the activity, the table and
Postgres's own message (activities/pg_refusals.py); outages and missing schema are still
retried. What each caller does with it, so that nothing waits forever and nobody is left
uninformed:

- A run (AgentRunWorkflow): a refused transcript write (`prepare_run`, `record_messages`) or
  LLM step ends the run as `error`, its `error` saying the database refused the run's data
  and why. Its wrap-up still runs (instant debrief, agent told, search attributes), and then
  its workflow fails with a `StoreDataError`: seen where people look, like a bug
  (workflows/bugs.py), and `rerun` can take it again once the database takes the data.
- A refused tool step is that call's observation, as any failed tool call is: the model
  reads it and the run goes on (the observation is other text, which Postgres may take; if
  it refuses that too, the run ends as above).
- The run's wrap-up write (`notify_agent`: the debrief a trivial run keeps itself, the
  agent's last run): the run's ending and its answer stand and its workflow returns them (a
  caller waiting for the answer gets it); the refusal is in the worker's log, and the debrief
  goes to a DebriefWorkflow child for a try of its own, which fails visibly if it is refused
  too. The agent's chat does not hear of that run (its last run was not kept).
- A debrief child's `persist_debrief`: the child fails with it.
- A chat turn or a session update: its save fails the update with it (a turn is saved before
  it is shown, so the session stays as it was) and the entity goes on serving other chats;
  a session an entity from before per-turn saving cannot adopt stays held whole in its state.

No `workflow.patched` guards these branches: each is taken only when an activity failed with
a `StoreDataError`, which no activity did before this module, so no recorded history takes
one and every history replays the decisions it recorded.
"""

from __future__ import annotations

from temporalio.exceptions import ApplicationError

from reactive_temporal.contracts import names
from reactive_temporal.sanitize import clip

REFUSED_MAX_CHARS = 2_000
"""A run's refusal message at most (it goes into its result, its debrief and its failure)."""


def store_refusal(err: BaseException) -> str | None:
    """What Postgres refused, when `err` (an activity's or a child's failure) was caused by a
    `StoreDataError`; None for any other failure."""
    cause: BaseException | None = err
    for _ in range(20):
        if cause is None:
            return None
        if isinstance(cause, ApplicationError) and cause.type == names.STORE_DATA_ERROR:
            return cause.message
        cause = cause.__cause__
    return None


def run_refused(refusal: str) -> str:
    """A run's `error` when the database refused its data."""
    return clip(
        f"the database refused the run's data, so the run cannot go on (retrying would be "
        f"refused again): {refusal}",
        REFUSED_MAX_CHARS,
    )


def wrap_up_refused(terminated_by: str, refusal: str) -> str:
    """What the worker logs when a run that ended (`terminated_by`) had its wrap-up's write
    refused."""
    return clip(
        f"the run ended ({terminated_by}), but the database refused its wrap-up (its debrief "
        f"or its agent's last run): {refusal}",
        REFUSED_MAX_CHARS,
    )


def refusal_failure(message: str) -> ApplicationError:
    """The non-retryable failure a workflow ends with once what it could do is done."""
    return ApplicationError(message, type=names.STORE_DATA_ERROR, non_retryable=True)
