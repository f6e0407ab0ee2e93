"""Chat decisions: which path a message takes, and what context the model gets.

Pure functions (reference §4–5), so AgentWorkflow stays orchestration and the rules are
tested in milliseconds. Where upstream is buggy or thin we do better, on purpose:
success rates print as percentages, the direct path keeps the agent's own system prompt and
windows its history too, and observations are kept even when there is no debrief.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from reactive_temporal.contracts.debrief import AgentDebrief
from reactive_temporal.contracts.entity import ChatMessage, RoutedVia
from reactive_temporal.contracts.run import RunProgress

CHAT_OVERRIDE_PATTERNS = (
    re.compile(
        r"\b(what did you|tell me about|which one|summarize|explain|describe|how did)\b", re.I
    ),
    re.compile(r"\b(in the last run|earlier|previous|before)\b", re.I),
)
TOOL_INTENT_PATTERNS = (
    re.compile(r"\b(search for|fetch|look up|what is the current|what are the latest)\b", re.I),
    re.compile(r"\b(write to|create a|save to|send a|post to|update the|delete the)\b", re.I),
    re.compile(r"\b(run this|execute this|calculate|compute)\b", re.I),
)

OBSERVATIONS_MAX_CHARS = 3_000
OBSERVATION_TRUNCATE_MIN_CHARS = 100
HISTORY_MAX_MESSAGES = 40
HISTORY_MAX_CHARS = 8_000
TOOL_PATH_DEFAULT_ITERATIONS = 5
KEEP_OBSERVATIONS = 20


def requires_tools(message: str) -> bool:
    """Conversational phrasing wins; then tool-intent phrases; otherwise no tools."""
    if any(p.search(message) for p in CHAT_OVERRIDE_PATTERNS):
        return False
    return any(p.search(message) for p in TOOL_INTENT_PATTERNS)


def route(message: str, use_tools: bool | None) -> RoutedVia:
    wants_tools = requires_tools(message) if use_tools is None else use_tools
    return "react-loop" if wants_tools else "direct-llm"


# -- what a run leaves behind for chat -------------------------------------------------------


def tool_observation(content: str, success: bool) -> str | None:
    """A tool result worth remembering for chat, as the reference filters them."""
    text = content.strip()
    if not success or len(text) <= 10 or text.startswith(("⚠️", "✓ final-answer")):
        return None
    return f"[Tool result]: {text}"


def analysis_observation(thought: str | None) -> str | None:
    """The model's reasoning right after reading tool results, when substantial."""
    text = (thought or "").strip()
    return f"[Agent analysis]: {text}" if len(text) > 50 else None


def keep_recent(observations: list[str], new: Sequence[str | None]) -> list[str]:
    """Append, keeping the most recent few, each clipped: chat reads at most 3,000 chars."""
    added = [o[:OBSERVATIONS_MAX_CHARS] for o in new if o]
    return (observations + added)[-KEEP_OBSERVATIONS:]


# -- context ------------------------------------------------------------------------------------


def cap_observations(
    observations: Sequence[str], budget: int = OBSERVATIONS_MAX_CHARS
) -> list[str]:
    """Whole observations while they fit; the first that does not is cut to the remaining
    budget (when more than 100 characters remain); then stop."""
    kept: list[str] = []
    remaining = budget
    for obs in observations:
        if len(obs) <= remaining:
            kept.append(obs)
            remaining -= len(obs)
            continue
        if remaining > OBSERVATION_TRUNCATE_MIN_CHARS:
            kept.append(obs[:remaining] + "…")
        break
    return kept


def build_context_summary(debrief: AgentDebrief | None, observations: Sequence[str]) -> str:
    """What the agent knows of its last run, for either chat path."""
    lines: list[str] = []
    if debrief is not None:
        lines += [
            "## Last Run Results",
            f"Outcome: {debrief.outcome} (confidence: {debrief.confidence})",
            f"Summary: {debrief.summary}",
        ]
        if debrief.key_findings:
            lines.append("Key findings:\n" + "\n".join(f"- {f}" for f in debrief.key_findings))
        if debrief.tools_used:
            lines.append(
                "Tools used: "
                + ", ".join(
                    f"{t.name} ({t.calls}x, {round(t.success_rate * 100)}% success)"
                    for t in debrief.tools_used
                )
            )
        if debrief.errors_encountered:
            lines.append("Errors: " + "; ".join(debrief.errors_encountered))
        m = debrief.metrics
        lines.append(
            f"Metrics: {m.iterations} iterations, {m.tokens} tokens, {m.duration_ms / 1000:.1f}s"
        )
    kept = cap_observations(observations)
    if kept:
        lines.append(
            "\n## Tool Results (from last run)\n"
            + "\n\n".join(f"### Result {i}\n{obs}" for i, obs in enumerate(kept, start=1))
        )
    if not lines:
        return ""
    lines.append(
        "\nUse this information to answer questions about what you did, found, or "
        "accomplished. Reference specific data from tool results when answering."
    )
    return "\n".join(lines)


def live_run_context(progress: RunProgress) -> str:
    """The state of a run still in progress (mid-run chat)."""
    tools = ", ".join(progress.tools_called) or "none yet"
    lines = [
        "## Run in progress",
        f"Run {progress.run_id} is at iteration {progress.current_iteration} of "
        f"{progress.max_iterations}.",
        f"Tools called so far: {tools}.",
    ]
    if progress.current_tool:
        lines.append(f"Running now: {progress.current_tool}.")
    if progress.last_observation:
        lines.append(f"Last observation: {progress.last_observation}")
    lines.append("Answer from this live state; the run continues undisturbed.")
    return "\n".join(lines)


def direct_system_prompt(agent_id: str, system_prompt: str | None, context: str) -> str:
    """The agent's own persona (upstream drops it), then the context, then the brief."""
    persona = (system_prompt or "").strip() or f"You are {agent_id}, a helpful AI agent."
    if not context:
        return f"{persona}\n\nAnswer conversationally and concisely."
    return (
        f"{persona}\n\nHere is context from your recent work:\n\n{context}\n\n"
        "Answer conversationally and concisely."
    )


# -- history ------------------------------------------------------------------------------------


def window_history(
    history: Sequence[ChatMessage],
    max_messages: int = HISTORY_MAX_MESSAGES,
    max_chars: int = HISTORY_MAX_CHARS,
) -> list[ChatMessage]:
    """The last 40 messages, then drop the oldest until the contents fit in 8,000 chars."""
    window = list(history)[-max_messages:]
    while window and sum(len(m.content) for m in window) > max_chars:
        window.pop(0)
    return window


def format_history_block(history: Sequence[ChatMessage]) -> str:
    lines = [f"{'User' if m.role == 'user' else 'Assistant'}: {m.content}" for m in history]
    return "--- Conversation history ---\n" + "\n".join(lines)


def with_history_block(message: str, history: Sequence[ChatMessage]) -> str:
    """The message with prior turns as a labelled text block (not as chat messages, which
    made models re-run tools on follow-ups upstream)."""
    window = window_history(history)
    if not window:
        return message
    return f"{format_history_block(window)}\n\n--- Current message ---\n{message}"


def tool_path_task(message: str, context: str, history: Sequence[ChatMessage]) -> str:
    enriched = (
        f"Context from prior run:\n{context}\n\nNew request: {message}" if context else message
    )
    return with_history_block(enriched, history)
