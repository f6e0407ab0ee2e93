"""The offline demo model: what `ScriptedLLM` answers a model with no script (the demo's and
`make demo`'s). A small rule-based agent: arithmetic with the calculator, the time, then
final-answer; a debrief synthesis with the JSON it asks for; a chat turn in a line."""

from __future__ import annotations

import json
import re
from typing import Any

from reactive_temporal.embedded.scripted_replies import Reply, Step, call
from reactive_temporal.prompts import CHAT_STYLE, SYNTHESIS_SYSTEM_PROMPT

_EXPRESSION = re.compile(r"[-+(]*\d[\d\s.+\-*/^%()]*[\d)]")
_OPERATOR = re.compile(r"\d\s*(\*\*|[-+*/^%])\s*[-+(]*\d")
"""A binary operator between two numbers: `17 * 23`, `2**10`, `2^-3`, `2*(3+4)`."""
_NOTES = re.compile(r"<notes>\n(.*?)\n</notes>", re.DOTALL)
"""A quoted block of what chat knows of the agent's runs (prompts.quoted_block)."""
OFFLINE_NOTE = (
    "(offline model) I only know arithmetic and the time. Point OPENAI_BASE_URL / "
    "OPENAI_API_KEY at a real model for anything else."
)


def _find_expression(task: str) -> str | None:
    candidates = [m.group(0).strip() for m in _EXPRESSION.finditer(task)]
    with_operator = [c for c in candidates if _OPERATOR.search(c)]
    return max(with_operator, key=len) if with_operator else None


def _demo_debrief(messages: list[dict[str, Any]]) -> Reply:
    """Answer a debrief synthesis request with the JSON it asks for."""
    prompt = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
    task = prompt.split("\n", 1)[0].removeprefix("Task: ").strip()
    output = prompt.split("what the user received as the task answer):\n", 1)[-1]
    output = output.split("\n\nTerminated by:", 1)[0].strip()
    tools = re.findall(r"^- ([\w/.-]+): (\d+) call", prompt, re.MULTILINE)
    used = ", ".join(f"{name} ({calls}x)" for name, calls in tools) or "no tools"
    return Reply(
        json.dumps(
            {
                "summary": f'The agent worked on "{task[:120]}" using {used} and answered: '
                f"{output[:200]}",
                "key_findings": [f"Answer: {output[:200]}"],
                "errors_encountered": [],
                "lessons_learned": [f"For tasks like this, {used} gets the answer directly."],
                "caveats": "Written by the offline scripted model, not a real LLM.",
            }
        )
    )


def _demo_chat(system: str) -> Reply:
    """A direct-path chat turn: quote what the context says about the last run."""
    summary = re.search(r"^Summary: (.+)$", system, re.MULTILINE)
    result = re.search(r"^\[Tool result\]: (.+)$", system, re.MULTILINE)
    live = re.search(r"^Run (\S+) is at iteration (\d+) of (\d+)\.$", system, re.MULTILINE)
    if live:
        return Reply(f"(offline model) Run {live[1]} is at iteration {live[2]} of {live[3]}.")
    if summary:
        found = f" The tool returned {result[1]}." if result else ""
        return Reply(f"(offline model) In my last run: {summary[1]}{found}")
    return Reply(f"(offline model) I have no runs to talk about yet. {OFFLINE_NOTE}")


def demo_responder(request: dict[str, Any]) -> Step:
    """A tiny deterministic agent: calculator or current_time, then final-answer."""
    messages = request.get("messages", [])
    system = next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")
    if system == SYNTHESIS_SYSTEM_PROMPT:
        return _demo_debrief(messages)
    if system.endswith(CHAT_STYLE) and not request.get("tools"):
        # what the agent knows is in the system prompt (entities from before), or quoted ("> "
        # lines) in a <notes> block of a user turn: on a session's first turn, the same turn as
        # the question (activities/chat.py merges them), so the last message is read too
        notes = _NOTES.findall("\n".join(str(m.get("content") or "") for m in messages[1:]))
        known = "\n".join([system, *notes])
        return _demo_chat(re.sub(r"^> ?", "", known, flags=re.MULTILINE))
    offered = {t["function"]["name"] for t in request.get("tools", [])}
    task = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
    # the agent's notes may follow the task in the same turn (`request_messages` joins them):
    # an arithmetic-looking run id in them ("run-a-019748-2672985…") is no part of the task
    task = _NOTES.sub("", task)
    observations = [m.get("content") or "" for m in messages if m.get("role") == "tool"]
    expression = _find_expression(task)
    wants_time = re.search(r"\b(time|date|today)\b", task, re.I) is not None

    if not observations:
        if expression and "calculator" in offered:
            return Reply(
                content=f"I'll compute {expression} with the calculator.",
                tool_calls=[call("calculator", expression=expression)],
            )
        if wants_time and "current_time" in offered:
            return Reply(content="I'll check the clock.", tool_calls=[call("current_time")])
        return Reply(content=f"FINAL ANSWER: {OFFLINE_NOTE}")

    result = observations[-1]
    answer = f"{expression} = {result}" if expression else f"It is now {result}."
    if "final-answer" in offered:
        return Reply(
            content="I have the result; submitting it.",
            tool_calls=[
                call(
                    "final-answer",
                    output=answer,
                    format="text",
                    summary=f"Used the {'calculator' if expression else 'current_time'} tool "
                    "and reported its result.",
                    confidence="high",
                )
            ],
        )
    return Reply(content=f"FINAL ANSWER: {answer}")
