"""Generated hostile text through the rules that read a model's, a tool's or an operator's
words: they return a verdict for any text, and the verdict keeps what their docstrings say.

Workflow code calls most of these; one that raised would fail the workflow task, which
Temporal retries forever (test_totality.py lists the cases found so far, by hand). The rest
read a model's reply in the `llm_step` activity, where an exception throws the reply away.
"""

from __future__ import annotations

import csv
import io
import json
import re

from hypothesis import example, given
from hypothesis import strategies as st

from reactive_temporal.call_names import tool_name_of
from reactive_temporal.contracts.run import FINAL_ANSWER_TOOL, OUTPUT_FORMATS, ToolCall
from reactive_temporal.limits import ANSWER_MAX_CHARS
from reactive_temporal.rationale import (
    BLOCKS_MAX,
    REF_MAX_CHARS,
    REFS_MAX,
    WHY_MAX_CHARS,
    parse_rationale_blocks,
    strip_rationale_blocks,
)
from reactive_temporal.text_calls import read_calls, without_text_calls
from reactive_temporal.thinking import split_thinking, thinking_so_far
from tests.support.hostile import ATOMS, hostile_text, json_texts, json_values, plain_text
from workflows import chat_rules, debrief_rules, final_answer, turns

formats = st.sampled_from(OUTPUT_FORMATS) | plain_text
tool_names = st.lists(
    st.sampled_from(["calculator", "file_write", "github/list", "web_search"])
    | hostile_text(max_repeat=100),
    max_size=4,
)


@st.composite
def final_answer_arguments(draw: st.DrawFn) -> str:
    """A `final-answer` call's arguments: an object with hostile fields, or any JSON text."""
    if draw(st.booleans()):
        return draw(json_texts())
    fields = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "output": hostile_text() | json_values,
                "format": formats | json_values,
                "summary": hostile_text() | json_values,
                "confidence": hostile_text() | json_values,
            },
        )
    )
    return json.dumps(fields)


# -- final answers ------------------------------------------------------------------------------


@given(hostile_text() | json_texts(), formats)
def test_validate_output_is_a_verdict_that_matches_the_parser(output: str, fmt: str):
    problem = final_answer.validate_output(output, fmt)
    assert problem is None or isinstance(problem, str)
    if fmt == "json":
        try:
            json.loads(output)
            parses = True
        except (ValueError, RecursionError):
            parses = False
        assert (problem is None) == parses
    elif fmt == "csv" and problem is None:
        rows = [row for row in csv.reader(io.StringIO(output)) if row]
        assert rows and all(len(row) == len(rows[0]) for row in rows)
    elif fmt not in ("json", "csv"):
        assert problem is None


@given(final_answer_arguments(), st.booleans())
@example('{"output": "x", "format": "TEXT ", "summary": null}', True)
@example('{"output": ' + "[" * 50_000 + "]" * 50_000 + "}", False)
def test_final_answer_arguments_parse_to_a_usable_capture_or_say_why(arguments: str, nulls: bool):
    parsed = final_answer.parse_final_answer_arguments(arguments, nulls_allowed=lambda: nulls)
    if isinstance(parsed, str):
        assert parsed
        return
    assert parsed.output.strip()
    assert parsed.format in OUTPUT_FORMATS


@given(
    final_answer_arguments(),
    hostile_text(),
    tool_names,
    st.booleans(),
    st.booleans(),
)
def test_the_final_answer_gate_accepts_only_answers_that_pass_every_check(
    arguments: str, task: str, available: list[str], gap_check_done: bool, limit_answer: bool
):
    used = ["calculator"]
    verdict = final_answer.judge_final_answer(
        arguments,
        task=task,
        required_tools=[],
        tools_used=used,
        available_tools=available,
        gap_check_done=gap_check_done,
        limit_answer=limit_answer,
    )
    if not verdict.accepted:
        assert verdict.error and verdict.capture is None
        return
    capture = verdict.capture
    assert capture is not None and capture.output.strip()
    assert final_answer.validate_output(capture.output, capture.format) is None
    assert not limit_answer or len(capture.output) <= ANSWER_MAX_CHARS
    assert gap_check_done or not final_answer.detect_completion_gaps(task, used, available)


@given(hostile_text(), st.booleans())
def test_the_text_marker_yields_the_text_after_it(text: str, anchored: bool):
    answer = final_answer.extract_final_answer(text, anchored=anchored)
    if final_answer.has_final_answer_marker(text, anchored=anchored):
        assert answer in text
        assert answer == answer.strip()
    else:
        assert answer == text.strip()


@given(hostile_text(), tool_names, tool_names)
def test_completion_gaps_name_only_steps_a_tool_of_the_agent_could_do(
    task: str, used: list[str], available: list[str]
):
    for gap in final_answer.detect_completion_gaps(task, used, available):
        assert any(name in gap or name.split("/", 1)[0] in gap for name in available)


# -- a turn -------------------------------------------------------------------------------------


@given(
    st.none() | hostile_text(),
    st.lists(
        st.builds(ToolCall, id=plain_text, name=plain_text, arguments=hostile_text()), max_size=3
    ),
    hostile_text(),
    st.lists(st.sampled_from(["calculator", "file_write"]), max_size=2),
    st.booleans(),
    st.none() | st.sampled_from(["length", "content_filter", "stop", "tool_calls"]),
)
def test_a_turn_acts_ends_or_nudges_and_never_ends_before_the_required_tools(
    content: str | None,
    calls: list[ToolCall],
    task: str,
    used: list[str],
    anchored: bool,
    finish_reason: str | None,
):
    decision = turns.decide_turn(
        content,
        calls,
        task=task,
        tools_used=used,
        available_tools=["calculator", "file_write"],
        gap_check_done=False,
        anchored_marker=anchored,
        required_tools=["calculator"],
        finish_reason=finish_reason,
        bare_marker_nudged=lambda: True,
    )
    if calls:
        assert isinstance(decision, turns.Act) and decision.tool_calls == calls
    elif isinstance(decision, turns.Ending):
        assert "calculator" in used
        assert decision.output.strip() and decision.output == decision.output.strip()
        assert finish_reason not in turns.CUT_SHORT
    else:
        assert isinstance(decision, turns.Nudge) and decision.note


# -- chat routing and the debrief's error details -------------------------------------------


@given(hostile_text(), st.none() | st.booleans(), st.booleans())
def test_chat_routes_every_message_to_one_of_its_paths(
    message: str, use_tools: bool | None, ascii_words: bool
):
    path = chat_rules.route(message, use_tools, ascii_words=ascii_words)
    assert path in ("direct-llm", "react-loop")
    if use_tools is not None:
        assert path == ("react-loop" if use_tools else "direct-llm")


@given(
    st.lists(
        st.sampled_from(["[Tool error: ", "]", "x", "\n", "[", "Tool error", ": "])
        | hostile_text(max_repeat=50),
        max_size=20,
    ).map("".join)
)
def test_a_tool_errors_detail_is_what_the_regex_finds(text: str):
    match = re.search(r"\[Tool error: ([^\]]+)\]", text)
    assert debrief_rules.tool_error_detail(text) == (match.group(1) if match else None)


# -- a model's reply, read in the llm_step activity -----------------------------------------


@given(hostile_text(max_repeat=20_000))
def test_thinking_is_told_apart_from_the_answer_and_streams_to_the_same_reading(text: str):
    thinking, answer = split_thinking(text)
    if (thinking, answer) != (None, text):  # a block was found: both parts trimmed, or None
        assert all(part is None or (part and part == part.strip()) for part in (thinking, answer))
    assert thinking_so_far(text, ended=True) == (thinking or "", answer or "")
    for end in {0, len(text) // 3, len(text) // 2, len(text) - 1}:
        thinking_so_far(text[: max(end, 0)])  # a reply as it streams: a reading, no error


@st.composite
def rationale_replies(draw: st.DrawFn) -> str:
    """A reply's text with rationale blocks: well made, malformed, nested, deep, numbered oddly."""
    parts = []
    for _ in range(draw(st.integers(0, 4))):
        call = draw(
            st.sampled_from(
                [
                    "",
                    ' call="1"',
                    " call='2'",
                    ' call="0"',
                    ' call="9" ',
                    ' call="' + "9" * 5000 + '"',
                ]
            )
        )
        body = draw(
            json_texts()
            | st.builds(
                lambda why, refs, confidence: json.dumps(
                    {"why": why, "refs": refs, "confidence": confidence}
                ),
                hostile_text(),
                json_values,
                json_values,
            )
        )
        fence = draw(st.sampled_from(["", "```json\n", "```"]))
        parts.append(
            f"{draw(hostile_text(max_repeat=50))}<rationale{call}>{fence}{body}"
            f"{fence and '```'}</rationale>"
        )
    return "".join(parts) + draw(hostile_text(max_repeat=50))


@given(rationale_replies() | hostile_text())
@example("<rationale>" + "[" * 100_000 + "</rationale>")
@example('<rationale call="1">{"why": ' + "[" * 100_000 + "}</rationale>")
@example('<rationale call="0">{"why": "a model counting from 0"}</rationale>')
def test_rationale_blocks_are_read_leniently_and_never_raise(text: str):
    found = parse_rationale_blocks(text)
    for position, detail in found.items():
        assert 1 <= position <= BLOCKS_MAX
        assert detail.why.strip() and len(detail.why) <= WHY_MAX_CHARS
        assert detail.refs is None or (
            len(detail.refs) <= REFS_MAX and all(len(r) <= REF_MAX_CHARS for r in detail.refs)
        )
        assert detail.confidence is None or 0 <= detail.confidence <= 1


RATIONALE_TAG = re.compile(r"</?rationale(?:\s+call\s*=\s*[\"']?\d+[\"']?)?\s*>", re.IGNORECASE)


@given(
    st.lists(
        st.sampled_from(
            [
                "<rationale>",
                "</rationale>",
                "<ratio",
                "nale>",
                "</ratio",
                '<rationale call="3">',
                "x",
                "\n\n\n",
                '{"why": "w"}',
            ]
        ),
        max_size=12,
    ).map("".join)
    | rationale_replies()
)
@example("<ratio<rationale>nale>")
def test_stripped_text_has_no_rationale_tag_left(text: str):
    stripped = strip_rationale_blocks(text)
    assert not RATIONALE_TAG.search(stripped), stripped
    assert "\n\n\n" not in stripped


names_offered = st.dictionaries(
    st.sampled_from(["calculator", "file_write", "github__list", "final-answer"])
    | hostile_text(max_repeat=70),
    st.sampled_from(["calculator", "file_write", "github/list", FINAL_ANSWER_TOOL]),
    max_size=4,
)


@st.composite
def replies_with_written_calls(draw: st.DrawFn) -> str:
    """A reply's text with calls written in an open model's format, well made or not."""
    call = draw(
        json_texts()
        | st.builds(
            lambda name, arguments: json.dumps({"name": name, "arguments": arguments}),
            st.sampled_from(
                ["calculator", "functions.calculator", "Calculator", "calc<|channel|>x"]
            )
            | hostile_text(max_repeat=70),
            json_values,
        )
    )
    wrap = draw(
        st.sampled_from(
            [
                "<tool_call>{}</tool_call>",
                "<tool_call>{}",
                "[TOOL_CALLS][{}]",
                "[TOOL_CALLS]calculator[ARGS]{}",
                "<|python_tag|>{}",
                "{}",
            ]
        )
    )
    return draw(hostile_text(max_repeat=50)) + wrap.replace("{}", call) * draw(st.integers(1, 3))


@given(replies_with_written_calls() | hostile_text(), names_offered, st.lists(hostile_text()))
def test_calls_written_in_the_text_are_calls_or_text(
    text: str, names: dict[str, str], results: list[str]
):
    """Calls to make, calls not made (copied, or naming no tool), or no calls at all; the
    reply's words are what comes before the calls, the same without them."""
    words = without_text_calls(text)
    found = read_calls(text, names, id_prefix="text_3", read=lambda: results)
    assert words is None or words == text or (words.strip() == words and words in text)
    if found is None:
        assert words == text
        return
    assert text.endswith(found.written) and found.before in (words, None)  # a bare object: words
    assert bool(found.calls) + found.copied + found.unread == 1
    for n, call in enumerate(found.calls):  # arguments: an object, or as written, for the tool
        assert call.id == f"text_3_{n}" and call.name.strip() and call.arguments.strip()


@given(hostile_text(max_repeat=100), names_offered)
def test_a_wrapped_tool_name_means_the_name_or_one_of_the_tools(name: str, names: dict[str, str]):
    assert tool_name_of(name, names) in (name, *names.values())


def test_the_atoms_reach_every_parser():
    """The strategies' pieces include each parser's markers (a renamed marker would make the
    generated text miss its parser)."""
    markers = ["FINAL ANSWER:", "<tool_call>", "[TOOL_CALLS]", "</think>", "</rationale>"]
    assert all(marker in ATOMS for marker in markers)
