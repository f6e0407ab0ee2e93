"""A debrief as markdown: the reference's exact layout (§2.7), for the CLI, chat and the store.

Pure, like the rules that build the debrief (`debrief_rules.py`), which set it on every debrief
they make: the instant one and the one a synthesis is merged into.
"""

from __future__ import annotations

from reactive_temporal.contracts.debrief import AgentDebrief
from reactive_temporal.js_numbers import js_number, js_round_text, to_fixed
from workflows.approval_rules import approval_lines

_OUTCOME_BADGE = {"success": "✅ success", "partial": "⚠️ partial", "failed": "❌ failed"}


def _section(title: str, lines: list[str]) -> list[str]:
    return [f"## {title}", "", *lines, ""] if lines else []


def format_markdown(d: AgentDebrief) -> str:
    """The reference's exact layout: fixed section order, empty sections omitted."""
    lines = [
        f"# Agent Debrief {_OUTCOME_BADGE[d.outcome]}",
        "",
        f"**Outcome:** {d.outcome} | **Confidence:** {d.confidence}",
        "",
        "## Summary",
        "",
        d.summary,
        "",
    ]
    lines += _section("Key Findings", [f"- {f}" for f in d.key_findings])
    lines += _section("Errors Encountered", [f"- {e}" for e in d.errors_encountered])
    lines += _section("Lessons Learned", [f"- {lesson}" for lesson in d.lessons_learned])
    lines += _section("Caveats", [d.caveats] if d.caveats else [])
    rationale: list[str] = []
    for entry in d.rationale:
        head = f"- **Iteration {entry.iteration}** — {entry.decision}"
        if entry.tool_name:
            head += f" `{entry.tool_name}`"
        if entry.rationale.confidence is not None:
            head += f" _(confidence: {js_round_text(entry.rationale.confidence * 100)}%)_"
        rationale += [head, f"  - Why: {entry.rationale.why}"]
        if entry.rationale.refs:
            rationale.append(f"  - Refs: {', '.join(entry.rationale.refs)}")
    lines += _section("Decision Rationale", rationale)
    lines += _section("Approvals", approval_lines(d.approvals))
    lines += ["## Tools Used", ""]
    if d.tools_used:
        lines += [
            f"- `{t.name}`: {t.calls} call(s), {js_round_text(t.success_rate * 100)}% success"
            for t in d.tools_used
        ]
    else:
        lines.append("No tools called.")
    lines += [
        "",
        "## Metrics",
        "",
        f"- Tokens: {d.metrics.tokens:,}",
        f"- Duration: {to_fixed(js_number(d.metrics.duration_ms) / 1000, 1)}s",
        f"- Iterations: {d.metrics.iterations}",
        f"- Cost: ${to_fixed(d.metrics.cost, 4)}",
    ]
    return "\n".join(lines)
