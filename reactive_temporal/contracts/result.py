"""What a run returns: its answer, how it ended, its metrics and the instant debrief.

Durable (it is the AgentRunWorkflow's result in every history): add fields only as optional.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from reactive_temporal.contracts.debrief import AgentDebrief
from reactive_temporal.contracts.run import FinalAnswerCapture, TerminatedBy


class RunMetadata(BaseModel):
    """A run's size and cost."""

    duration_ms: int = 0
    tokens_used: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    """Of the completion tokens, those a reasoning model spent thinking (priced as output)."""
    cost: float = 0.0
    steps_count: int = 0
    """LLM steps plus tool calls executed."""
    iterations: int = 0
    """Completed LLM turns."""


class AgentResult(BaseModel):
    """What a run returns: its answer, how it ended, its metrics, the instant debrief."""

    output: str
    success: bool
    run_id: str
    agent_id: str
    format: str = "text"
    terminated_by: TerminatedBy
    metadata: RunMetadata = Field(default_factory=RunMetadata)
    final_answer: FinalAnswerCapture | None = None
    tools_used: list[str] = Field(default_factory=list)
    """Real tools the run called, in first-use order (meta-tools like final-answer excluded)."""
    error: str | None = None
    """Why the run failed, when it did (e.g. the LLM error)."""
    debrief: AgentDebrief | None = None
    """The instant deterministic debrief (None with memory off); see `debrief_rich()`."""
