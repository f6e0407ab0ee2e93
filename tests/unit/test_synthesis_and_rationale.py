"""Parsing the synthesis answer and the rationale blocks (reference §2.5, §6, §7)."""

from __future__ import annotations

import json

from pydantic_core import to_json

from activities.debrief_synthesis import parse_synthesis
from reactive_temporal.contracts.debrief import (
    DebriefInput,
    DebriefMetrics,
    PersistDebriefInput,
    RationaleEntry,
    SynthesisFields,
    SynthesisResult,
    ToolStat,
)
from reactive_temporal.contracts.llm_payloads import RationaleDetail
from reactive_temporal.contracts.run import FinalAnswerCapture
from reactive_temporal.limits import SYNTHESIS_TOTAL_MAX_CHARS, bound_synthesis
from reactive_temporal.prompts import synthesis_prompt
from reactive_temporal.rationale import (
    BLOCKS_MAX,
    REF_MAX_CHARS,
    REFS_MAX,
    extract_rationale,
    parse_rationale_blocks,
    strip_rationale_blocks,
)
from workflows.debrief_rules import build_fallback, merge_synthesis

ANSWER = {"summary": "Done.", "keyFindings": ["thing 1"], "lessonsLearned": ["l"], "caveats": ""}


def test_plain_json():
    parsed = parse_synthesis(json.dumps(ANSWER))
    assert parsed is not None and parsed.summary == "Done." and parsed.key_findings == ["thing 1"]


def test_fenced_json():
    parsed = parse_synthesis("```json\n" + json.dumps(ANSWER) + "\n```")
    assert parsed is not None and parsed.summary == "Done." and parsed.key_findings == ["thing 1"]


def test_prose_wrapped_json():
    text = "Here is the debrief you asked for:\n" + json.dumps(ANSWER) + "\nHope it helps!"
    parsed = parse_synthesis(text)
    assert parsed is not None and parsed.lessons_learned == ["l"]


def test_snake_case_keys_and_sloppy_types():
    parsed = parse_synthesis(
        '{"summary": 3, "key_findings": ["a", 2, null, {"x": 1}], "lessons_learned": "one"}'
    )
    assert parsed is not None
    assert parsed.summary is None and parsed.key_findings == ["a", "2"]
    assert parsed.lessons_learned == ["one"]


def test_invalid_answers_give_none():
    for text in ["", "not json at all", "[1, 2, 3]", "{broken", None]:
        assert parse_synthesis(text) is None


def test_prompt_has_the_reference_sections():
    inp = DebriefInput(
        task="Fetch commits",
        agent_id="a",
        run_id="r",
        terminated_by="final_answer_tool",
        final_answer=FinalAnswerCapture(output="list", summary="Fetched five commits."),
        tool_stats=[ToolStat(name="github/list_commits", calls=1, errors=0, avg_duration_ms=120)],
        metrics=DebriefMetrics(tokens=900, iterations=2),
        final_output="z" * 13_000,
        rationale=[
            RationaleEntry(
                iteration=1,
                tool_name="github/list_commits",
                rationale=RationaleDetail(why="need the list", confidence=0.9),
            )
        ],
    )
    prompt = synthesis_prompt(inp)
    for needle in [
        "Task: Fetch commits",
        "Agent self-report (from final-answer metadata when present): Fetched five commits.",
        "- github/list_commits: 1 call(s), 0 error(s), avg 120ms",
        "Errors from loop: none",
        "Decision rationale (why the agent made key choices):",
        "  Why: need the list (confidence: 90%)",
        "Total iterations: 2",
        "Total tokens: 900",
        "[truncated 1000 more characters]",
    ]:
        assert needle in prompt, needle
    assert "rationale" in prompt and "why" in prompt.lower()


# -- rationale ------------------------------------------------------------------------------------


def test_extract_rationale_rules():
    assert extract_rationale({"why": "because"}) == RationaleDetail(why="because")
    assert extract_rationale({"confidence": 0.5}) is None
    assert extract_rationale("why") is None
    assert extract_rationale({"why": "w" * 300}).why == "w" * 280  # type: ignore[union-attr]
    assert extract_rationale({"why": "x", "confidence": 1.5}).confidence is None  # type: ignore[union-attr]
    assert extract_rationale({"why": "x", "refs": ["obs:1", 2]}).refs is None  # type: ignore[union-attr]
    assert extract_rationale({"why": "x", "refs": ["obs:1"]}).refs == ["obs:1"]  # type: ignore[union-attr]


def test_parse_blocks():
    assert parse_rationale_blocks("") == {}
    text = (
        '<rationale call="2">{"why": "second"}</rationale>'
        'prose <rationale call="1">{"why": "first", "confidence": 0.8}</rationale>'
    )
    blocks = parse_rationale_blocks(text)
    assert list(blocks) == [2, 1]
    assert blocks[1] == RationaleDetail(why="first", confidence=0.8)


def test_blocks_without_call_attribute_take_sequential_positions():
    text = '<rationale>{"why": "a"}</rationale><rationale>{"why": "b"}</rationale>'
    assert {k: v.why for k, v in parse_rationale_blocks(text).items()} == {1: "a", 2: "b"}


def test_malformed_and_whyless_blocks_are_skipped():
    text = (
        '<rationale call="1">{not json</rationale>'
        '<rationale call="2">{"confidence": 1}</rationale>'
        '<rationale call="3">{"why": "ok"}</rationale>'
    )
    assert list(parse_rationale_blocks(text)) == [3]


def test_fenced_body_with_trailing_prose_parses():
    text = '<rationale call="1">```json\n{"why": "fenced"}\n``` and more words</rationale>'
    assert parse_rationale_blocks(text)[1].why == "fenced"


def test_colliding_calls_move_to_the_next_free_key():
    text = "".join(f'<rationale call="1">{{"why": "{w}"}}</rationale>' for w in "abc")
    assert {k: v.why for k, v in parse_rationale_blocks(text).items()} == {1: "a", 2: "b", 3: "c"}


def test_strip_removes_blocks_and_orphans_but_keeps_prose():
    text = (
        'I will search.\n<rationale call="1">{"why": "x"}</rationale>\n\n\n\nThen fetch.'
        "</rationale> tail <rationale>"
    )
    stripped = strip_rationale_blocks(text)
    assert stripped == "I will search.\n\nThen fetch. tail"
    assert strip_rationale_blocks(stripped) == stripped  # idempotent
    assert strip_rationale_blocks("") == ""
    assert strip_rationale_blocks("use <b>bold</b> and <rationales>") == (
        "use <b>bold</b> and <rationales>"
    )
    assert parse_rationale_blocks(text)[1].why == "x"  # the parser still reads the original


def test_a_reply_s_rationale_is_bounded_where_it_enters():
    """A 600 KB ref, thousands of blocks, a call number of 5,000 digits: the step's result
    went past the payload limit (the run's last task failed for good), or int() raised."""
    big = json.dumps({"why": "w", "refs": ["r" * 600_000] * 20})
    blocks = parse_rationale_blocks(f'<rationale call="1">{big}</rationale>')
    assert blocks[1].refs == ["r" * REF_MAX_CHARS] * REFS_MAX
    many = '<rationale>{"why": "a"}</rationale>' * 10_000
    assert list(parse_rationale_blocks(many)) == list(range(1, BLOCKS_MAX + 1))
    huge_number = f'<rationale call="{"9" * 5_000}">{{"why": "a"}}</rationale>'
    assert parse_rationale_blocks(huge_number + '<rationale>{"why": "b"}</rationale>') == {
        2: RationaleDetail(why="b")
    }


def test_a_debrief_carries_the_latest_rationale_only():
    from reactive_temporal.contracts.debrief import RationaleEntry
    from reactive_temporal.contracts.result import AgentResult
    from workflows.debrief_rules import MAX_DEBRIEF_RATIONALE, collect_debrief_input

    entries = [
        RationaleEntry(iteration=i, rationale=RationaleDetail(why=str(i))) for i in range(500)
    ]
    result = AgentResult(
        output="x", success=True, run_id="r", agent_id="a", terminated_by="end_turn"
    )
    kept = collect_debrief_input(result, "task", [], entries).rationale
    assert kept == entries[-MAX_DEBRIEF_RATIONALE:]


def test_a_debrief_carries_the_latest_approvals_only():
    """160 turns of 16 calls denied by the approval timeout: every decision in the result
    twice made it 2.3 MB, and the run's last task failed for good."""
    from datetime import UTC, datetime

    from reactive_temporal.contracts.approvals import ApprovalRecord
    from reactive_temporal.contracts.result import AgentResult
    from workflows.debrief_rules import MAX_DEBRIEF_APPROVALS, collect_debrief_input

    at = datetime(2026, 12, 4, tzinfo=UTC)
    records = [
        ApprovalRecord(call_id=f"c{i}", tool="t", arguments="{}", decision="denied", by="x", at=at)
        for i in range(2_560)
    ]
    result = AgentResult(
        output="x", success=True, run_id="r", agent_id="a", terminated_by="end_turn"
    )
    kept = collect_debrief_input(result, "task", [], [], records).approvals
    assert kept == records[-MAX_DEBRIEF_APPROVALS:]


def test_a_hostile_synthesis_leaves_the_debrief_s_store_input_far_under_2_mb():
    """20 findings, errors and lessons of 4,000 characters each, control characters (six bytes
    each in JSON) or emoji (four), with a summary and caveats as long: the debrief carries each
    text twice (fields and markdown) to the store in one activity input, which came to 2.9 MB,
    and the debrief child's task failed for good, nothing stored."""
    for char in ("\x01", "\x1b", "😀", "é"):
        long = char * 4_000
        fields = SynthesisFields(
            summary=long,
            caveats=long,
            key_findings=[f"{i}{long}" for i in range(20)],
            errors_encountered=[f"e{i}{long}" for i in range(20)],
            lessons_learned=[f"l{i}{long}" for i in range(20)],
        )
        bounded = bound_synthesis(fields)
        assert bounded is not None
        texts = [
            bounded.summary or "",
            bounded.caveats or "",
            *bounded.key_findings,
            *bounded.errors_encountered,
            *bounded.lessons_learned,
        ]
        assert sum(map(len, texts)) <= SYNTHESIS_TOTAL_MAX_CHARS
        assert not any(c in t for t in texts for c in "\x01\x1b")
        ran = DebriefInput(
            task="t" * 2_000,
            agent_id="a",
            run_id="r",
            terminated_by="final_answer",
            final_output=char * 100_000,
        )
        debrief = merge_synthesis(ran, build_fallback(ran), SynthesisResult(parsed=bounded))
        size = len(to_json(PersistDebriefInput(input=ran, debrief=debrief).model_dump(mode="json")))
        assert size < 1_000_000, (repr(char), size)
    tidy = bound_synthesis(SynthesisFields(summary="Tabs\tand\nnewlines stay.", key_findings=[]))
    assert tidy is not None and tidy.summary == "Tabs\tand\nnewlines stay."
