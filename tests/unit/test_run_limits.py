"""The run's limits as pure rules: tool calls per turn, argument size, answer size, and
when a run continues as new."""

from __future__ import annotations

import json

from pydantic_core import to_json

from reactive_temporal.contracts.run import ToolCall
from reactive_temporal.limits import (
    ANSWER_MAX_CHARS,
    MAX_TOOL_CALLS_KEPT,
    MAX_TOOL_CALLS_PER_TURN,
    REPLY_CONTENT_MAX_CHARS,
    REPLY_MAX_BYTES,
    TOOL_ARGUMENTS_MAX_CHARS,
    TOOL_CALL_NAME_MAX_CHARS,
    bound_reply,
)
from workflows.run_limits import (
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
    assert "the limit is 100,000" in (answer_too_long("x" * (ANSWER_MAX_CHARS + 1)) or "")


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


def test_a_reply_within_the_limits_is_unchanged():
    content, bounded = bound_reply("hello", calls(3))
    assert (content, bounded) == ("hello", calls(3))


def test_a_reply_is_bounded_where_it_enters():
    huge = ToolCall(id="h", name="file_write", arguments=json.dumps({"content": "x" * 70_000}))
    answer = ToolCall(id="f", name="final-answer", arguments=json.dumps({"output": "y" * 90_000}))
    content, bounded = bound_reply("z" * 1_000_000, [huge, answer, *calls(20)])
    assert content is not None and len(content) == REPLY_CONTENT_MAX_CHARS
    assert "characters cut" in content and content.endswith("z")
    assert bounded[0].oversized == len(huge.arguments) and bounded[0].arguments == "{}"
    assert bounded[1] == answer  # a final answer may be longer than a tool's arguments
    assert all(c.oversized is None for c in bounded[2:])
    assert [c.arguments for c in bounded[MAX_TOOL_CALLS_PER_TURN:]] == ["{}"] * 6
    note = oversized_arguments_observation(bounded[0])
    assert note is not None and "70,015 characters" in note


def test_names_and_ids_no_tool_could_have_are_clipped_where_they_enter():
    long = ToolCall(id="i" * 60_000 + "z", name="n" * 90_000 + "x", arguments="{}")
    longest_wire_name = ToolCall(id="call_" + "a" * 40, name="w" * 64, arguments="{}")
    _, [clipped, kept] = bound_reply(None, [long, longest_wire_name])
    assert kept == longest_wire_name
    assert len(clipped.name) == len(clipped.id) == TOOL_CALL_NAME_MAX_CHARS
    assert clipped.name.startswith("nnn") and clipped.name.endswith("x")
    assert "characters cut" in clipped.name and clipped.id.endswith("z")


def test_the_reply_fits_its_byte_budget_whatever_its_characters():
    worst = "\x01" * 60_000  # each is six bytes of JSON
    many = [ToolCall(id=f"c{i}", name="t", arguments=worst) for i in range(5)]
    content, bounded = bound_reply(worst, many)
    assert len(to_json([content, [c.model_dump() for c in bounded]])) <= REPLY_MAX_BYTES
    assert any(c.oversized for c in bounded)


def test_the_state_a_long_run_carries_stays_small():
    from reactive_temporal.contracts.debrief import ToolCallRecord
    from workflows.run_state import RunState

    state = RunState(iteration=5_000)
    state.tool_calls = [
        ToolCallRecord(
            name=f"tool{i % 7}", success=i % 3 != 0, duration_ms=10 + i % 5, iteration=i,
            error=None if i % 3 else f"[Tool error: tool{i % 7} failed: {'e' * 980} {i % 40}]",
        )
        for i in range(10_000)
    ]  # fmt: skip
    carried = state.compacted()
    assert len(to_json(carried.model_dump(mode="json"))) < 250_000
    stats = {s.name: s for s in carried.earlier_tool_stats}
    recent_calls = sum(1 for r in carried.tool_calls if r.name == "tool0")
    assert stats["tool0"].calls + recent_calls == sum(1 for i in range(10_000) if i % 7 == 0)
    assert len(carried.earlier_errors) <= 50 and carried.iteration == 5_000
    again = carried.compacted()  # a second continue-as-new folds into the same stats
    assert sum(s.calls for s in again.earlier_tool_stats) + len(again.tool_calls) == 10_000


def test_a_store_outage_is_told_from_an_llm_failure():
    from temporalio.exceptions import ActivityError, ApplicationError, RetryState

    from workflows.run_limits import is_store_outage

    def failed(kind: str) -> ActivityError:
        err = ActivityError(
            "activity error", scheduled_event_id=1, started_event_id=2, identity="w",
            activity_type="llm_step", activity_id="1",
            retry_state=RetryState.MAXIMUM_ATTEMPTS_REACHED,
        )  # fmt: skip
        err.__cause__ = ApplicationError("cause", type=kind)
        return err

    assert is_store_outage(failed("StoreUnavailable"))
    assert not is_store_outage(failed("LlmRequestRejected"))
    assert not is_store_outage(RuntimeError("plain"))


def test_a_new_made_up_tool_name_on_every_call_keeps_the_carried_state_small():
    """A model naming a new tool each call (16 a turn, 500 turns between two continue-as-
    news): the stats name the first tools and count the rest together, so neither the state
    a run carries nor its debrief's input grows with the names."""
    from reactive_temporal.contracts.debrief import ToolCallRecord
    from workflows.debrief_rules import MAX_TOOL_STATS, OTHER_TOOLS, merge_tool_stats, tool_stats
    from workflows.run_state import RunState

    def made_up(period: int) -> list[ToolCallRecord]:
        return [
            ToolCallRecord(name=f"p{period}-t{i}-" + "n" * 110, success=False, duration_ms=2,
                           iteration=i // 16, error=f"[Tool error: unknown tool 't{i}']")
            for i in range(8_000)
        ]  # fmt: skip

    state = RunState(iteration=500)
    state.tool_calls = [*made_up(0), ToolCallRecord(name="calculator", success=True,
                                                    duration_ms=4, iteration=0)]  # fmt: skip
    for period in range(1, 4):  # each continue-as-new folds another 8,000 names in
        state = state.compacted()
        state.tool_calls = [*state.tool_calls, *made_up(period)]
    carried = state.compacted()
    assert len(to_json(carried.model_dump(mode="json"))) < 100_000
    stats = carried.earlier_tool_stats
    assert len(stats) == MAX_TOOL_STATS and stats[-1].name == OTHER_TOOLS
    assert sum(s.calls for s in stats) + len(carried.tool_calls) == 4 * 8_000 + 1
    assert sum(s.errors for s in stats) + sum(not r.success for r in carried.tool_calls) == 32_000
    debrief_stats = merge_tool_stats(stats, tool_stats(carried.tool_calls))
    assert len(debrief_stats) == MAX_TOOL_STATS
    few = merge_tool_stats(tool_stats(carried.tool_calls[:3]))
    assert OTHER_TOOLS not in [s.name for s in few]  # under the cap: every tool by name


def test_a_reply_of_thousands_of_calls_is_bounded_at_once():
    """9,000 calls with ids as long as they may be: bounding the reply never ended (the
    worker's event loop spun on it, and every retry asked the model for the same reply)."""
    many = [ToolCall(id=f"{i:0128d}", name="n" * 128, arguments="{}") for i in range(9_000)]
    content, bounded = bound_reply("", many)
    assert len(bounded) == MAX_TOOL_CALLS_KEPT and bounded[0] == many[0]
    assert len(to_json([content, [c.model_dump() for c in bounded]])) <= REPLY_MAX_BYTES
    run, refused = admitted_tool_calls(bounded)
    assert len(run) == MAX_TOOL_CALLS_PER_TURN and len(refused) == len(bounded) - len(run)
