"""A cluster's refusal of updates or update-with-start, told from every other error
(`cluster_switches.py`, `api/chat_refusals.py`): for good, never waited out, in words that
name the setting. The words are the frontend's (`service/frontend/errors.go`, measured on the
dev server for updates)."""

from __future__ import annotations

import pytest
from temporalio.service import RPCError, RPCStatusCode

from reactive_temporal.api.chat_refusals import (
    ChatError,
    ClusterRefusal,
    busy_or_between_runs,
    cluster_refusal,
)
from reactive_temporal.cluster_switches import UPDATE_WITH_START, UPDATES, switch_refused
from reactive_temporal.refusals import busy_or_aborted, unreachable, while_busy

DENIED = RPCStatusCode.PERMISSION_DENIED
UPDATES_OFF = RPCError(
    "UpdateWorkflowExecution operation is disabled on this namespace.", DENIED, b""
)
WITH_START_OFF = RPCError("ExecuteMultiOperation API is disabled on this namespace.", DENIED, b"")
UNKNOWN = RPCError(
    "unknown method UpdateWorkflowExecution for service "
    "temporal.api.workflowservice.v1.WorkflowService",
    RPCStatusCode.UNIMPLEMENTED,
    b"",
)
UNAUTHORIZED = RPCError("Request unauthorized.", DENIED, b"")
MISSING = RPCError("workflow not found for ID: x", RPCStatusCode.NOT_FOUND, b"")


@pytest.mark.parametrize("err", [UPDATES_OFF, WITH_START_OFF, UNKNOWN])
async def test_a_refusal_for_good_is_not_waited_out(err: RPCError):
    tries: list[int] = []

    async def attempt() -> None:
        tries.append(1)
        raise err

    with pytest.raises(RPCError):
        await while_busy(attempt, "an update", passing=busy_or_between_runs, unreachable_for=60)
    assert len(tries) == 1
    assert not busy_or_aborted(err) and not unreachable(err)


def test_each_switch_is_told_by_its_own_words():
    assert switch_refused(UPDATES_OFF) is UPDATES
    assert switch_refused(WITH_START_OFF) is UPDATE_WITH_START
    assert switch_refused(UNAUTHORIZED) is None  # an authorizer's refusal is not a switch
    assert switch_refused(UNKNOWN) is None  # which API is unknown, only the caller knows


def test_the_refusal_names_the_setting_the_release_and_the_servers_words():
    refusal = cluster_refusal(UPDATES_OFF, "agents")
    assert isinstance(refusal, ClusterRefusal) and isinstance(refusal, ChatError)
    assert refusal.setting == "frontend.enableUpdateWorkflowExecution"
    said = str(refusal)
    assert "namespace 'agents'" in said and UPDATES_OFF.message in said
    assert "set the dynamic config frontend.enableUpdateWorkflowExecution to true" in said
    assert "Temporal Server 1.25.0" in said

    started = cluster_refusal(WITH_START_OFF, "agents", UPDATE_WITH_START)
    assert started is not None and started.setting == "frontend.enableExecuteMultiOperation"
    assert "1.26.2" in str(started) and "always on from 1.30.0" in str(started)


def test_an_api_the_server_lacks_is_the_one_called():
    refusal = cluster_refusal(UNKNOWN, "agents")
    assert refusal is not None and refusal.setting == UPDATES.key
    assert "does not implement workflow updates" in str(refusal)
    assert "upgrade the server to Temporal Server 1.25.0" in str(refusal)


@pytest.mark.parametrize("err", [UNAUTHORIZED, MISSING, ValueError("no")])
def test_other_errors_are_no_cluster_refusal(err: Exception):
    assert cluster_refusal(err, "agents") is None
