"""reactive-temporal: durable ReAct agents on Temporal."""

from reactive_temporal.agent import Agent, AgentBuilder, AgentRunError, ReactiveAgents
from reactive_temporal.config import Settings
from reactive_temporal.contracts import AgentResult, FinalAnswerCapture, RunMetadata, RunProgress
from reactive_temporal.tools import Tool, tool

__all__ = [
    "Agent",
    "AgentBuilder",
    "AgentResult",
    "AgentRunError",
    "FinalAnswerCapture",
    "ReactiveAgents",
    "RunMetadata",
    "RunProgress",
    "Settings",
    "Tool",
    "tool",
]
