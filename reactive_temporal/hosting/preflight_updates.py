"""`starter.py check`'s `workflow updates` row: whether the cluster takes what chat needs.

Chat, sessions and approvals are workflow updates, and an agent's entity is started by its
first (update-with-start); a self-hosted namespace may have either switched off
(`reactive_temporal.cluster_switches`). Each is asked with a call the frontend refuses
before it reaches any workflow, so the check leaves nothing behind:

- an update of a workflow id no one starts: NOT_FOUND when updates are on, PERMISSION_DENIED
  when switched off (the frontend checks its switch before it looks for the workflow);
- an ExecuteMultiOperation of no operation: INVALID_ARGUMENT ("Operations have to be exactly
  [Start, Update].") when on, PERMISSION_DENIED when switched off (checked first, in every
  release that had the switch), UNIMPLEMENTED on a server before 1.24.

Updates refused fail the row (chat, sessions and approvals would all be refused); only
update-with-start refused warns (chat starts the entity first: one more call).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.update.v1 import Input, Meta, Request
from temporalio.api.workflowservice.v1 import (
    ExecuteMultiOperationRequest,
    UpdateWorkflowExecutionRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from reactive_temporal.access import refusal_kind
from reactive_temporal.cluster_switches import (
    UPDATE_WITH_START,
    UPDATES,
    Switch,
    refusal_message,
    refused_for_good,
)
from reactive_temporal.errors import workflow_not_found
from reactive_temporal.hosting.access_probes import NAME as PERMISSIONS
from reactive_temporal.hosting.preflight import Check, Late, not_checked, within

NAME = "workflow updates"
PROBE_WORKFLOW_PREFIX = "reactive-temporal-check-no-such-workflow-"
"""The probe update's workflow id, with a fresh uuid: never started by anyone."""
ON = "on"


async def updates_check(client: Client, seconds: float) -> Check:
    """The `workflow updates` row: both switches asked at once, each within `seconds`."""
    try:
        updates, with_start = await asyncio.gather(
            _ask(client, seconds, UPDATES, _probe_update(client, seconds), workflow_not_found),
            _ask(
                client,
                seconds,
                UPDATE_WITH_START,
                _probe_multi_operation(client, seconds),
                lambda err: err.status == RPCStatusCode.INVALID_ARGUMENT,
            ),
        )
    except Late as err:
        return Check(NAME, "fail", str(err))
    refused_updates, said_updates = updates
    refused_start, said_start = with_start
    if refused_updates:
        return Check(NAME, "fail", said_updates)
    if refused_start:
        return Check(
            NAME,
            "warn",
            f"{said_start}. Without it, chat starts the entity first (one more call when it "
            "does not run)",
        )
    unclear = dict.fromkeys(said for said in (said_updates, said_start) if said != ON)
    if unclear:  # the namespace missing (its row says so), or an answer no release gives
        return not_checked(NAME, "; ".join(unclear))
    return Check(NAME, "ok", "the namespace takes updates and update-with-start")


async def _ask(
    client: Client,
    seconds: float,
    switch: Switch,
    probe: Awaitable[object],
    on_when: Callable[[RPCError], bool],
) -> tuple[bool, str]:
    """Whether `switch` refuses for good, and the row's words for it: ON when the probe is
    answered as a cluster with it on answers it (`on_when`)."""
    try:
        await within(seconds, probe, f"the probe of {switch.feature}")
    except RPCError as err:
        if on_when(err):
            return False, ON
        if refused_for_good(err, switch):
            return True, refusal_message(err, switch, client.namespace)
        if refusal_kind(err.status, err.message) is not None:  # the caller's, not the cluster's
            return False, f"the credentials may not send updates (the `{PERMISSIONS}` row says)"
        return False, f"the server answered {err.message!r}"
    return False, ON  # taken (no server does): not refused, anyway


def _probe_update(client: Client, seconds: float) -> Awaitable[object]:
    """An update of a workflow no one starts (NOT_FOUND when updates are on)."""
    return client.workflow_service.update_workflow_execution(
        UpdateWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(
                workflow_id=PROBE_WORKFLOW_PREFIX + uuid.uuid4().hex
            ),
            request=Request(meta=Meta(update_id=uuid.uuid4().hex), input=Input(name="check")),
        ),
        retry=False,
        timeout=timedelta(seconds=seconds),
    )


def _probe_multi_operation(client: Client, seconds: float) -> Awaitable[object]:
    """An ExecuteMultiOperation of no operation (INVALID_ARGUMENT when it is on)."""
    return client.workflow_service.execute_multi_operation(
        ExecuteMultiOperationRequest(namespace=client.namespace),
        retry=False,
        timeout=timedelta(seconds=seconds),
    )
