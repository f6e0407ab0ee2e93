"""Which refusals of the server a caller waits out (`refusals.py`, `api/chat_refusals.py`): the
server being busy, an update it dropped before the workflow saw it, and (for the agent's
entity) its move to the next run; anything else is an error at once. A worker's start waits
out a listing of the search attributes the server cancelled."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesResponse
from temporalio.client import WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from reactive_temporal import search_attributes
from reactive_temporal.api.chat_refusals import busy_or_between_runs
from reactive_temporal.contracts import names
from reactive_temporal.refusals import busy, busy_or_aborted, unreachable, while_busy

IN_FLIGHT = RPCError(
    "limit on number of concurrent in-flight updates has been reached (10)",
    RPCStatusCode.RESOURCE_EXHAUSTED,
    b"",
)
ABORTED = RPCError("workflow update was aborted", RPCStatusCode.UNAVAILABLE, b"")
TOTAL = RPCError(
    "The limit on the total number of distinct updates in this workflow has been reached (2000)",
    RPCStatusCode.FAILED_PRECONDITION,
    b"",
)
CLOSED = RPCError("workflow execution already completed", RPCStatusCode.NOT_FOUND, b"")
DOWN = RPCError("tcp connect error", RPCStatusCode.UNAVAILABLE, b"")


def refused_by_the_entity(error_type: str) -> WorkflowUpdateFailedError:
    return WorkflowUpdateFailedError(
        ApplicationError("refused", type=error_type, non_retryable=True)
    )


LEAVING = refused_by_the_entity(names.ENTITY_BETWEEN_RUNS)
"""The entity's own refusal once it is time to continue as new."""
INVALID = refused_by_the_entity("ValueError")
"""A validator's refusal of the request itself (an unknown session)."""


@pytest.mark.parametrize(
    ("err", "run_waits", "entity_waits"),
    [(IN_FLIGHT, True, True), (ABORTED, True, True), (TOTAL, False, True), (CLOSED, False, False),
     (DOWN, False, False), (LEAVING, False, True), (INVALID, False, False)],
)  # fmt: skip
def test_which_refusals_are_waited_out(err: Exception, run_waits: bool, entity_waits: bool):
    """A run's updates (approval decisions) wait out a busy server and a dropped update; the
    agent's entity also its move to its next run."""
    assert busy_or_aborted(err) is run_waits
    assert busy_or_between_runs(err) is entity_waits


async def test_a_dropped_update_is_sent_again():
    tries: list[int] = []

    async def attempt() -> str:
        tries.append(len(tries))
        if len(tries) == 1:
            raise ABORTED
        return "decided"

    assert await while_busy(attempt, "a decision", passing=busy_or_aborted) == "decided"
    assert len(tries) == 2


async def test_a_cancelled_listing_of_the_search_attributes_is_sent_again():
    """A loaded dev server cancelled a worker's listing once ("operation was canceled") and the
    worker refused to start; the listing is read-only, so it is sent again."""
    listing = ListSearchAttributesResponse(
        custom_attributes=dict.fromkeys(
            search_attributes.ALL, IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD
        )
    )
    sent: list[bool] = []

    async def list_search_attributes(
        request: object, *, retry: bool
    ) -> ListSearchAttributesResponse:
        sent.append(retry)
        if len(sent) == 1:
            raise RPCError("operation was canceled", RPCStatusCode.CANCELLED, b"")
        return listing

    client = SimpleNamespace(
        operator_service=SimpleNamespace(list_search_attributes=list_search_attributes)
    )
    assert await search_attributes.ensure_registered(client, "default") == []  # type: ignore[arg-type]
    assert sent == [True, True]  # each try also retried as the SDK retries its own calls


async def test_a_listing_cancelled_for_good_stops_the_worker_with_a_clear_error(monkeypatch):
    """A server that cancels every listing would leave the worker waiting at its start for
    ever, with one warning; past the patience it refuses to start and says why."""
    monkeypatch.setattr(search_attributes, "LISTING_PATIENCE_SECONDS", 0.01)
    sent: list[bool] = []

    async def list_search_attributes(request: object, *, retry: bool) -> object:
        sent.append(retry)
        raise RPCError("operation was canceled", RPCStatusCode.CANCELLED, b"")

    client = SimpleNamespace(
        operator_service=SimpleNamespace(list_search_attributes=list_search_attributes)
    )
    with pytest.raises(search_attributes.SearchAttributesMissing) as refused:
        await search_attributes.ensure_registered(client, "prod")  # type: ignore[arg-type]
    assert "cancelled every listing of namespace 'prod'" in str(refused.value)
    assert "operation was canceled" in str(refused.value) and len(sent) >= 2


async def test_a_turn_the_entity_refuses_between_runs_is_sent_again_and_says_why(
    caplog: pytest.LogCaptureFixture,
):
    tries: list[int] = []

    async def attempt() -> str:
        tries.append(len(tries))
        if len(tries) == 1:
            raise WorkflowUpdateFailedError(
                ApplicationError(
                    "the agent is moving to its next run; send this again",
                    type=names.ENTITY_BETWEEN_RUNS,
                )
            )
        return "answered"

    assert await while_busy(attempt, "a chat turn", passing=busy_or_between_runs) == "answered"
    assert len(tries) == 2
    assert "moving to its next run" in caplog.text  # not only "Workflow update failed"


def test_a_message_too_large_for_grpc_is_not_busy():
    """The same status as a busy server, refused forever: a 5 MB chat message waited for good."""
    too_large = RPCError(
        "grpc: received message after decompression larger than max 4194304",
        RPCStatusCode.RESOURCE_EXHAUSTED,
        b"",
    )
    assert not busy(too_large) and not busy_or_aborted(too_large)
    assert busy(RPCError("namespace rate limit exceeded", RPCStatusCode.RESOURCE_EXHAUSTED, b""))


async def test_an_entity_failing_its_tasks_is_said_to_be(monkeypatch):
    """A chat sent to an agent whose workflow task keeps failing (a worker of another build
    replaying it) printed the server's "Unable to perform workflow execution update due to
    Workflow Task in failed state.", naming no agent and no way out. The server's view of the
    failing task, when it shows it failing again, makes it EntityWedged (what fails, since
    when: tests/workflow/test_entity_reset.py)."""
    from reactive_temporal.api import entity_handle
    from reactive_temporal.api.chat_refusals import ChatError
    from reactive_temporal.api.entity_handle import AgentEntity
    from reactive_temporal.api.entity_wedge import EntityWedged
    from reactive_temporal.api.stalls import Stall
    from reactive_temporal.contracts.retrying import WORKFLOW_TASK, RetryingStep
    from reactive_temporal.contracts.run import AgentConfig
    from workflows.agent_entity import AgentWorkflow

    entity = AgentEntity(None, "q", AgentConfig(agent_id="stuck", model="m"))  # type: ignore[arg-type]

    async def refused(*_: object, **__: object) -> object:
        raise RPCError(
            "Unable to perform workflow execution update due to Workflow Task in failed state.",
            RPCStatusCode.FAILED_PRECONDITION,
            b"",
        )

    seen = [Stall()]

    async def stall(*_: object) -> tuple[None, Stall]:
        return None, seen[-1]

    monkeypatch.setattr(entity, "_send", refused)
    monkeypatch.setattr(entity_handle, "workflow_stall", stall)
    with pytest.raises(ChatError, match="agent stuck's workflow .* is failing its workflow tasks"):
        await entity.update(AgentWorkflow.last_debrief, None)  # type: ignore[arg-type]
    seen.append(Stall(RetryingStep(step=WORKFLOW_TASK, attempt=3, cause="payloads_too_large")))
    with pytest.raises(EntityWedged, match=r"agent reset stuck` ends it .* was not sent$"):
        await entity.update(AgentWorkflow.last_debrief, None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("err", "out_of_reach"),
    [(DOWN, True), (RPCError("transport error", RPCStatusCode.UNKNOWN, b""), True),
     (RPCError("operation was canceled", RPCStatusCode.CANCELLED, b""), True),
     (RPCError("some other cancellation", RPCStatusCode.CANCELLED, b""), False),
     (RPCError("something else", RPCStatusCode.UNKNOWN, b""), False), (IN_FLIGHT, False),
     (CLOSED, False)],
)  # fmt: skip
def test_which_failures_are_a_server_out_of_reach(err: Exception, out_of_reach: bool):
    """A connection dropped under a call ends it as UNKNOWN "transport error" or, once the
    SDK's own retries are spent, CANCELLED "operation was canceled" (a start sent through a
    load balancer whose server restarts: bench.chaos); both are the server out of reach."""
    assert unreachable(err) is out_of_reach


def update_call_ended(cause: BaseException) -> WorkflowUpdateRPCTimeoutOrCancelledError:
    try:
        raise WorkflowUpdateRPCTimeoutOrCancelledError() from cause
    except WorkflowUpdateRPCTimeoutOrCancelledError as err:
        return err


def test_an_update_whose_connection_was_dropped_is_the_server_out_of_reach_not_a_cancel():
    """The SDK raises both an update call whose connection was dropped (CANCELLED "operation
    was canceled": a chat turn through a load balancer whose server restarts) and the caller's
    own cancellation as WorkflowUpdateRPCTimeoutOrCancelledError: the first is sent again, the
    second is the caller's, never swallowed."""
    dropped = RPCError("operation was canceled", RPCStatusCode.CANCELLED, b"")
    assert unreachable(update_call_ended(dropped))
    assert not unreachable(update_call_ended(asyncio.CancelledError()))
    deadline = RPCError("deadline exceeded", RPCStatusCode.DEADLINE_EXCEEDED, b"")
    assert not unreachable(update_call_ended(deadline))
