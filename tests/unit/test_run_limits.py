"""The run's limits as pure rules: tool calls per turn, argument size, answer size, and
when a run continues as new."""

from __future__ import annotations

from reactive_temporal.contracts.run import ToolCall
from workflows.run_limits import (
    ANSWER_MAX_CHARS,
    MAX_TOOL_CALLS_PER_TURN,
    TOOL_ARGUMENTS_MAX_CHARS,
    admitted_tool_calls,
    answer_too_long,
    oversized_arguments_observation,
    should_continue_as_new,
    too_many_calls_observation,
)


def calls(n: int) -> list[ToolCall]:
    return [ToolCall(id=f"c{i}", name="calculator", arguments="{}") for i in range(n)]


def test_the_first_calls_of_a_turn_run_and_the_rest_are_refused():
    run, refused = admitted_tool_calls(calls(40))
    assert [c.id for c in run] == [f"c{i}" for i in range(MAX_TOOL_CALLS_PER_TURN)]
    assert len(refused) == 40 - MAX_TOOL_CALLS_PER_TURN
    assert admitted_tool_calls(calls(3)) == (calls(3), [])
    note = too_many_calls_observation(refused[0], 40, MAX_TOOL_CALLS_PER_TURN)
    assert note.startswith("[Tool error: calculator was not run") and "40 tool calls" in note


def test_oversized_arguments_are_refused_by_size():
    fits = ToolCall(id="a", name="file_write", arguments="x" * TOOL_ARGUMENTS_MAX_CHARS)
    big = ToolCall(id="b", name="file_write", arguments="x" * (TOOL_ARGUMENTS_MAX_CHARS + 1))
    assert oversized_arguments_observation(fits) is None
    note = oversized_arguments_observation(big)
    assert note is not None and note.startswith("[Tool error: file_write was not run")


def test_answers_past_the_limit_are_refused():
    assert answer_too_long("x" * ANSWER_MAX_CHARS) is None
    assert "the limit is 200,000" in (answer_too_long("x" * (ANSWER_MAX_CHARS + 1)) or "")


def test_a_run_continues_as_new_when_suggested_or_at_its_own_threshold():
    def go(
        suggested: bool = False, iterations: int = 3, every: int | None = None, ended: bool = False
    ) -> bool:
        return should_continue_as_new(
            suggested=suggested, iterations_this_run=iterations, every=every, ended=ended
        )

    assert not go()
    assert go(suggested=True)
    assert go(every=3)
    assert not go(every=4)
    assert not go(suggested=True, ended=True)
    assert not go(suggested=True, iterations=0)
