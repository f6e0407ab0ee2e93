"""reactive-temporal: durable ReAct agents on Temporal.

    from reactive_temporal import ReactiveAgents, tool

The public names below are imported on first use (PEP 562), not when the package is: the
workflows and activities import `reactive_temporal.contracts`, which must not pull in the
Temporal client, the embedded stack or the encryption codec along with this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reactive_temporal.access import (
        TemporalAccessDenied,
        TemporalCredentialsRejected,
        TemporalPermissionDenied,
    )
    from reactive_temporal.api.agents import Agent
    from reactive_temporal.api.builder import AgentBuilder, ReactiveAgents
    from reactive_temporal.api.bulk_cancel import CancelledRuns
    from reactive_temporal.api.chat_refusals import ChatError, ChatUnavailable, ClusterRefusal
    from reactive_temporal.api.entity_closing import EntityEnded
    from reactive_temporal.api.entity_leaving import EntityWaitsOnApproval
    from reactive_temporal.api.entity_reset import EntityReset
    from reactive_temporal.api.entity_wedge import EntityWedged
    from reactive_temporal.api.process_metrics import serve_metrics
    from reactive_temporal.api.run_results import AgentRunError, RunResult
    from reactive_temporal.api.sessions import Session
    from reactive_temporal.config import Settings
    from reactive_temporal.contracts.debrief import AgentDebrief
    from reactive_temporal.contracts.entity import ChatMessage, ChatReply
    from reactive_temporal.contracts.result import AgentResult, RunMetadata
    from reactive_temporal.contracts.retrying import RetryingStep, WaitingForWorker
    from reactive_temporal.contracts.run import FinalAnswerCapture, RunProgress
    from reactive_temporal.tools import Tool, ToolCallContext, current_tool_call, tool

_EXPORTS = {
    "Agent": "reactive_temporal.api.agents",
    "AgentBuilder": "reactive_temporal.api.builder",
    "AgentRunError": "reactive_temporal.api.run_results",
    "CancelledRuns": "reactive_temporal.api.bulk_cancel",
    "ReactiveAgents": "reactive_temporal.api.builder",
    "RunResult": "reactive_temporal.api.run_results",
    "ChatError": "reactive_temporal.api.chat_refusals",
    "ChatUnavailable": "reactive_temporal.api.chat_refusals",
    "ClusterRefusal": "reactive_temporal.api.chat_refusals",
    "EntityEnded": "reactive_temporal.api.entity_closing",
    "EntityReset": "reactive_temporal.api.entity_reset",
    "EntityWaitsOnApproval": "reactive_temporal.api.entity_leaving",
    "EntityWedged": "reactive_temporal.api.entity_wedge",
    "Session": "reactive_temporal.api.sessions",
    "TemporalAccessDenied": "reactive_temporal.access",
    "TemporalCredentialsRejected": "reactive_temporal.access",
    "TemporalPermissionDenied": "reactive_temporal.access",
    "Settings": "reactive_temporal.config",
    "AgentDebrief": "reactive_temporal.contracts.debrief",
    "ChatMessage": "reactive_temporal.contracts.entity",
    "ChatReply": "reactive_temporal.contracts.entity",
    "AgentResult": "reactive_temporal.contracts.result",
    "RunMetadata": "reactive_temporal.contracts.result",
    "RetryingStep": "reactive_temporal.contracts.retrying",
    "WaitingForWorker": "reactive_temporal.contracts.retrying",
    "FinalAnswerCapture": "reactive_temporal.contracts.run",
    "RunProgress": "reactive_temporal.contracts.run",
    "Tool": "reactive_temporal.tools",
    "ToolCallContext": "reactive_temporal.tools",
    "current_tool_call": "reactive_temporal.tools",
    "serve_metrics": "reactive_temporal.api.process_metrics",
    "tool": "reactive_temporal.tools",
}

__all__ = [
    "Agent",
    "AgentBuilder",
    "AgentDebrief",
    "AgentResult",
    "AgentRunError",
    "CancelledRuns",
    "ChatError",
    "ChatUnavailable",
    "ChatMessage",
    "ChatReply",
    "ClusterRefusal",
    "EntityEnded",
    "EntityReset",
    "EntityWaitsOnApproval",
    "EntityWedged",
    "FinalAnswerCapture",
    "ReactiveAgents",
    "RetryingStep",
    "RunMetadata",
    "RunProgress",
    "RunResult",
    "Session",
    "Settings",
    "TemporalAccessDenied",
    "TemporalCredentialsRejected",
    "TemporalPermissionDenied",
    "Tool",
    "ToolCallContext",
    "WaitingForWorker",
    "current_tool_call",
    "serve_metrics",
    "tool",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use, and keep the name here afterwards."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
