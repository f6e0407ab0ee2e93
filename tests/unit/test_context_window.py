"""Compaction keeps a run's request inside the window; the transcript itself is never cut."""

from __future__ import annotations

import json
import random

import pytest

from reactive_temporal.context_window import (
    HEADROOM,
    LEFT_OUT,
    LOW_COUNT_FROM,
    SHORTENED,
    STUB,
    ContextPlan,
    PreviousCall,
    build_view,
    compact_message,
    count_implausibly_low,
    estimate_prompt,
    estimate_tokens,
    message_tokens,
    plan_compaction,
    prompt_budget,
    reserved_output,
    sent_thinking,
    split_turns,
    view_tokens,
)
from reactive_temporal.contracts.run import Message, SeqMessage, ToolCall

SYSTEM = "You are a careful agent. " * 20
TASK = "Fetch the 40 pages and report what they say."


def _run(
    turns: int, observation_chars: int = 6_000, *, args: str = '{"page": 1}'
) -> list[SeqMessage]:
    """A transcript: system prompt, task, then `turns` tool calls each answered by a big result."""
    seq = 0
    out: list[SeqMessage] = []

    def add(message: Message) -> None:
        nonlocal seq
        out.append(SeqMessage(seq=seq, message=message))
        seq += 1

    add(Message(role="system", content=SYSTEM))
    add(Message(role="user", content=TASK))
    for i in range(turns):
        call = ToolCall(id=f"call_{i}", name="http_get", arguments=args)
        add(Message(role="assistant", content=f"Fetching page {i}.", tool_calls=[call]))
        body = f"page {i}: " + "".join(chr(97 + (i + k) % 26) for k in range(observation_chars))
        add(Message(role="tool", content=body, tool_call_id=call.id, name="http_get"))
    return out


def _assert_well_formed(view: list[SeqMessage]) -> None:
    """Every tool result answers a call shown before it, every call shown gets its result."""
    open_calls: set[str] = set()
    for entry in view:
        m = entry.message
        if m.role == "assistant":
            assert not open_calls, f"calls {open_calls} left unanswered before seq {entry.seq}"
            open_calls = {c.id for c in m.tool_calls}
        elif m.role == "tool":
            assert m.tool_call_id in open_calls, f"orphan tool result at seq {entry.seq}"
            open_calls.discard(m.tool_call_id)
        for c in m.tool_calls:
            json.loads(c.arguments)  # arguments stay JSON, compacted or not
    assert [e.seq for e in view] == sorted(e.seq for e in view)


def test_estimates_are_pessimistic_and_count_calls() -> None:
    assert estimate_tokens("") == 0 and estimate_tokens(None) == 0
    assert estimate_tokens("x" * 300) == 100  # 3 characters a token
    with_call = Message(role="assistant", tool_calls=[ToolCall(id="c", name="f", arguments="{}")])
    assert message_tokens(with_call) > message_tokens(Message(role="assistant"))


def test_the_output_reservation_is_the_wish_capped_at_a_quarter_of_the_window() -> None:
    assert reserved_output(8_192, 1_024) == 1_024
    assert reserved_output(8_192, 4_096) == 2_048
    assert reserved_output(8_192, None) == 2_048
    assert prompt_budget(8_192, 1_024) == 7_168


def test_turns_start_at_each_model_reply() -> None:
    head, turns = split_turns(_run(3))
    assert [e.seq for e in head] == [0, 1]
    assert [[e.seq for e in t] for t in turns] == [[2, 3], [4, 5], [6, 7]]


def test_a_run_that_fits_is_sent_verbatim() -> None:
    transcript = _run(3, 500)
    plan = plan_compaction(transcript, budget=100_000)
    assert plan == ContextPlan()
    assert [e.message for e in build_view(transcript, plan)] == [e.message for e in transcript]


def test_forty_six_kb_observations_fit_an_8k_window_with_head_and_latest_turns_verbatim() -> None:
    transcript = _run(40)
    budget = prompt_budget(8_192, reserved_output(8_192, 1_024))
    tools = 300
    assert view_tokens(transcript, tools) > 10 * budget  # far too long as it is
    plan = plan_compaction(transcript, budget=budget, tools=tools)
    view = build_view(transcript, plan)
    assert view_tokens(view, tools) <= budget * HEADROOM
    _assert_well_formed(view)
    by_seq = {e.seq: e.message for e in view}
    # the system prompt, the task and the two latest turns go verbatim
    for entry in transcript[:2] + transcript[-4:]:
        assert by_seq[entry.seq] == entry.message
    # the oldest turns give way first: left out, with one note standing in for them
    assert plan.levels[2] == LEFT_OUT
    note = by_seq[2]
    assert note.role == "user" and "left out" in (note.content or "")
    assert "http_get ×" in (note.content or "")
    # the transcript itself is untouched
    assert all(len(e.message.content or "") > 6_000 for e in transcript[3::2])


def test_compaction_shortens_before_it_stubs_before_it_leaves_out() -> None:
    transcript = _run(12, 3_000)
    full = view_tokens(transcript)
    mild = plan_compaction(transcript, budget=int(full * 0.9 / HEADROOM))
    assert set(mild.levels.values()) == {SHORTENED}
    assert min(mild.levels) == 3  # the oldest tool result first
    strong = plan_compaction(transcript, budget=int(full * 0.3 / HEADROOM))
    assert STUB in strong.levels.values() and LEFT_OUT not in strong.levels.values()
    shortened = compact_message(transcript[3].message, SHORTENED).content or ""
    assert shortened.startswith(transcript[3].message.content[:900])  # type: ignore[index]
    assert shortened.endswith(transcript[3].message.content[-300:])  # type: ignore[index]
    assert "characters left out here to fit the context window" in shortened


def test_plans_never_undo_earlier_compaction() -> None:
    transcript = _run(20, 4_000)
    first = plan_compaction(transcript[:20], budget=3_000)
    later = plan_compaction(transcript, budget=1_000_000, previous=first)
    assert all(later.levels[seq] >= level for seq, level in first.levels.items())


def test_harder_keeps_only_the_latest_turn_and_may_shorten_its_results() -> None:
    transcript = _run(4, 9_000)
    normal = plan_compaction(transcript, budget=4_000)
    assert not any(e.seq in normal.levels for e in transcript[-4:])
    harder = plan_compaction(transcript, budget=4_000, harder=True, previous=normal)
    assert transcript[-3].seq in harder.levels  # the turn before the latest gives way
    assert transcript[-1].seq in harder.levels  # even the latest result is shortened
    assert transcript[-2].seq not in harder.levels  # the model's latest call stays whole
    _assert_well_formed(build_view(transcript, harder))


def test_huge_tool_call_arguments_are_compacted_to_valid_json() -> None:
    transcript = _run(6, 100, args=json.dumps({"path": "a.txt", "content": "x" * 50_000}))
    plan = plan_compaction(transcript, budget=60_000)
    view = build_view(transcript, plan)
    _assert_well_formed(view)
    assert view_tokens(view) <= 60_000 * HEADROOM
    size = len(transcript[2].message.tool_calls[0].arguments)
    assert json.loads(view[2].message.tool_calls[0].arguments) == {
        "compacted": f"{size:,} characters of arguments left out"
    }


def test_a_head_too_big_for_the_window_is_left_for_the_caller_to_report() -> None:
    transcript = _run(2, 100)
    transcript[1] = SeqMessage(seq=1, message=Message(role="user", content="t" * 90_000))
    plan = plan_compaction(transcript, budget=8_000)
    view = build_view(transcript, plan)
    assert view[1].message.content == "t" * 90_000  # the task is never cut
    assert view_tokens(view) > 8_000


def test_the_estimate_uses_the_providers_count_for_the_previous_call() -> None:
    transcript = _run(5, 1_000)
    plan = ContextPlan()
    previous = PreviousCall(seq=8, prompt_tokens=1_234, plan=plan, tools_tokens=100)
    added = sum(message_tokens(e.message) for e in transcript if e.seq >= 8)
    assert estimate_prompt(transcript, 100, plan, previous) == 1_234 + added
    assert estimate_prompt(transcript, 150, plan, previous) == 1_234 + added + 50
    # after a compaction the provider's count no longer describes the view: estimate it all
    other = ContextPlan(levels={3: SHORTENED})
    view = build_view(transcript, other)
    assert estimate_prompt(view, 100, other, previous) == view_tokens(view, 100)
    assert estimate_prompt(transcript, 100, plan, None) == view_tokens(transcript, 100)


def test_thinking_sent_back_weighs_in_the_estimate_and_gives_way_with_its_turn() -> None:
    """DeepSeek's and Kimi's thinking modes get each turn back with its thinking: 20 turns of
    6,000 characters each are as much again as their answers, calls and results. Uncounted,
    a request the plan deemed to fit was refused as too long; a turn compacted sends none."""
    transcript = _run(20, 600)
    thinking = {e.seq: 2_000 for e in transcript if e.message.role == "assistant"}
    plan = ContextPlan()
    bare = estimate_prompt(transcript, 100, plan, None)
    assert estimate_prompt(transcript, 100, plan, None, thinking) == bare + 20 * 2_000
    previous = PreviousCall(seq=40, prompt_tokens=50_000, plan=plan, tools_tokens=100)
    last = sum(message_tokens(e.message) for e in transcript if e.seq >= 40)
    assert estimate_prompt(transcript, 100, plan, previous, thinking) == 50_000 + last + 2_000

    budget = bare * 2
    assert plan_compaction(transcript, budget=budget, tools=100) == ContextPlan()  # fits without
    compacted = plan_compaction(transcript, budget=budget, tools=100, thinking=thinking)
    assert compacted.compacted
    view = build_view(transcript, compacted)
    sent = sent_thinking(thinking, compacted)
    assert not set(sent) & set(compacted.levels)
    assert view_tokens(view, 100, sent) <= budget * HEADROOM
    _assert_well_formed(view)


def test_a_count_far_below_the_estimate_of_a_long_request_is_implausible() -> None:
    # Ollama's default 4,096 for a request estimated at 12k: cut; a cached-only count: cut
    assert count_implausibly_low(4_096, 12_000)
    assert count_implausibly_low(37, 12_000)
    assert count_implausibly_low(0, 12_000)
    # honest counts: English at 4 characters a token (75% of the estimate), prose with
    # whitespace runs at half of it
    assert not count_implausibly_low(9_000, 12_000)
    assert not count_implausibly_low(6_000, 12_000)
    assert not count_implausibly_low(4_800, 12_000)  # the boundary: 40% is taken
    # short requests are never judged: no default window cuts them, framing moves the share
    assert not count_implausibly_low(10, LOW_COUNT_FROM)
    assert count_implausibly_low(10, LOW_COUNT_FROM + 1)


def test_the_estimate_does_not_trust_a_count_too_low_for_the_previous_request() -> None:
    """Ollama cut the previous request to its window (or counted only what it had not
    cached): that count plus what was added since kept the run from ever compacting."""
    transcript = _run(8, 6_000)  # ~16k tokens before the last turn
    plan = ContextPlan()
    seq = transcript[-2].seq  # the previous call's reply: it saw every message before it
    whole = view_tokens(transcript, 100)
    before = view_tokens([e for e in transcript if e.seq < seq], 100)
    added = whole - before
    cut = PreviousCall(seq=seq, prompt_tokens=4_096, plan=plan, tools_tokens=100)
    assert estimate_prompt(transcript, 100, plan, cut) == whole
    cached_only = PreviousCall(seq=seq, prompt_tokens=12, plan=plan, tools_tokens=100)
    assert estimate_prompt(transcript, 100, plan, cached_only) == whole
    # an honest count (English-like, 75% of the estimate) is still taken as it is
    honest = PreviousCall(seq=seq, prompt_tokens=before * 3 // 4, plan=plan, tools_tokens=100)
    assert estimate_prompt(transcript, 100, plan, honest) == before * 3 // 4 + added


@pytest.mark.parametrize("seed", range(25))
def test_any_run_compacts_to_a_well_formed_view_within_budget(seed: int) -> None:
    rng = random.Random(seed)
    transcript = _run(rng.randint(3, 60), rng.randint(50, 12_000))
    budget = rng.choice([6_000, 12_000, 30_000])
    plan = plan_compaction(transcript, budget=budget, tools=rng.randint(0, 500))
    view = build_view(transcript, plan)
    _assert_well_formed(view)
    latest = transcript[-2:]
    by_seq = {e.seq: e.message for e in view}
    assert all(by_seq[e.seq] == e.message for e in latest)
    if view_tokens(transcript[:2] + transcript[-4:]) + 500 < budget * HEADROOM - 200:
        assert view_tokens(view) <= budget * HEADROOM + 500


def test_fit_text_keeps_the_beginning_and_the_end() -> None:
    from reactive_temporal.context_window import fit_text

    assert fit_text("short", 100) == "short"
    text = "B" * 5_000 + "M" * 10_000 + "E" * 5_000
    fitted = fit_text(text, 6_000)
    assert len(fitted) <= 6_000
    assert fitted.startswith("B" * 3_000) and fitted.endswith("E" * 1_500)
    assert "characters left out here" in fitted
