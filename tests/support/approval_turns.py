"""A scripted model for chat turns that park on an approval: the tool path calls the
calculator (which the agent has approved by a person), a direct turn answers at once."""

from __future__ import annotations

from typing import Any

from reactive_temporal.embedded.scripted_llm import Reply
from reactive_temporal.embedded.scripted_replies import call


def calculator_then_answer(request: dict[str, Any]) -> Reply:
    """A tool-path turn calls the calculator (approval needed); a direct one answers."""
    if not request.get("tools"):
        return Reply("ok")
    if any(m["role"] == "tool" for m in request["messages"]):
        return Reply("FINAL ANSWER: 42")
    return Reply("Checking.", [call("calculator", expression="6*7")])
