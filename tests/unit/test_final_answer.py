"""The final-answer gate, pinned to the reference's checklist (semantics §7)."""

from __future__ import annotations

import json

import pytest

from workflows.final_answer import (
    META_TOOLS,
    can_complete,
    detect_completion_gaps,
    extract_final_answer,
    has_final_answer_marker,
    has_tool_work,
    judge_final_answer,
    should_show_final_answer,
    validate_output,
)

# -- visibility: base {required: [github/list_commits] called, iteration 3, no errors, nonMeta} --

BASE = dict(
    required_tools=["github/list_commits"],
    tools_used=["github/list_commits"],
    iteration=3,
    has_errors=False,
    has_non_meta_tool_called=True,
)


def shown(**changes) -> bool:
    return should_show_final_answer(**{**BASE, **changes})


def test_shown_when_every_condition_is_met():
    assert shown()


def test_hidden_at_iteration_0_shown_at_iteration_1():
    assert not shown(iteration=0)
    assert shown(iteration=1)


def test_hidden_when_a_required_tool_was_not_called():
    assert not shown(tools_used=["web-search"])


def test_hidden_with_pending_errors_before_iteration_4():
    assert not shown(has_errors=True, iteration=3)


def test_errors_are_forgiven_from_iteration_4():
    assert shown(has_errors=True, iteration=4)
    assert shown(has_errors=True, iteration=9)


def test_hidden_when_no_non_meta_tool_was_called():
    assert not shown(has_non_meta_tool_called=False)


def test_shown_when_no_tools_are_required():
    assert shown(required_tools=[], tools_used=["calculator"])


def test_with_no_required_tools_any_tool_counts_as_work():
    assert has_tool_work(["recall"], required_tools=[])  # a meta-tool, but nothing is required
    assert not has_tool_work(["recall"], required_tools=["calculator"])
    assert not has_tool_work([], required_tools=[])
    assert has_tool_work(["calculator"], required_tools=["calculator"])


# -- the hard gate -------------------------------------------------------------------------


def judge(arguments: dict | str, **kw):
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    defaults = dict(
        task="do it",
        required_tools=[],
        tools_used=["calculator"],
        available_tools=["calculator"],
        gap_check_done=False,
    )
    return judge_final_answer(raw, **{**defaults, **kw})


def test_valid_json_is_accepted_and_format_echoed():
    verdict = judge({"output": '{"a": 1}', "format": "json", "summary": "s"})
    assert verdict.accepted and verdict.capture is not None and verdict.capture.format == "json"


def test_invalid_json_is_rejected():
    verdict = judge({"output": "{a: 1", "format": "json", "summary": "s"})
    assert not verdict.accepted and "invalid JSON" in (verdict.error or "")


def test_text_is_accepted_without_validation():
    verdict = judge({"output": "{not json at all", "format": "text", "summary": "s"})
    assert verdict.accepted


def test_pending_required_tool_is_named_in_the_rejection():
    verdict = judge(
        {"output": "x", "format": "text", "summary": "s"},
        required_tools=["github/list_commits"],
        tools_used=["calculator"],
    )
    assert not verdict.accepted
    assert "Still need to call: github/list_commits" in (verdict.error or "")


def test_acceptance_carries_the_capture():
    verdict = judge({"output": "42", "format": "text", "summary": "did", "confidence": "high"})
    assert verdict.capture is not None
    assert verdict.capture.model_dump() == {
        "output": "42",
        "format": "text",
        "summary": "did",
        "confidence": "high",
    }


def test_first_iteration_call_without_required_tools_is_accepted():
    # The gate does not check iterations or errors: the model chose to finalize.
    verdict = judge({"output": "hi", "format": "text", "summary": "s"}, tools_used=[])
    assert verdict.accepted
    assert can_complete([], [])


def test_meta_tools_do_not_satisfy_required_work():
    assert not can_complete(["calculator"], ["final-answer", "recall", "calculator"][:2])
    assert "final-answer" in META_TOOLS


def test_csv_with_consistent_columns_is_accepted():
    verdict = judge({"output": "name,qty\napple,3\npear,5\n", "format": "csv", "summary": "s"})
    assert verdict.accepted


def test_csv_with_a_ragged_row_is_rejected_naming_the_row():
    verdict = judge({"output": "name,qty\napple,3\npear\n", "format": "csv", "summary": "s"})
    assert not verdict.accepted
    assert "row 3 has 1 columns" in (verdict.error or "")


def test_csv_quoted_commas_count_as_one_column():
    assert validate_output('a,b\n"x, y",2', "csv") is None


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("{broken", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ({"format": "text", "summary": "s"}, "non-empty 'output'"),
        ({"output": "x", "format": "yaml", "summary": "s"}, "Unknown format 'yaml'"),
    ],
)
def test_malformed_calls_are_rejected_with_a_reason(arguments, message):
    verdict = judge(arguments)
    assert not verdict.accepted and message in (verdict.error or "")


def test_format_defaults_to_text_and_is_normalised():
    assert judge({"output": "x", "summary": "s"}).capture.format == "text"  # type: ignore[union-attr]
    assert judge({"output": "x", "format": " JSON ", "summary": "s"}).accepted is False


def test_completion_gap_rejects_once_then_lets_through():
    kw = dict(
        task="Read the file notes.txt and summarize it",
        tools_used=["calculator"],
        available_tools=["calculator", "file_read"],
    )
    args = {"output": "summary", "format": "text", "summary": "s"}
    first = judge(args, **kw)
    assert not first.accepted and first.gap_check_rejected
    assert "Not done yet — missing steps" in (first.error or "")
    assert "file_read" in (first.error or "")
    assert judge(args, gap_check_done=True, **kw).accepted


def test_gaps_only_for_tools_the_agent_has():
    assert detect_completion_gaps("Search online for news", ["calculator"], ["calculator"]) == []
    gaps = detect_completion_gaps("list github commits", ["calculator"], ["github/list_commits"])
    assert gaps and "github" in gaps[0]
    assert (
        detect_completion_gaps("list github commits", ["github/list_commits"], ["github/x"]) == []
    )


# -- the legacy text marker ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("FINAL ANSWER: The answer is 42.", "The answer is 42."),
        ("final answer: lower case", "lower case"),
        ("Reasoning…\n**Final Answer**: bold marker", "bold marker"),
        ("**Final Answer** no colon", "no colon"),
        ("Final Answer：全角コロン", "全角コロン"),
        ("FinalAnswer: squashed", "squashed"),
        ("  FINAL ANSWER:   padded   ", "padded"),
    ],
)
def test_final_answer_regex_variants_of_runs_before_the_anchoring_patch(text, answer):
    assert has_final_answer_marker(text, anchored=False)
    assert extract_final_answer(text, anchored=False) == answer


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("FINAL ANSWER: The answer is 42.", "The answer is 42."),
        ("final answer: lower case", "lower case"),
        ("Reasoning…\n**Final Answer**: bold marker", "bold marker"),
        ("Reasoning…\n**Final Answer:** bold colon", "bold colon"),
        ("__Final answer__: underscores", "underscores"),
        ("Final Answer：全角コロン", "全角コロン"),
        ("  FINAL ANSWER:   padded   ", "padded"),
        ("I looked it up.\n\nFinal answer: two lines\nof answer", "two lines\nof answer"),
    ],
)
def test_final_answer_marker_at_the_start_of_a_line(text, answer):
    assert has_final_answer_marker(text, anchored=True)
    assert extract_final_answer(text, anchored=True) == answer


@pytest.mark.parametrize(
    "text",
    [
        "I don't have the final answer yet; I need more data.",
        "Before my final answer: one more check.",
        "**Final Answer** no colon",
        "FINAL ANSWER 42",
        "FinalAnswer: squashed",
        "The FINAL ANSWER: is not at the start of a line",
        "`FINAL ANSWER:` is what I will write when I am done",
    ],
)
def test_prose_mentioning_a_final_answer_does_not_end_a_run(text):
    assert not has_final_answer_marker(text, anchored=True)


def test_text_without_marker():
    assert not has_final_answer_marker("The result is 4.", anchored=True)
    assert not has_final_answer_marker(None, anchored=True)
    assert extract_final_answer("  just text ", anchored=True) == "just text"
