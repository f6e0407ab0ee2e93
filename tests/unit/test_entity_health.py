"""What `starter.py check` says of agents whose chat is stuck: who, why, and the way out, in
one line; and the visibility query that finds them (reactive_temporal/api/entity_health.py)."""

from __future__ import annotations

import pytest

from reactive_temporal.api.entity_health import StuckEntity, stuck_line, stuck_query


def test_the_check_names_the_stuck_agents_and_the_way_out():
    stuck = [
        StuckEntity(f"a{n}", f"agent-a{n}", "PayloadsTooLarge" if n else None) for n in range(12)
    ]
    line = stuck_line(stuck, "q")
    assert line.startswith(
        "12 agents' chat on 'q' is stuck, their chat workflow's task failing on every try: "
        "a0, a1 (PayloadsTooLarge), a2 (PayloadsTooLarge)"
    )
    assert "a9 (PayloadsTooLarge) and 2 more." in line
    assert line.endswith("`python starter.py agent reset NAME`")
    assert "TaskQueue = 'q' AND TemporalReportedProblems IN" in stuck_query("q")
    with pytest.raises(ValueError, match="may not contain quotes"):
        stuck_query("it's")
