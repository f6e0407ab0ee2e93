"""Numbers in debriefs, notes and chat context rounded as the released implementation
(JavaScript) rounds them: a half up, where Python's round() goes to the even neighbour."""

from __future__ import annotations

import pytest

from reactive_temporal.contracts.debrief import AgentDebrief, DebriefMetrics, ToolUsage
from reactive_temporal.js_numbers import js_round, to_fixed
from workflows.debrief_markdown import format_markdown


@pytest.mark.parametrize(
    ("value", "rounded"), [(62.5, 63), (12.5, 13), (2.5, 3), (-2.5, -2), (0.49999, 0), (7, 7)]
)
def test_math_round(value: float, rounded: int):
    assert js_round(value) == rounded


@pytest.mark.parametrize(
    ("value", "digits", "text"),
    [(1.25, 1, "1.3"), (0.03125, 4, "0.0313"), (1.005, 2, "1.00"), (0.0, 4, "0.0000"),
     (12.0, 1, "12.0"), (float("inf"), 1, "inf")],
)  # fmt: skip
def test_to_fixed(value: float, digits: int, text: str):
    assert to_fixed(value, digits) == text


def test_a_debrief_s_markdown_rounds_as_the_reference():
    """5 of 8 calls succeeded: "63% success" there, "62%" here; 1,250 ms "1.3s"."""
    debrief = AgentDebrief.model_validate(
        {
            "outcome": "success",
            "summary": "Did it.",
            "tools_used": [ToolUsage(name="calc", calls=8, success_rate=5 / 8)],
            "metrics": DebriefMetrics(tokens=10, duration_ms=1250, iterations=2, cost=0.03125),
        }
    )
    markdown = format_markdown(debrief)
    assert "8 call(s), 63% success" in markdown
    assert "- Duration: 1.3s" in markdown and "- Cost: $0.0313" in markdown
