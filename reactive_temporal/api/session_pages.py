"""A chat session's whole history, from the agent's entity and Postgres.

The entity holds each open session's latest window; the rest (or all of an ended session) is
in Postgres, read back through the entity a page at a time (`read_session`). Out of
`api/entity_handle.py`, which sends the requests, so that each module keeps to one job.
"""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import timedelta
from typing import TYPE_CHECKING, TypeVar

from temporalio.service import RPCError

from reactive_temporal.api.retrying_steps import QUERY_PATIENCE_SECONDS
from reactive_temporal.contracts.entity import ChatMessage, SessionHistory, SessionPage, SessionRef
from reactive_temporal.errors import workflow_not_found
from workflows.agent_entity import AgentWorkflow

if TYPE_CHECKING:
    from reactive_temporal.api.entity_handle import AgentEntity

T = TypeVar("T")


async def whole_history(entity: AgentEntity, session_id: str) -> SessionHistory:
    """A session's whole history.

    What the agent holds, and what it paged out to Postgres (or all of it, for an ended
    session) read back a page at a time; empty when neither the agent nor Postgres knows
    the session.
    """
    await entity.require_served()
    query = entity.handle().query(
        AgentWorkflow.history,
        SessionRef(session_id=session_id),
        rpc_timeout=timedelta(seconds=QUERY_PATIENCE_SECONDS),
    )
    held = await _unless_missing(query, SessionHistory(session_id=session_id))
    if held.complete or (held.total_messages is None and held.messages):
        return held  # an entity from before sessions were saved turn by turn holds it all
    messages: list[ChatMessage] = []
    total = held.total_messages
    while total is None or len(messages) < total:
        page = await entity.update(
            AgentWorkflow.read_session, SessionPage(session_id=session_id, offset=len(messages))
        )
        total = page.total_messages or 0
        if not page.messages:
            break
        messages += page.messages
    return SessionHistory(session_id=session_id, messages=messages, total_messages=len(messages))


async def _unless_missing(query: Awaitable[T], default: T) -> T:
    """A query's answer, or `default` when the agent has no entity yet."""
    try:
        return await query
    except RPCError as err:
        if workflow_not_found(err):
            return default
        raise
