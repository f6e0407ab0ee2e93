"""The deterministic debrief: what a run did, computed from its signals without an LLM.

Pure functions (reference §2.2–2.7), used twice: the run returns `build_fallback` at once
(the instant debrief), and the DebriefWorkflow merges an LLM synthesis into it with
`merge_synthesis`. Two upstream bugs are not copied: meta-tools (final-answer) are not
counted as tools, and a rejected final-answer attempt is not an error.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from reactive_temporal.contracts.approvals import ApprovalRecord
from reactive_temporal.contracts.debrief import (
    AgentDebrief,
    Confidence,
    DebriefInput,
    DebriefMetrics,
    Outcome,
    PersistDebriefInput,
    RationaleEntry,
    SynthesisResult,
    SynthesisTokens,
    ToolCallRecord,
    ToolStat,
    ToolUsage,
)
from reactive_temporal.contracts.llm_payloads import BilledReplies
from reactive_temporal.contracts.result import AgentResult
from reactive_temporal.contracts.run import SUCCESSFUL_ENDINGS, TerminatedBy
from reactive_temporal.js_numbers import js_round
from reactive_temporal.limits import within_bytes
from workflows.debrief_markdown import format_markdown
from workflows.stop_rules import STOP_ENDINGS

TRIVIAL_OUTPUT_CHARS = 100
BRIEF_OUTPUT_CHARS = 400
_TOOL_ERROR_PREFIX = "[Tool error: "
_NO_OUTPUT_SUMMARY: dict[str, str] = {
    "max_iterations": "The run stopped at its iteration cap before producing an answer.",
    "llm_error": "The run stopped on an LLM error before producing an answer.",
    "error": "The run failed before producing an answer.",  # its error says why
}


MAX_DEBRIEF_RATIONALE = 100
"""Rationale entries (audit mode) a debrief carries, the latest: each is in the run's result
twice (the debrief and its markdown), and a run of many calls would fill it."""
MAX_DEBRIEF_APPROVALS = 100
"""Approval decisions a debrief carries, the latest: each is in the run's result twice, and
160 turns of 16 calls timed out made a result of 2.3 MB (its last task failed for good)."""
MAX_DEBRIEF_ERRORS = 50
"""Distinct errors a debrief carries at most (a long run's failures would fill its input)."""
MAX_TOOL_STATS = 64
"""Tools a run's stats name one by one; the rest are counted together as OTHER_TOOLS."""
OTHER_TOOLS = "(other tools)"


def collect_debrief_input(
    result: AgentResult,
    task: str,
    tool_calls: list[ToolCallRecord],
    rationale: list[RationaleEntry],
    approvals: Sequence[ApprovalRecord] = (),
    *,
    cause: str | None = None,
    earlier_stats: Sequence[ToolStat] = (),
    earlier_errors: Sequence[str] = (),
) -> DebriefInput:
    """The debrief's signals, from a finished run's result and what its loop recorded;
    `cause` (a failed run's `ending_cause`) joins the errors; `earlier_*` are what the run
    recorded before it last continued as new."""
    m = result.metadata
    return DebriefInput(
        task=task,
        agent_id=result.agent_id,
        run_id=result.run_id,
        terminated_by=result.terminated_by,
        final_answer=result.final_answer,
        tool_stats=merge_tool_stats(earlier_stats, tool_stats(tool_calls)),
        errors_from_loop=within_bytes(
            dedupe([*earlier_errors, *errors_from_loop(tool_calls), *([cause] if cause else [])])[
                :MAX_DEBRIEF_ERRORS
            ],
            latest=False,
        ),
        metrics=DebriefMetrics(
            tokens=m.tokens_used, duration_ms=m.duration_ms, iterations=m.iterations, cost=m.cost
        ),
        final_output=result.output.strip() or None,
        output_format=result.format,
        rationale=within_bytes(rationale[-MAX_DEBRIEF_RATIONALE:]),
        stop_note=result.error if result.terminated_by in STOP_ENDINGS else None,
        approvals=within_bytes(list(approvals)[-MAX_DEBRIEF_APPROVALS:]),
    )


def ending_cause(
    result: AgentResult, *, max_iterations: int, missing_required: Sequence[str] = ()
) -> str | None:
    """Why a run that did not succeed stopped, in words for the debrief's errors; None for a
    success. Every failed ending, including ones added later, gets one."""
    if result.terminated_by in SUCCESSFUL_ENDINGS or result.terminated_by in STOP_ENDINGS:
        return None  # a stopped run's note says why (DebriefInput.stop_note)
    if result.terminated_by == "max_iterations":
        cause = f"Stopped at the iteration cap ({max_iterations} iterations) before finishing"
        if missing_required:
            cause += f"; required tools never called: {', '.join(missing_required)}"
        return cause
    if result.terminated_by == "llm_error":
        return f"The LLM call failed for good: {result.error or 'no detail'}"
    if result.terminated_by == "error":  # a bug, or data the database refused: its error says
        return f"The run failed: {result.error or 'no detail'}"
    detail = f": {result.error}" if result.error else ""
    return f"The run ended by {result.terminated_by} before finishing{detail}"


def tool_stats(records: Iterable[ToolCallRecord]) -> list[ToolStat]:
    """Calls, errors and mean duration per tool, in the order tools were first used."""
    grouped: dict[str, list[ToolCallRecord]] = {}
    for record in records:
        grouped.setdefault(record.name, []).append(record)
    return [
        ToolStat(
            name=name,
            calls=len(calls),
            errors=sum(1 for c in calls if not c.success),
            avg_duration_ms=js_round(sum(c.duration_ms for c in calls) / len(calls)),
        )
        for name, calls in grouped.items()
    ]


def _merged(seen: ToolStat, stat: ToolStat, name: str) -> ToolStat:
    calls = seen.calls + stat.calls
    return ToolStat(
        name=name,
        calls=calls,
        errors=seen.errors + stat.errors,
        avg_duration_ms=js_round(
            (seen.avg_duration_ms * seen.calls + stat.avg_duration_ms * stat.calls) / max(calls, 1)
        ),
    )


def merge_tool_stats(*groups: Iterable[ToolStat]) -> list[ToolStat]:
    """Per-tool stats of several stretches of a run as one, in first-use order: at most
    MAX_TOOL_STATS, the tools past them folded into one OTHER_TOOLS stat (a model that calls
    a new made-up name each time would fill the run's carried state and its debrief)."""
    merged: dict[str, ToolStat] = {}
    for group in groups:
        for stat in group:
            seen = merged.get(stat.name)
            merged[stat.name] = (
                stat.model_copy() if seen is None else _merged(seen, stat, stat.name)
            )
    if len(merged) <= MAX_TOOL_STATS:
        return list(merged.values())
    named = [s for s in merged.values() if s.name != OTHER_TOOLS][: MAX_TOOL_STATS - 1]
    kept = {s.name for s in named}
    other = ToolStat(name=OTHER_TOOLS, calls=0, errors=0, avg_duration_ms=0)
    for stat in merged.values():
        if stat.name not in kept:
            other = _merged(other, stat, OTHER_TOOLS)
    return [*named, other]


def errors_from_loop(records: Iterable[ToolCallRecord]) -> list[str]:
    """`Tool <name> failed` per failed call, then each `[Tool error: …]` detail."""
    records = list(records)
    failures = [f"Tool {r.name} failed" for r in records if not r.success]
    details = [d for r in records if r.error and (d := tool_error_detail(r.error)) is not None]
    return failures + details


def tool_error_detail(text: str) -> str | None:
    """The first `[Tool error: <detail>]`'s detail (what `\\[Tool error: ([^\\]]+)\\]` would
    find), in linear time: the regex took minutes of workflow CPU on a hostile error text
    holding many prefixes and no closing bracket."""
    start = 0
    while (i := text.find(_TOOL_ERROR_PREFIX, start)) >= 0:
        body = i + len(_TOOL_ERROR_PREFIX)
        end = text.find("]", body)
        if end < 0:
            return None  # no closing bracket after this prefix, so none after any later one
        if end > body:
            return text[body:end]
        start = i + 1
    return None


def dedupe(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def derive_outcome(terminated_by: TerminatedBy, errors: list[str]) -> Outcome:
    if terminated_by in ("llm_error", "error"):
        return "failed"
    if terminated_by == "max_iterations" or terminated_by in STOP_ENDINGS:
        return "partial"
    return "partial" if errors else "success"


def brief_output(text: str | None) -> str | None:
    trimmed = (text or "").strip()
    if not trimmed:
        return None
    if len(trimmed) <= BRIEF_OUTPUT_CHARS:
        return trimmed
    return trimmed[:BRIEF_OUTPUT_CHARS] + "…"


def derive_confidence(input: DebriefInput) -> Confidence | str:
    """The model's declared confidence; else high with an answer, medium without. A run that
    did not succeed is never more than "medium" sure, whatever the model said."""
    declared = input.final_answer.confidence if input.final_answer else None
    confidence = declared or ("high" if (input.final_output or "").strip() else "medium")
    if input.terminated_by not in SUCCESSFUL_ENDINGS and confidence != "low":
        return "medium"
    return confidence


def fallback_summary(input: DebriefInput) -> str:
    if input.stop_note:
        last = brief_output(input.final_output)
        return f"The run was stopped ({input.stop_note})." + (
            f" Its last reply: {last}" if last else " It had produced no answer yet."
        )
    capture = input.final_answer
    if capture and capture.summary.strip():  # upstream's `??` lets "" through; we don't
        return capture.summary.strip()
    return brief_output(input.final_output) or _NO_OUTPUT_SUMMARY.get(
        input.terminated_by, "Task completed."
    )


def tool_usage(stats: Iterable[ToolStat]) -> list[ToolUsage]:
    return [
        ToolUsage(
            name=s.name,
            calls=s.calls,
            success_rate=(s.calls - s.errors) / s.calls if s.calls else 1.0,
        )
        for s in stats
    ]


def is_trivial(input: DebriefInput, *, failed_runs_teach: bool = True) -> bool:
    """Short answer, no errors: the deterministic debrief says all there is to say. A run
    that did not succeed is never trivial: what went wrong is worth a synthesis and lessons
    (`failed_runs_teach=False` is the rule of runs started before that)."""
    if failed_runs_teach and input.terminated_by not in SUCCESSFUL_ENDINGS:
        return False
    output = (input.final_output or "").strip()
    return len(output) < TRIVIAL_OUTPUT_CHARS and not input.errors_from_loop


def build_fallback(input: DebriefInput) -> AgentDebrief:
    debrief = AgentDebrief(
        outcome=derive_outcome(input.terminated_by, input.errors_from_loop),
        summary=fallback_summary(input),
        errors_encountered=dedupe([*_stopped(input), *input.errors_from_loop]),
        confidence=derive_confidence(input),
        tools_used=tool_usage(input.tool_stats),
        metrics=input.metrics.model_copy(),
        rationale=list(input.rationale),
        approvals=list(input.approvals),
    )
    debrief.markdown = format_markdown(debrief)
    return debrief


def _stopped(input: DebriefInput) -> list[str]:
    """The limit or cancel that stopped the run, as the debrief's first error (if one did)."""
    return [f"Stopped: {input.stop_note}"] if input.stop_note else []


def merge_synthesis(
    input: DebriefInput, fallback: AgentDebrief, result: SynthesisResult
) -> AgentDebrief:
    """The rich debrief: the LLM's narrative over the deterministic facts.

    Outcome, confidence, tools and metrics stay deterministic; the LLM contributes the
    summary, findings, lessons, caveats and any errors it noticed. An answer that is not
    usable JSON leaves the fallback, with what the call was billed (`with_synthesis_bill`).
    """
    parsed = result.parsed
    if parsed is None:  # billed all the same: the fallback says what it cost
        return with_synthesis_bill(fallback, result.tokens)
    metrics = DebriefMetrics(
        **input.metrics.model_dump(exclude={"synthesis_tokens"}),
        synthesis_tokens=result.tokens if result.tokens.total > 0 else None,
    )
    debrief = fallback.model_copy(
        update={
            "summary": (parsed.summary or "").strip() or fallback.summary,
            "key_findings": [f for f in parsed.key_findings if f.strip()],
            "errors_encountered": dedupe(
                [
                    *_stopped(input),
                    *(e for e in parsed.errors_encountered if e.strip()),
                    *input.errors_from_loop,
                ]
            ),
            "lessons_learned": [lesson for lesson in parsed.lessons_learned if lesson.strip()],
            "caveats": (parsed.caveats or "").strip() or None,
            "metrics": metrics,
            "synthesized": True,
        }
    )
    debrief.markdown = format_markdown(debrief)
    return debrief


def persist_input(input: DebriefInput, debrief: AgentDebrief) -> PersistDebriefInput:
    """The `persist_debrief` activity's input: the debrief, and of its input what the row keeps
    (the run, its task and output; `activities/debrief_store.py`). The answer's capture and
    the run's records are in the debrief already: sent twice, a run ended by an operator's
    100,000-character answer with its records at their limits made an input of 2.2 MB, past
    the 2 MB Temporal takes, and the debrief was never kept. Replay does not compare an
    activity's input."""
    kept = input.model_copy(
        update={
            "final_answer": None,
            "tool_stats": [],
            "errors_from_loop": [],
            "rationale": [],
            "approvals": [],
        }
    )
    return PersistDebriefInput(input=kept, debrief=debrief)


def unusable_but_billed(result: SynthesisResult) -> bool:
    """Whether the synthesis call was billed for an answer that gave no rich debrief (the
    case the `synthesis-bill-kept` patch changed: its usage was dropped with the answer)."""
    return result.parsed is None and result.tokens.total > 0


def billed_synthesis(billed: BilledReplies | None) -> SynthesisTokens | None:
    """What a synthesis activity that failed for good says it was billed for (its failure's
    `BilledReplies`), as the debrief's `synthesis_tokens`; None when it says nothing or
    nothing was billed (a failure from before it said, or an endpoint that never answered)."""
    if billed is None or billed.usage.total_tokens <= 0:
        return None
    return SynthesisTokens.billed(billed)


def with_synthesis_bill(debrief: AgentDebrief, tokens: SynthesisTokens) -> AgentDebrief:
    """The debrief with its synthesis call's usage and dollars in `metrics.synthesis_tokens`
    (the released shape, `{input, output, total, cost}`, kept when `total` > 0 as the
    reference does), whether or not the call's answer made it rich: a model that answers in
    prose is billed on every run, and `costs` reads the bill from here. Nothing else changes:
    a fallback stays `synthesized: False`, and the markdown never shows synthesis tokens."""
    if tokens.total <= 0:
        return debrief
    metrics = debrief.metrics.model_copy(update={"synthesis_tokens": tokens.model_copy()})
    return debrief.model_copy(update={"metrics": metrics})
