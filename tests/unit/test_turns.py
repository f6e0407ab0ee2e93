"""How a model turn maps to the loop's next move and to terminated_by."""

from __future__ import annotations

import pytest

from reactive_temporal.contracts.run import ToolCall
from reactive_temporal.prompts import CUT_OFF_NUDGE, FILTERED_NUDGE, UNREAD_CALLS_NUDGE
from workflows.turns import Act, Ending, Nudge, decide_turn, goal_achieved, is_success

CALC = ToolCall(id="c1", name="calculator", arguments='{"expression": "1+1"}')


def decide(content, calls=(), **kw):
    defaults = dict(task="t", tools_used=[], available_tools=["calculator"], gap_check_done=False)
    return decide_turn(content, list(calls), **{**defaults, **kw})


def test_final_answer_text_finishes_with_the_extracted_answer():
    assert decide("FINAL ANSWER: The answer is 42.") == Ending("final_answer", "The answer is 42.")


def test_plain_text_is_end_turn():
    assert decide("Paris.") == Ending("end_turn", "Paris.")


def test_empty_reply_nudges_instead_of_ending():
    decision = decide("   ")
    assert isinstance(decision, Nudge) and not decision.is_error


def test_tool_calls_act():
    assert decide("thinking", [CALC]) == Act([CALC], None)


def test_tool_calls_with_final_answer_text_finish_after_acting():
    assert decide("FINAL ANSWER: 2", [CALC]) == Act([CALC], "2")


def test_final_answer_text_with_a_gap_is_guarded_once():
    kw = dict(task="Write to a file the result", available_tools=["file_write"])
    guarded = decide("FINAL ANSWER: 2", **kw)
    assert isinstance(guarded, Nudge) and guarded.is_error and guarded.gap_check_rejected
    assert decide("FINAL ANSWER: 2", gap_check_done=True, **kw) == Ending("final_answer", "2")


@pytest.mark.parametrize(
    "content", ["FINAL ANSWER: The capital of France is", "The capital of France is", "", None]
)
def test_a_reply_cut_off_at_the_output_limit_ends_nothing(content):
    """Its text is half an answer: the run would have ended on it, flagged a success."""
    decision = decide(content, finish_reason="length")
    assert decision == Nudge(CUT_OFF_NUDGE)
    assert not decision.is_error  # a limit the model can work within, not its mistake


@pytest.mark.parametrize("content", ["Let me add.", "FINAL ANSWER: 4", "", None])
def test_a_reply_whose_calls_did_not_read_tells_the_model(content):
    """Its calls were taken out of its text (a block that names no tool): the words before
    them ended the run, or it was nudged as empty, and the model never learned its call did
    not go through. It is told, and how to write one."""
    decision = decide(content, unread_calls=True)
    assert decision == Nudge(UNREAD_CALLS_NUDGE, is_error=True)
    assert "<tool_call>" in UNREAD_CALLS_NUDGE and "could not be read" in UNREAD_CALLS_NUDGE
    # cut off before the name: the cut is what the model can do something about
    assert decide(content, unread_calls=True, finish_reason="length") == Nudge(CUT_OFF_NUDGE)
    answer = "4" if content == "FINAL ANSWER: 4" else None
    assert decide(content, [CALC], unread_calls=True) == Act([CALC], answer)


def test_a_reply_stopped_by_the_content_filter_ends_nothing():
    assert decide("Here is how to", finish_reason="content_filter") == Nudge(FILTERED_NUDGE)


def test_a_cut_off_reply_s_tool_calls_still_run():
    assert decide("FINAL ANSWER: 2", [CALC], finish_reason="length") == Act([CALC], "2")


@pytest.mark.parametrize("reason", [None, "stop", "end_turn"])
def test_a_reply_the_model_ended_itself_ends_as_before(reason):
    assert decide("Paris.", finish_reason=reason) == Ending("end_turn", "Paris.")


@pytest.mark.parametrize(
    ("terminated_by", "output", "success", "goal"),
    [
        ("final_answer_tool", "x", True, True),
        ("final_answer", "x", True, True),
        ("end_turn", "x", True, None),
        ("max_iterations", "x", False, False),
        ("llm_error", "", False, False),
        ("final_answer", "  ", False, True),
    ],
)
def test_success_and_goal_by_ending(terminated_by, output, success, goal):
    assert is_success(terminated_by, output) is success
    assert goal_achieved(terminated_by) is goal


@pytest.mark.parametrize("reply", ["FINAL ANSWER: 42", "**Final Answer**: 42", "It is 42."])
def test_no_ending_before_every_required_tool_ran(reply):
    decision = decide(
        reply, required_tools=["current_time", "calculator"], tools_used=["calculator"]
    )
    assert isinstance(decision, Nudge) and not decision.is_error
    assert "current_time" in decision.note and "calculator" not in decision.note


def test_endings_once_the_required_tools_ran():
    kw = dict(required_tools=["calculator"], tools_used=["calculator"])
    assert decide("FINAL ANSWER: 42", **kw) == Ending("final_answer", "42")
    assert decide("It is 42.", **kw) == Ending("end_turn", "It is 42.")
    # tool calls always act: the tools may be the required ones
    assert decide("FINAL ANSWER: 2", [CALC], required_tools=["calculator"]) == Act([CALC], "2")
