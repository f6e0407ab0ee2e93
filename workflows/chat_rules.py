"""Chat decisions: which path a message takes, and what context the model gets.

Pure functions (reference §4–5), so AgentWorkflow stays orchestration and the rules are
tested in milliseconds. Where upstream is buggy or thin we do better, on purpose:
success rates print as percentages, the direct path keeps the agent's own system prompt and
windows its history too, and observations are kept even when there is no debrief.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from reactive_temporal import prompts
from reactive_temporal.contracts import names
from reactive_temporal.contracts.debrief import AgentDebrief
from reactive_temporal.contracts.entity import (
    CHAT_MESSAGE_MAX_CHARS,
    ChatMessage,
    ChatRequest,
    RoutedVia,
)
from reactive_temporal.limits import CHAT_CONTEXT_MAX_CHARS, agent_config_problem
from reactive_temporal.sanitize import clean_text, clip

_CHAT_OVERRIDE_PHRASES = (
    r"\b(what did you|tell me about|which one|summarize|explain|describe|how did)\b",
    r"\b(in the last run|earlier|previous|before)\b",
)
_TOOL_INTENT_PHRASES = (
    r"\b(search for|fetch|look up|what is the current|what are the latest)\b",
    r"\b(write to|create a|save to|send a|post to|update the|delete the)\b",
    r"\b(run this|execute this|calculate|compute)\b",
)
# The released code's regexes are JavaScript's `/\b(...)\b/i` without the `u` flag: `\b` is
# an ASCII word boundary ([A-Za-z0-9_]), and ignoring case never takes a non-ASCII character
# for an ASCII one (ECMAScript's Canonicalize keeps a character whose uppercase is ASCII while
# it is not). re.ASCII | re.IGNORECASE is exactly that. Python's Unicode matching differs both
# ways: `ſ` (long s) matched "s", `K` (Kelvin sign) "k", `ı` and `İ` "i"; and `é`, `ß`, CJK or
# Arabic-Indic digits next to a phrase were word characters, so `éfetch` was no "fetch".
CHAT_OVERRIDE_PATTERNS = tuple(re.compile(p, re.ASCII | re.I) for p in _CHAT_OVERRIDE_PHRASES)
TOOL_INTENT_PATTERNS = tuple(re.compile(p, re.ASCII | re.I) for p in _TOOL_INTENT_PHRASES)
UNICODE_CHAT_OVERRIDE_PATTERNS = tuple(re.compile(p, re.I) for p in _CHAT_OVERRIDE_PHRASES)
UNICODE_TOOL_INTENT_PATTERNS = tuple(re.compile(p, re.I) for p in _TOOL_INTENT_PHRASES)
"""How entity runs from before the chat-routing-ascii patch matched, and keep matching."""

OBSERVATIONS_MAX_CHARS = 3_000
OBSERVATION_TRUNCATE_MIN_CHARS = 100
HISTORY_MAX_MESSAGES = 40
HISTORY_MAX_CHARS = 8_000
TOOL_PATH_DEFAULT_ITERATIONS = 5
MAX_TOOL_PATH_ITERATIONS = 50
KEEP_OBSERVATIONS = 20


def chat_request_problem(request: ChatRequest, agent_id: str) -> str | None:
    """Why a chat turn is refused before the agent takes it, or None (the session's own
    state is the entity's to check)."""
    if not request.message.strip():
        return "message is empty"
    if "\x00" in request.message:
        return "message contains a NUL byte (\\x00), which cannot be stored"
    if len(request.message) > CHAT_MESSAGE_MAX_CHARS:
        return (
            f"message is {len(request.message)} characters; the limit is {CHAT_MESSAGE_MAX_CHARS}"
        )
    if request.max_iterations is not None and not (
        1 <= request.max_iterations <= MAX_TOOL_PATH_ITERATIONS
    ):
        return f"max_iterations must be between 1 and {MAX_TOOL_PATH_ITERATIONS}"
    # the caller's own configuration travels into the turn's activity (twice) or its tool-path
    # run: one past the limits builders keep (a system prompt, and as much in its lists of
    # tools) made an input over 2 MB, the agent's workflow task failing forever
    if request.agent is not None and (problem := agent_config_problem(request.agent)):
        return f"invalid agent configuration: {problem}"
    # another agent's id would write this turn into that agent's run (its transcript, result
    # and live output): ids are this agent's own
    if request.stream_id is not None and not names.is_chat_run_workflow_id(
        request.stream_id, agent_id
    ):
        return (
            f"invalid stream_id {request.stream_id[:100]!r}: use run-{agent_id[:100]}-chat-"
            "<12 hex> (Agent.new_chat_stream_id())"
        )
    return None


def requires_tools(message: str, *, ascii_words: bool) -> bool:
    """Conversational phrasing wins; then tool-intent phrases; otherwise no tools.

    `ascii_words`: match as the released code does (entity runs since the chat-routing-ascii
    patch); else with Python's Unicode words and case (entity runs from before it)."""
    overrides, intents = (
        (CHAT_OVERRIDE_PATTERNS, TOOL_INTENT_PATTERNS)
        if ascii_words
        else (UNICODE_CHAT_OVERRIDE_PATTERNS, UNICODE_TOOL_INTENT_PATTERNS)
    )
    if any(p.search(message) for p in overrides):
        return False
    return any(p.search(message) for p in intents)


def route(message: str, use_tools: bool | None, *, ascii_words: bool) -> RoutedVia:
    wants_tools = (
        requires_tools(message, ascii_words=ascii_words) if use_tools is None else use_tools
    )
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
    """What the agent knows of its last run, for either chat path: the debrief and the
    observations that fit their budget."""
    return clip(
        prompts.last_run_context(debrief, cap_observations(observations)), CHAT_CONTEXT_MAX_CHARS
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


def with_history_block(message: str, history: Sequence[ChatMessage]) -> str:
    """The message with its windowed prior turns as a labelled text block (not as chat
    messages, which made models re-run tools on follow-ups upstream)."""
    return prompts.with_history(message, window_history(history))


def tool_path_task(
    message: str, context: str, history: Sequence[ChatMessage], *, quoted: bool = False
) -> str:
    """The task of a chat turn's tool-path run: the request, the last run's context (quoted
    notes, with `quoted`), and the windowed history; without NUL (U+FFFD in its place, as the
    store keeps text). A run's task may hold none, and a NUL in a model's earlier reply in
    the session, a live run's last observation or the last run's news refused every tool-path
    chat (the child run's input did not validate) until it left the context."""
    task = with_history_block(prompts.tool_path_request(message, context, quoted=quoted), history)
    return clean_text(task, nul=True)
