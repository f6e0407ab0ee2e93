"""A run's result as the Python API hands it out, with its rich debrief one call away.

It is awaited through a busy server, and a run that produced none is raised as
AgentRunError. `Agent.run` and `Agent.result` return it, and `starter.py cancel` awaits a run
with no Agent at hand; sharing this, they tell a failed run from a run that ended without an
answer (`success=False`) the same way.
"""

from __future__ import annotations

from typing import Any

from pydantic import PrivateAttr
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle

from reactive_temporal.api.debriefs import fetch_rich_debrief
from reactive_temporal.api.results import UNREACHABLE_PATIENCE_SECONDS, result_of
from reactive_temporal.contracts.debrief import AgentDebrief
from reactive_temporal.contracts.result import AgentResult
from reactive_temporal.errors import root_cause


class AgentRunError(RuntimeError):
    """A run could not produce a result (as opposed to a result with success=False)."""


class RunResult(AgentResult):
    """An AgentResult that can also fetch the run's rich debrief."""

    _client: Client | None = PrivateAttr(default=None)

    async def debrief_rich(self) -> AgentDebrief | None:
        """Await the LLM-synthesized debrief.

        Returns:
            The rich debrief; the instant one when synthesis was skipped or failed; None when
            the run had no debrief (memory off).
        """
        if self.debrief is None or self._client is None:
            return None
        return await fetch_rich_debrief(self._client, self.run_id, fallback=self.debrief)


async def run_result(
    client: Client,
    handle: WorkflowHandle[Any, AgentResult],
    *,
    unreachable_for: float = UNREACHABLE_PATIENCE_SECONDS,
) -> RunResult:
    """The run's result once it ends.

    Raises:
        AgentRunError: when the run produced none (it failed, or was terminated).
    """
    try:
        plain = await result_of(handle, unreachable_for=unreachable_for)
    except WorkflowFailureError as err:
        raise AgentRunError(f"run {handle.id} failed: {root_cause(err)}") from err
    result = RunResult.model_validate(plain.model_dump())
    result._client = client
    return result
