"""Workflow code is total on data: every check and parse that runs in a workflow returns a
verdict for any input. An exception there fails the workflow task, which Temporal retries
forever: the run would be wedged on every replay.

Each pure function that reads model, tool, operator or chat text is called with every string
in HOSTILE; none may raise. (Add a function here when workflow code starts reading text
through it.)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from reactive_temporal.contracts.debrief import ToolCallRecord
from reactive_temporal.contracts.run import ToolCall
from workflows import chat_rules, debrief_rules, final_answer, turns

DEEP = 100_000
HOSTILE: dict[str, str] = {
    "empty": "",
    "deep-json-array": "[" * DEEP,
    "deep-json-object": '{"a":' * DEEP,
    "closed-deep-json": "[" * 5_000 + "]" * 5_000,
    "csv-field-over-limit": "a,b\n" + "x" * 200_000 + ",y",
    "csv-quoted-field-over-limit": 'a\n"' + "x" * 200_000 + '"',
    "csv-unterminated-quote": 'a,"b\nc,d',
    "nul": "a\x00b,c\x00",
    "lone-surrogates": "\ud800 \udfff FINAL ANSWER: \ud83d",
    "huge": "FINAL ANSWER: " + "y" * 3_000_000,
    "marker-only": "FINAL ANSWER:",
    "many-markers": "final answer: " * 100_000,
    "regex-bait": "final" + " " * 100_000 + "answer" + "*" * 100_000,
    "bidi-and-controls": "\u202eevil\u202c\x1b]8;;http://x\x07",
    "tool-error-bait": "[Tool error: " * 50_000,
    "json-with-deep-output": json.dumps({"output": "x", "format": "json"})[:-1]
    + ', "summary": ' + "[" * DEEP,
}  # fmt: skip

CHECKS: dict[str, Callable[[str], Any]] = {
    "validate_output(json)": lambda s: final_answer.validate_output(s, "json"),
    "validate_output(csv)": lambda s: final_answer.validate_output(s, "csv"),
    "validate_output(markdown)": lambda s: final_answer.validate_output(s, "markdown"),
    "parse_final_answer_arguments": final_answer.parse_final_answer_arguments,
    "parse_final_answer_arguments(output)": lambda s: final_answer.parse_final_answer_arguments(
        json.dumps({"output": s, "format": "json", "summary": s})
    ),
    "judge_final_answer": lambda s: final_answer.judge_final_answer(
        s, task=s, required_tools=[], tools_used=["calculator"], available_tools=["calculator"],
        gap_check_done=False,
    ),
    "judge_final_answer(csv output)": lambda s: final_answer.judge_final_answer(
        json.dumps({"output": s, "format": "csv", "summary": "s"}), task="t", required_tools=[],
        tools_used=["calculator"], available_tools=["calculator"], gap_check_done=True,
    ),
    "marker(anchored)": lambda s: final_answer.extract_final_answer(s, anchored=True),
    "marker(legacy)": lambda s: final_answer.extract_final_answer(s, anchored=False),
    "detect_completion_gaps": lambda s: final_answer.detect_completion_gaps(
        s, ["x"], ["github/list", "file_write", s[:64]]
    ),
    "decide_turn": lambda s: [
        turns.decide_turn(s, calls, task=s, tools_used=[], available_tools=["file_write"],
                          gap_check_done=False, anchored_marker=anchored)
        for calls in ([], [ToolCall(id="c", name="calculator", arguments=s)])
        for anchored in (True, False)
    ],
    "route": lambda s: [chat_rules.route(s, None, ascii_words=a) for a in (True, False)],
    "tool_observation": lambda s: chat_rules.tool_observation(s, False),
    "analysis_observation": chat_rules.analysis_observation,
    "errors_from_loop": lambda s: debrief_rules.errors_from_loop(
        [ToolCallRecord(name="t", success=False, duration_ms=1, iteration=1, error=s)]
    ),
    "brief_output": debrief_rules.brief_output,
}  # fmt: skip


@pytest.mark.parametrize("text_id", list(HOSTILE))
@pytest.mark.parametrize("check", list(CHECKS))
def test_workflow_checks_return_a_verdict_for_any_text(check: str, text_id: str):
    CHECKS[check](HOSTILE[text_id])  # returns: no exception, whatever it decides


def test_the_verdicts_on_what_used_to_raise_name_the_problem():
    assert "nested too deeply" in (final_answer.validate_output("[" * DEEP, "json") or "")
    assert "field larger than field limit" in (
        final_answer.validate_output(HOSTILE["csv-field-over-limit"], "csv") or ""
    )
    assert "nested too deeply" in str(final_answer.parse_final_answer_arguments("[" * DEEP))


def test_tool_error_detail_finds_what_the_regex_found_in_linear_time():
    import random
    import re

    regex = re.compile(r"\[Tool error: ([^\]]+)\]")
    rng = random.Random(7)
    parts = ["[Tool error: ", "]", "x", "\n", "[", "Tool error", ": "]
    for _ in range(5_000):
        text = "".join(rng.choice(parts) for _ in range(rng.randint(0, 12)))
        match = regex.search(text)
        assert debrief_rules.tool_error_detail(text) == (match.group(1) if match else None)
