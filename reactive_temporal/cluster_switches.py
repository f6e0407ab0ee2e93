"""What a Temporal cluster may switch off that chat and approvals need, and how it says so.

Every chat turn, session open and end, session page, `last_debrief` and approval decision is a
workflow update, and the agent's entity is started by its first one (update-with-start). Both
are switches of a self-hosted cluster's dynamic config, per namespace, which older releases
left off and locked-down operators still turn off. The frontend refuses a call of a feature
switched off with PERMISSION_DENIED and a fixed message (the server's
`service/frontend/errors.go`), and a server too old to have it answers UNIMPLEMENTED. Sent
again, either is refused again, so neither is waited out (`refusals.while_busy` passes
neither), and what refused it is said in words an operator can act on.

Measured on the dev server (Server 1.32), read in the server's source at its release tags:

- `frontend.enableUpdateWorkflowExecution`: off to 1.24.x, on by default from 1.25.0. Off, it
  refuses "UpdateWorkflowExecution operation is disabled on this namespace.", an
  update-with-start's update too (its start is then aborted: nothing is started).
- `frontend.enableExecuteMultiOperation` (update-with-start): off from 1.24.0 (where the API
  came) to 1.26.1, on by default from 1.26.2, gone and always on from 1.30.0. Off, it refuses
  "ExecuteMultiOperation API is disabled on this namespace."; a server before 1.24 answers
  UNIMPLEMENTED.

`frontend.enableUpdateWorkflowExecutionAsyncAccepted` gates only an update started without
waiting for its result (`start_update`), which nothing here sends: turned off, every call here
still passed (measured).
"""

from __future__ import annotations

from dataclasses import dataclass

from temporalio.service import RPCError, RPCStatusCode


@dataclass(frozen=True)
class Switch:
    """One feature a namespace may have switched off, and how to switch it on."""

    key: str
    """The dynamic config key that turns it on."""
    feature: str
    api: str
    """The frontend's API for it (what UNIMPLEMENTED leaves out)."""
    refusal: str
    """What the frontend says, PERMISSION_DENIED, when the switch is off."""
    used_for: str
    """What the project does with it, as the end of "…, which …"."""
    on_by_default_since: str
    always_on_since: str | None = None
    """The release from which the switch is gone and the feature always on."""

    def fix(self) -> str:
        """What an operator does: the key to set, or the release that has it on."""
        since = f"the default from Temporal Server {self.on_by_default_since}"
        if self.always_on_since is not None:
            since += f"; always on from {self.always_on_since}"
        return f"set the dynamic config {self.key} to true for the namespace ({since})"

    def upgrade(self) -> str:
        """What to do when the server lacks the API altogether."""
        return (
            f"upgrade the server to Temporal Server {self.on_by_default_since} or later, where "
            f"{self.feature} is on by default (or let a proxy in front of it pass {self.api})"
        )


UPDATES = Switch(
    key="frontend.enableUpdateWorkflowExecution",
    feature="workflow updates",
    api="UpdateWorkflowExecution",
    refusal="UpdateWorkflowExecution operation is disabled",
    used_for="chat, sessions and approvals need",
    on_by_default_since="1.25.0",
)
UPDATE_WITH_START = Switch(
    key="frontend.enableExecuteMultiOperation",
    feature="update-with-start",
    api="ExecuteMultiOperation",
    refusal="ExecuteMultiOperation API is disabled",
    used_for="starts an agent's entity with its first chat turn",
    on_by_default_since="1.26.2",
    always_on_since="1.30.0",
)
SWITCHES = (UPDATES, UPDATE_WITH_START)


def switched_off(err: BaseException, switch: Switch) -> bool:
    """The frontend refused the call because the namespace has `switch` off."""
    return (
        isinstance(err, RPCError)
        and err.status == RPCStatusCode.PERMISSION_DENIED
        and switch.refusal in err.message
    )


def unimplemented(err: BaseException) -> bool:
    """The server (or a proxy in front of it) does not know the API called."""
    return isinstance(err, RPCError) and err.status == RPCStatusCode.UNIMPLEMENTED


def switch_refused(err: BaseException) -> Switch | None:
    """The switch whose refusal `err` is, whatever was called; None for anything else."""
    return next((s for s in SWITCHES if switched_off(err, s)), None)


def refused_for_good(err: BaseException, switch: Switch) -> bool:
    """A call of `switch`'s API refused until the cluster changes: switched off, or unknown."""
    return switched_off(err, switch) or unimplemented(err)


def refusal_message(err: RPCError, switch: Switch, namespace: str) -> str:
    """One line: what the cluster refused, in its own words, and what to do about it."""
    if unimplemented(err):
        return (
            f"the Temporal server does not implement {switch.feature} ({switch.api}: "
            f"{err.message!r}), which {switch.used_for}: {switch.upgrade()}"
        )
    return (
        f"the Temporal cluster refuses {switch.feature} in namespace {namespace!r} "
        f"({err.message!r}), which {switch.used_for}: {switch.fix()}"
    )
