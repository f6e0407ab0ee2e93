"""An agent's entity whose workflow task keeps failing: chat says so, and names the way out.

An agent's chat goes through one long-lived AgentWorkflow (`agent-<agent id>`). A workflow
task of it that fails (a payload past Temporal's 2 MiB, which a signal sent by hand can cause
before `entity-inputs-bounded` is asked; a value that does not survive the trip; a bug) is
tried again forever, and the agent takes no chat turn, no session, no debrief read until the
entity is ended: its next task fails the same way. Chat refused such an entity in the words
it uses for a run (roll the deploy back, `starter.py replay`), which do not help here, and
said a turn it had sent "may still be answered". `EntityWedged` names the agent, its
workflow, what fails, and the way out: `starter.py agent reset NAME`
(`api/entity_reset.py`), or rolling a deploy back when the failure is nondeterminism.
"""

from __future__ import annotations

import shlex

from reactive_temporal.api.chat_refusals import ChatUnavailable
from reactive_temporal.api.failing_tasks import TIMED_OUT_CAUSE
from reactive_temporal.contracts.retrying import WORKFLOW_TASK, RetryingStep

NONDETERMINISM = "non_deterministic_error"


class EntityWedged(ChatUnavailable):
    """The agent's entity fails its workflow task on every try, and takes no request.

    A ChatError, so whoever catches chat's refusals catches it. `retrying` is the failing
    task as the server shows it (its attempts, since when, its last failure and cause).
    """

    def __init__(
        self, agent_id: str, workflow_id: str, retrying: RetryingStep, *, sent: bool
    ) -> None:
        """`sent`: the request reached the entity (and is dropped when it is reset)."""
        super().__init__(wedge_message(agent_id, workflow_id, retrying, sent=sent))
        self.agent_id = agent_id
        self.workflow_id = workflow_id
        self.retrying = retrying


def wedged(retrying: RetryingStep | None) -> bool:
    """Whether `retrying` is a workflow task that fails.

    Not one a slow worker timed out: a busy worker's task is handed out again and completes.
    """
    return (
        retrying is not None
        and retrying.step == WORKFLOW_TASK
        and retrying.cause != TIMED_OUT_CAUSE
    )


def reset_command(agent_id: str) -> str:
    """The command that resets the agent's entity, as an operator types it."""
    return f"python starter.py agent reset {shlex.quote(agent_id)}"


def wedge_message(agent_id: str, workflow_id: str, retrying: RetryingStep, *, sent: bool) -> str:
    """What a request to a stuck entity is told: whose, what fails since when, what to do."""
    since = f", failing since {retrying.since:%Y-%m-%d %H:%M:%S} UTC" if retrying.since else ""
    failure = f": {retrying.last_failure.rstrip('. ')}" if retrying.last_failure else ""
    told = (
        "The request was sent and is dropped when the agent is reset: send it again then"
        if sent
        else "The request was not sent"
    )
    way_out = (
        f"`{reset_command(agent_id)}` ends it and starts a fresh one with what it knew "
        "(its sessions and last run are kept in Postgres; the Python API: "
        "`await agent.reset_entity()`)"
    )
    if retrying.cause == NONDETERMINISM:
        way_out = (
            "if a deploy changed the workflow's code, roll it back (the agent goes on where it "
            f"was); otherwise {way_out}"
        )
    return (
        f"agent {agent_id}'s chat workflow ({workflow_id}) is stuck: its workflow task keeps "
        f"failing (attempt {retrying.attempt}{since}){failure}. It takes no chat turn until "
        f"it is reset: {way_out}. {told}"
    )
