"""The deterministic debrief (reference §2.2–2.7) and the merge of a synthesis over it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic_core import to_json

from reactive_temporal.contracts.approvals import ApprovalRecord
from reactive_temporal.contracts.debrief import (
    DebriefInput,
    DebriefMetrics,
    PersistDebriefInput,
    RationaleEntry,
    SynthesisFields,
    SynthesisResult,
    SynthesisTokens,
    ToolCallRecord,
)
from reactive_temporal.contracts.llm_payloads import BilledReplies, RationaleDetail
from reactive_temporal.contracts.result import AgentResult
from reactive_temporal.contracts.run import FinalAnswerCapture, Usage
from reactive_temporal.limits import ERROR_RECORD_MAX_CHARS
from reactive_temporal.rationale import REF_MAX_CHARS, REFS_MAX, WHY_MAX_CHARS
from workflows.approval_rules import ARGUMENTS_PREVIEW_CHARS
from workflows.debrief_markdown import format_markdown
from workflows.debrief_rules import (
    billed_synthesis,
    brief_output,
    build_fallback,
    collect_debrief_input,
    derive_outcome,
    ending_cause,
    errors_from_loop,
    is_trivial,
    merge_synthesis,
    tool_stats,
    unusable_but_billed,
    with_synthesis_bill,
)
from workflows.run_state import RunState


def make_input(**changes) -> DebriefInput:
    base = dict(
        task="Summarize the commits",
        agent_id="a",
        run_id="r",
        terminated_by="final_answer_tool",
        metrics=DebriefMetrics(tokens=5000, duration_ms=12000, iterations=5, cost=0.0123),
    )
    return DebriefInput.model_validate({**base, **changes})


def test_tool_stats_group_in_first_seen_order_with_errors_and_mean_duration():
    records = [
        ToolCallRecord(name="search", success=True, duration_ms=100),
        ToolCallRecord(name="fetch", success=False, duration_ms=50, error="[Tool error: 404]"),
        ToolCallRecord(name="search", success=False, duration_ms=301),
        ToolCallRecord(name="search", success=True, duration_ms=200),
        ToolCallRecord(name="search", success=True, duration_ms=200),
    ]
    stats = tool_stats(records)
    assert [(s.name, s.calls, s.errors, s.avg_duration_ms) for s in stats] == [
        ("search", 4, 1, 200),
        ("fetch", 1, 1, 50),
    ]
    usage = build_fallback(make_input(tool_stats=stats)).tools_used
    assert usage[0].success_rate == pytest.approx(0.75)  # 4 calls, 1 error
    assert usage[1].success_rate == 0.0


def test_errors_from_loop_lists_failures_then_details():
    records = [
        ToolCallRecord(name="fetch", success=False, error="[Tool error: fetch failed: 404]"),
        ToolCallRecord(name="calc", success=True),
        ToolCallRecord(name="fetch", success=False, error="[Tool error: fetch failed: 404]"),
    ]
    errors = errors_from_loop(records)
    assert errors == [
        "Tool fetch failed",
        "Tool fetch failed",
        "fetch failed: 404",
        "fetch failed: 404",
    ]
    assert build_fallback(make_input(errors_from_loop=errors)).errors_encountered == [
        "Tool fetch failed",
        "fetch failed: 404",
    ]  # deduplicated, first occurrence kept


@pytest.mark.parametrize(
    ("terminated_by", "errors", "outcome"),
    [
        ("llm_error", [], "failed"),
        ("max_iterations", [], "partial"),
        ("final_answer_tool", [], "success"),
        ("final_answer", [], "success"),
        ("end_turn", [], "success"),  # HEAD semantics (0.7.5 said partial)
        ("final_answer_tool", ["Tool x failed"], "partial"),
        ("end_turn", ["boom"], "partial"),
    ],
)
def test_outcome_rule(terminated_by, errors, outcome):
    assert derive_outcome(terminated_by, errors) == outcome


def test_summary_falls_back_from_capture_to_output_to_a_default():
    capture = FinalAnswerCapture(output="42", summary="Computed it.")
    assert build_fallback(make_input(final_answer=capture)).summary == "Computed it."
    empty_summary = FinalAnswerCapture(output="42", summary="  ")
    assert (
        build_fallback(make_input(final_answer=empty_summary, final_output="42")).summary == "42"
    )  # an empty summary does not win (upstream's `??` bug)
    long = "x" * 450
    assert build_fallback(make_input(final_output=long)).summary == "x" * 400 + "…"
    assert build_fallback(make_input()).summary == "Task completed."
    assert "iteration cap" in build_fallback(make_input(terminated_by="max_iterations")).summary


def test_brief_output():
    assert brief_output("  ") is None and brief_output(None) is None
    assert brief_output(" hi ") == "hi"


def test_confidence_rule():
    high = FinalAnswerCapture(output="x", confidence="low")
    assert build_fallback(make_input(final_answer=high, final_output="x")).confidence == "low"
    assert build_fallback(make_input(final_output="answer")).confidence == "high"
    assert build_fallback(make_input()).confidence == "medium"


def test_fallback_defaults():
    d = build_fallback(make_input(final_output="ok"))
    assert d.key_findings == [] and d.lessons_learned == [] and d.caveats is None
    assert d.metrics.tokens == 5000 and d.metrics.synthesis_tokens is None
    assert d.synthesized is False and d.markdown == format_markdown(d)


def test_trivial_gate():
    assert is_trivial(make_input(final_output="short"))
    assert not is_trivial(make_input(final_output="x" * 100))
    assert not is_trivial(make_input(final_output="short", errors_from_loop=["Tool x failed"]))


@pytest.mark.parametrize("ending", ["max_iterations", "llm_error", "cancelled", "timeout"])
def test_failed_runs_are_never_trivial_and_never_more_than_medium_sure(ending):
    """Every ending that is not a success, including ones added later (model_construct: the
    Literal does not list them yet)."""
    sure = FinalAnswerCapture(output="ok", confidence="high")
    failed = make_input(final_output="ok", final_answer=sure).model_copy(
        update={"terminated_by": ending}
    )
    assert not is_trivial(failed)
    assert is_trivial(failed, failed_runs_teach=False)  # the rule of runs started before
    assert build_fallback(failed).confidence == "medium"
    doubtful = failed.model_copy(
        update={"final_answer": FinalAnswerCapture(output="ok", confidence="low")}
    )
    assert build_fallback(doubtful).confidence == "low"


def _result(terminated_by, error=None):
    return AgentResult.model_construct(
        output="", success=False, run_id="r", agent_id="a", terminated_by=terminated_by,
        error=error, final_answer=None, format="text", tools_used=[],
    )  # fmt: skip


def test_a_failed_runs_cause_is_among_its_errors():
    cap = ending_cause(_result("max_iterations"), max_iterations=7, missing_required=["clock"])
    assert cap == (
        "Stopped at the iteration cap (7 iterations) before finishing; "
        "required tools never called: clock"
    )
    boom = ending_cause(_result("llm_error", "HTTP 500: boom"), max_iterations=7)
    assert boom == "The LLM call failed for good: HTTP 500: boom"
    assert ending_cause(_result("timeout", "5s deadline"), max_iterations=7) is None  # stop_note
    assert ending_cause(_result("abstained", "no way"), max_iterations=7) == (
        "The run ended by abstained before finishing: no way"
    )
    assert ending_cause(_result("final_answer_tool"), max_iterations=7) is None
    result = AgentResult(
        output="", success=False, run_id="r", agent_id="a", terminated_by="max_iterations"
    )
    debrief_input = collect_debrief_input(
        result, "task", [ToolCallRecord(name="x", success=False)], [], cause=cap
    )
    assert debrief_input.errors_from_loop == ["Tool x failed", cap]
    assert cap in build_fallback(debrief_input).errors_encountered


# -- markdown ---------------------------------------------------------------------------------


def test_markdown_minimal_layout_is_exact():
    d = build_fallback(make_input(final_output="The answer."))
    assert d.markdown == "\n".join(
        [
            "# Agent Debrief ✅ success",
            "",
            "**Outcome:** success | **Confidence:** high",
            "",
            "## Summary",
            "",
            "The answer.",
            "",
            "## Tools Used",
            "",
            "No tools called.",
            "",
            "## Metrics",
            "",
            "- Tokens: 5,000",
            "- Duration: 12.0s",
            "- Iterations: 5",
            "- Cost: $0.0123",
        ]
    )


def test_markdown_full_section_order_and_percentages():
    stats = tool_stats(
        [
            ToolCallRecord(name="github/list_commits", success=True),
            ToolCallRecord(name="github/list_commits", success=True),
            ToolCallRecord(name="github/list_commits", success=False),
        ]
    )
    rationale = [
        RationaleEntry(
            iteration=1,
            tool_name="github/list_commits",
            rationale=RationaleDetail(why="Need the raw list", refs=["obs:1"], confidence=0.95),
        )
    ]
    fallback = build_fallback(
        make_input(
            tool_stats=stats,
            errors_from_loop=["Tool github/list_commits failed"],
            rationale=rationale,
            final_output="done",
        )
    )
    rich = merge_synthesis(
        make_input(errors_from_loop=["Tool github/list_commits failed"]),
        fallback,
        SynthesisResult(
            parsed=SynthesisFields(
                summary="Fetched commits.",
                key_findings=["thing 1"],
                lessons_learned=["page the API"],
                caveats="Only 5 commits.",
            )
        ),
    )
    md = rich.markdown
    order = [
        "# Agent Debrief ⚠️ partial",
        "## Summary",
        "## Key Findings",
        "## Errors Encountered",
        "## Lessons Learned",
        "## Caveats",
        "## Decision Rationale",
        "## Tools Used",
        "## Metrics",
    ]
    positions = [md.index(h) for h in order]
    assert positions == sorted(positions)
    assert "- thing 1" in md and "- page the API" in md and "Only 5 commits." in md
    assert "- `github/list_commits`: 3 call(s), 67% success" in md
    assert "- **Iteration 1** — tool-selection `github/list_commits` _(confidence: 95%)_" in md
    assert "  - Why: Need the raw list\n  - Refs: obs:1" in md
    assert not md.endswith("\n")


def test_markdown_omits_empty_sections():
    md = build_fallback(make_input(final_output="x")).markdown
    for heading in (
        "Key Findings",
        "Errors Encountered",
        "Lessons Learned",
        "Caveats",
        "Rationale",
    ):
        assert heading not in md


def test_failed_badge():
    assert build_fallback(make_input(terminated_by="llm_error")).markdown.startswith(
        "# Agent Debrief ❌ failed"
    )


# -- merging a synthesis ------------------------------------------------------------------------


def test_merge_keeps_deterministic_facts_and_counts_synthesis_tokens_apart():
    inp = make_input(final_output="x" * 200, errors_from_loop=["Tool a failed"])
    fallback = build_fallback(inp)
    result = SynthesisResult(
        parsed=SynthesisFields(
            summary="Narrative.", errors_encountered=["rate limited", "Tool a failed"]
        ),
        tokens=SynthesisTokens(input=200, output=100, total=300, cost=0.0015),
    )
    rich = merge_synthesis(inp, fallback, result)
    assert rich.summary == "Narrative." and rich.synthesized
    assert rich.outcome == fallback.outcome == "partial"  # never from the LLM
    assert rich.confidence == fallback.confidence
    assert rich.errors_encountered == ["rate limited", "Tool a failed"]
    assert rich.metrics.tokens == 5000  # the run's tokens exclude the synthesis
    assert rich.metrics.synthesis_tokens == SynthesisTokens(
        input=200, output=100, total=300, cost=0.0015
    )


def test_unusable_synthesis_keeps_the_fallback():
    inp = make_input(final_output="y" * 200)
    fallback = build_fallback(inp)
    assert merge_synthesis(inp, fallback, SynthesisResult(parsed=None)) is fallback


def test_an_unusable_but_billed_synthesis_keeps_the_fallback_with_its_bill():
    """A model that answers in prose is billed on every run: the fallback stands, still not
    synthesized, and says what the call cost in the released shape (reference §2.5: usage
    kept whenever its total is above 0, a failed parse included)."""
    inp = make_input(final_output="y" * 200, errors_from_loop=["Tool a failed"])
    fallback = build_fallback(inp)
    bill = SynthesisTokens(input=1200, output=300, total=1500, cost=0.0054)
    result = SynthesisResult(parsed=None, raw_excerpt="It went well!", tokens=bill)
    assert unusable_but_billed(result)
    debrief = merge_synthesis(inp, fallback, result)
    assert not debrief.synthesized
    assert debrief.metrics.synthesis_tokens == bill
    assert debrief.metrics.model_dump(exclude={"synthesis_tokens"}) == fallback.metrics.model_dump(
        exclude={"synthesis_tokens"}
    )  # the run's own tokens and cost never include the synthesis
    assert debrief.model_dump(exclude={"metrics"}) == fallback.model_dump(exclude={"metrics"})
    assert "synthesis" not in debrief.markdown.lower()  # not rendered, as upstream
    assert fallback.metrics.synthesis_tokens is None  # the instant debrief is left as it was
    assert debrief.model_dump(mode="json")["metrics"]["synthesis_tokens"] == {
        "input": 1200, "output": 300, "total": 1500, "cost": 0.0054
    }  # fmt: skip


def test_nothing_billed_is_nothing_counted():
    fallback = build_fallback(make_input(final_output="y" * 200))
    assert not unusable_but_billed(SynthesisResult(parsed=None))
    assert not unusable_but_billed(
        SynthesisResult(parsed=SynthesisFields(summary="Rich."), tokens=SynthesisTokens(total=9))
    )  # a rich debrief counts its bill as it always did
    assert with_synthesis_bill(fallback, SynthesisTokens()) is fallback


def test_a_synthesis_that_failed_for_good_is_counted_from_its_billed_replies():
    """Its failure's details (`BilledReplies`, the LLM step's shape) are what its attempts
    were billed for replies that could not be read; none, or none billed, count nothing."""
    billed = BilledReplies(
        usage=Usage(prompt_tokens=900, completion_tokens=60, reasoning_tokens=20), cost=0.01
    )
    assert billed_synthesis(billed) == SynthesisTokens(input=900, output=60, total=960, cost=0.01)
    assert billed_synthesis(None) is None
    assert billed_synthesis(BilledReplies()) is None
    fallback = build_fallback(make_input(final_output="y" * 200))
    tokens = billed_synthesis(billed)
    assert tokens is not None
    debrief = with_synthesis_bill(fallback, tokens)
    assert not debrief.synthesized and debrief.summary == fallback.summary
    assert debrief.metrics.synthesis_tokens == tokens


def test_blank_synthesis_summary_keeps_the_deterministic_one():
    capture = FinalAnswerCapture(output="y", summary="Self report.")
    inp = make_input(final_answer=capture, final_output="y" * 200)
    rich = merge_synthesis(
        inp, build_fallback(inp), SynthesisResult(parsed=SynthesisFields(summary=" "))
    )
    assert rich.summary == "Self report."


@pytest.mark.parametrize("char", ["\x01", "😀"])
def test_a_run_s_records_stay_far_under_2_mb_in_its_result_and_its_next_run(char):
    """Records at their per-item limits, of characters that are six bytes (a control
    character) or four (an emoji) in JSON: 150 rationale entries, 150 approvals, 200 failed
    calls, 50 distinct errors. The result, the last local activity's input (the debrief
    input and the debrief twice) and the continue-as-new state stay far under 2 MB (a long
    audit run made a result of 3.7 MB and a handover of 2.3 MB: its task failed for good)."""
    why = RationaleDetail(why=char * WHY_MAX_CHARS, refs=[char * REF_MAX_CHARS] * REFS_MAX)
    rationale = [RationaleEntry(iteration=i, tool_name="t", rationale=why) for i in range(150)]
    now = datetime(2026, 12, 4, tzinfo=UTC)
    approvals = [
        ApprovalRecord(
            call_id=f"c{i}", tool="t", arguments=char * ARGUMENTS_PREVIEW_CHARS,
            decision="denied", by=char * 200, at=now, reason=char * 2_000,
        )
        for i in range(150)
    ]  # fmt: skip
    calls = [
        ToolCallRecord(name="t", success=False, error=f"{i}{char * ERROR_RECORD_MAX_CHARS}")
        for i in range(200)
    ]
    result = AgentResult(
        output=char * 1_000, success=False, run_id="r", agent_id="a", terminated_by="max_iterations"
    )
    errors = [f"e{i}{char * ERROR_RECORD_MAX_CHARS}" for i in range(50)]
    debrief_input = collect_debrief_input(
        result, "task", calls, rationale, approvals, earlier_errors=errors
    )
    assert debrief_input.rationale and debrief_input.approvals and debrief_input.errors_from_loop
    assert debrief_input.rationale[-1] == rationale[-1]  # the latest are kept
    assert debrief_input.errors_from_loop[0] == errors[0]  # errors from the first on
    debrief = build_fallback(debrief_input)
    last_activity = len(to_json(PersistDebriefInput(input=debrief_input, debrief=debrief)))
    last_activity += len(to_json(debrief))
    assert last_activity < 800_000
    ended = result.model_copy(update={"debrief": debrief})
    assert len(to_json(ended)) < 500_000

    state = RunState(
        tool_calls=calls, rationale=rationale, approvals=approvals, earlier_errors=errors
    )
    assert len(to_json(state.compacted())) < 300_000
