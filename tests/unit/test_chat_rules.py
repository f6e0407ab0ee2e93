"""Chat routing, context and history windows (reference §4–5, §7)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reactive_temporal.contracts.debrief import AgentDebrief, DebriefMetrics, ToolUsage
from reactive_temporal.contracts.entity import ChatMessage, ChatRequest
from reactive_temporal.contracts.run import AgentConfig, RunProgress
from reactive_temporal.limits import CHAT_CONTEXT_MAX_CHARS
from reactive_temporal.prompts import (
    default_persona,
    direct_chat_system_prompt,
    history_block,
    live_run_context,
    run_system_prompt,
)
from workflows.chat_rules import (
    analysis_observation,
    build_context_summary,
    cap_observations,
    chat_request_problem,
    keep_recent,
    requires_tools,
    route,
    tool_observation,
    tool_path_task,
    window_history,
    with_history_block,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def msg(role: str, content: str) -> ChatMessage:
    return ChatMessage(role=role, content=content, timestamp=NOW)  # type: ignore[arg-type]


BOTH = pytest.mark.parametrize("ascii_words", [True, False], ids=["ascii", "unicode"])
"""Ordinary ASCII messages route the same with or without the chat-routing-ascii patch."""


@BOTH
@pytest.mark.parametrize(
    "message", ["What is 2 + 2?", "Tell me a joke", "How are you?", "What does REST mean?"]
)
def test_conversational_messages_go_direct(message, ascii_words):
    assert requires_tools(message, ascii_words=ascii_words) is False


@BOTH
@pytest.mark.parametrize(
    "message",
    [
        "Search for the latest news on AI",
        "search for restaurants nearby",
        "fetch the current weather",
        "look up the price of AAPL",
        "create a new file called notes.txt",
        "write to the database",
        "calculate 17 * 23",
        "CALCULATE 17 * 23",
        "run this script",
        "café: fetch the menu",  # non-ASCII letters, but not next to the phrase
    ],
)
def test_tool_intent_goes_to_tools(message, ascii_words):
    assert requires_tools(message, ascii_words=ascii_words) is True


@BOTH
@pytest.mark.parametrize(
    "message",
    [
        "tell me about the search results",
        "what did you search for earlier?",
        "summarize what you found",
        "explain what the fetch returned",
        "in the last run, what happened?",
        "what did you do earlier?",
        "fetch what you found before",  # overrides win even over a tool verb
        "Résumé of the previous run",
    ],
)
def test_conversational_overrides_win(message, ascii_words):
    assert requires_tools(message, ascii_words=ascii_words) is False


@BOTH
def test_find_get_and_check_do_not_route_to_tools(ascii_words):
    for message in ("find my keys", "get me a coffee", "check this out"):
        assert requires_tools(message, ascii_words=ascii_words) is False


# (message, the released code's decision, Python's Unicode matching before the patch).
# The released code is JavaScript: `/\b(...)\b/i` without the `u` flag. Its `\b` is between
# [A-Za-z0-9_] and anything else, so `é`, `ß`, CJK and the Kelvin sign are non-word there;
# its case-insensitive match compares Canonicalize(c), the one-unit uppercase of c, except
# that a non-ASCII c whose uppercase is ASCII keeps itself (ECMAScript, Canonicalize step
# for non-unicode patterns): `ſ`→`S`, `ı`→`I` are refused so stay `ſ`, `ı`; `K` (U+212A) is
# its own uppercase; so none equals an ASCII pattern letter. (Checked against Node too.)
JS_ROUTING = [
    # ſ (U+017F long s) is no "s": no tool phrase; no override either
    ("\u017fearch for the weather", False, True),
    ("\u017fummarize the run, then fetch the page", True, False),
    # the Kelvin sign (U+212A) is no "k"
    ("loo\u212a up the price of AAPL", False, True),
    # and a non-word character after an override (JS) vs a word character (Python)
    ("fetch the page, tell me about\u212a", False, True),
    # dotless ı (U+0131) and dotted İ (U+0130) are no "i": "explain" is not there
    ("expla\u0131n the result, then fetch more", True, False),
    ("expla\u0130n the result, then fetch more", True, False),
    # é, ß, CJK next to a phrase: a word boundary in JS, none with Unicode words
    ("\u00e9fetch the page", True, False),
    ("\u00dfcalculate 2+2", True, False),
    ("\u65e5\u672cfetch the page", True, False),
    ("\u8bf7fetch\u6570\u636e", True, False),  # the README's 请fetch数据
    ("fetch the page as before\u65e5\u672c\u8a9e\u3067", False, True),  # override wins
    # where both agree: the odd letter is not in a phrase, or not next to one
    ("\u212aelvin to Celsius: calculate 300 - 273.15", True, True),
    ("caf\u00e9 fetch", True, True),
]


@pytest.mark.parametrize(("message", "js", "unicode"), JS_ROUTING)
def test_routing_decides_as_the_released_code(message: str, js: bool, unicode: bool):
    assert requires_tools(message, ascii_words=True) is js
    assert route(message, None, ascii_words=True) == ("react-loop" if js else "direct-llm")


@pytest.mark.parametrize(("message", "js", "unicode"), JS_ROUTING)
def test_entities_from_before_the_patch_keep_unicode_routing(message: str, js: bool, unicode: bool):
    assert requires_tools(message, ascii_words=False) is unicode


def test_the_released_code_s_routing_table_has_both_kinds_of_difference():
    differ = [(js, unicode) for _, js, unicode in JS_ROUTING if js != unicode]
    assert (True, False) in differ and (False, True) in differ and len(differ) >= 10


@BOTH
def test_use_tools_overrides_routing(ascii_words):
    assert route("search for something", False, ascii_words=ascii_words) == "direct-llm"
    assert route("How are you?", True, ascii_words=ascii_words) == "react-loop"
    assert route("search for something", None, ascii_words=ascii_words) == "react-loop"
    assert route("How are you?", None, ascii_words=ascii_words) == "direct-llm"
    assert route("\u00e9fetch it", False, ascii_words=ascii_words) == "direct-llm"


def debrief(**changes) -> AgentDebrief:
    base = dict(
        outcome="success",
        summary="Fetched 5 commits.",
        confidence="high",
        key_findings=["PR 12 is largest"],
        tools_used=[ToolUsage(name="github/list_commits", calls=4, success_rate=0.75)],
        errors_encountered=["Tool x failed"],
        metrics=DebriefMetrics(tokens=1234, duration_ms=4500, iterations=3),
    )
    return AgentDebrief.model_validate({**base, **changes})


def test_context_summary_layout_and_percentages():
    context = build_context_summary(debrief(), ["[Tool result]: 5 commits"])
    assert context.startswith("## Last Run Results\nOutcome: success (confidence: high)")
    assert "Summary: Fetched 5 commits." in context
    assert "Key findings:\n- PR 12 is largest" in context
    assert "Tools used: github/list_commits (4x, 75% success)" in context  # upstream: "0.75%"
    assert "Errors: Tool x failed" in context
    assert "Metrics: 3 iterations, 1234 tokens, 4.5s" in context
    assert "## Tool Results (from last run)\n### Result 1\n[Tool result]: 5 commits" in context
    assert context.endswith("Reference specific data from tool results when answering.")


def test_context_without_debrief_keeps_observations_and_empty_is_empty():
    assert build_context_summary(None, []) == ""
    context = build_context_summary(None, ["[Tool result]: 42 is the answer"])
    assert "Last Run Results" not in context and "42 is the answer" in context


def test_observation_cap():
    obs = ["a" * 1500, "b" * 1400, "c" * 500, "d" * 10]
    kept = cap_observations(obs)
    assert kept == ["a" * 1500, "b" * 1400]  # 100 left: too little to cut "c"
    kept = cap_observations(["a" * 2500, "b" * 1000])
    assert kept == ["a" * 2500, "b" * 500 + "…"]
    assert sum(len(k) for k in cap_observations(["x" * 9000])) == 3001


def test_chat_context_is_bounded_head_and_tail_kept_whatever_the_last_run_held():
    """A debrief an older version stored unbounded (findings, a 3 MB summary) and huge
    observations: the context chat sends stays within its cap, with a marker where it was
    cut, its head (the outcome) and its tail (the instruction) kept."""
    huge = debrief(summary="s" * 3_000_000, key_findings=["f" * 50_000] * 200)
    context = build_context_summary(huge, ["o" * 1_000_000] * 5)
    assert len(context) <= CHAT_CONTEXT_MAX_CHARS
    assert "characters cut" in context
    assert context.startswith("## Last Run Results\nOutcome: success")
    assert context.endswith("Reference specific data from tool results when answering.")
    small = build_context_summary(debrief(), ["[Tool result]: 5 commits"])
    assert len(small) < CHAT_CONTEXT_MAX_CHARS and "characters cut" not in small


def test_what_counts_as_an_observation():
    assert tool_observation("42 is the answer here", True) == "[Tool result]: 42 is the answer here"
    assert tool_observation("short", True) is None
    assert tool_observation("a long failure message", False) is None
    assert tool_observation("⚠️ Cannot finalize yet. Still need…", True) is None
    assert tool_observation("✓ final-answer accepted: 42 and more", True) is None
    assert analysis_observation("x" * 51) == "[Agent analysis]: " + "x" * 51
    assert analysis_observation("too short to matter") is None
    kept = keep_recent([], [f"[Tool result]: {i:02d}" for i in range(30)] + [None])
    assert len(kept) == 20 and kept[-1] == "[Tool result]: 29"


def test_live_run_context():
    progress = RunProgress(
        run_id="run-1",
        agent_id="a",
        iteration=1,
        max_iterations=10,
        tools_called=["calculator"],
        last_observation="42",
    )
    text = live_run_context(progress)
    assert "Run run-1 is at iteration 2 of 10." in text
    assert "Tools called so far: calculator." in text and "Last observation: 42" in text


def test_direct_prompt_keeps_the_agents_persona():
    assert direct_chat_system_prompt("a", "You are Ada, a billing expert.", "CTX").startswith(
        "You are Ada, a billing expert.\n\nHere is context from your recent work:\n\nCTX"
    )
    assert direct_chat_system_prompt("a", None, "") == (
        "You are a, an AI agent that completes tasks carefully and reports what it did.\n\n"
        "Answer conversationally and concisely."
    )


def test_runs_and_chat_share_one_default_persona():
    persona = default_persona("billing")
    assert run_system_prompt("billing", None).startswith(persona + "\n\n")
    assert direct_chat_system_prompt("billing", "  ", "").startswith(persona + "\n\n")
    assert run_system_prompt("billing", "You are Ada.").startswith("You are Ada.\n\n")


def test_history_window_counts_messages_then_characters():
    history = [msg("user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(50)]
    window = window_history(history)
    assert len(window) == 40 and window[0].content == "m10"
    big = [msg("user", "x" * 3000) for _ in range(4)]
    assert len(window_history(big)) == 2  # 6,000 ≤ 8,000 < 9,000
    assert window_history([]) == []


def test_history_block():
    assert with_history_block("hi", []) == "hi"
    block = with_history_block("now?", [msg("user", "q1"), msg("assistant", "a1")])
    assert block == (
        "--- Conversation history ---\nUser: q1\nAssistant: a1\n\n--- Current message ---\nnow?"
    )
    assert history_block([]).startswith("--- Conversation history ---")
    task = tool_path_task("fetch it", "CTX", [msg("user", "q1")])
    assert task.endswith(
        "--- Current message ---\nContext from prior run:\nCTX\n\nNew request: fetch it"
    )


def test_a_chat_request_is_checked_before_the_agent_takes_it():
    def problem(**fields: object) -> str | None:
        return chat_request_problem(ChatRequest.model_validate({"message": "hi", **fields}), "a")

    assert problem() is None
    assert problem(message=" \n") == "message is empty"
    assert problem(max_iterations=51) == "max_iterations must be between 1 and 50"
    big = AgentConfig(agent_id="a", model="m", system_prompt="p" * 100_001)
    assert problem(agent=big) == (
        "invalid agent configuration: system_prompt is 100,001 characters; the limit is 100,000"
    )
    assert problem(agent=big.model_copy(update={"system_prompt": "p" * 100_000})) is None
    assert problem(stream_id="run-a-chat-0123456789ab") is None
    assert problem(stream_id="run-b-chat-0123456789ab") == (
        "invalid stream_id 'run-b-chat-0123456789ab': use run-a-chat-<12 hex> "
        "(Agent.new_chat_stream_id())"
    )
    assert problem(stream_id="run-a-chat-0123456789ab-chat-0123456789ab") is not None
