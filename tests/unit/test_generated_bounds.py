"""Generated hostile input through the functions that keep what a run carries within Temporal's
limits (2 MB a payload, 2 KB a search attribute value): what they return is within the bounds
their docstrings name, whatever a model, a tool or a chat sent.

A payload past 2 MB is refused by the server: an activity's input or a continue-as-new input
over it fails the workflow task, and Temporal retries that forever. A run's payloads are held
under PAYLOAD_BUDGET_BYTES, which leaves room for what rides on the JSON.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from pydantic_core import to_json

from reactive_temporal import limits
from reactive_temporal.answered_turns import KEEP_BYTES, remember, turn_bytes
from reactive_temporal.contracts.debrief import SynthesisFields
from reactive_temporal.contracts.entity import AnsweredTurn, ChatMessage, ChatReply
from reactive_temporal.contracts.run import (
    FINAL_ANSWER_TOOL,
    AgentConfig,
    AgentRunInput,
    FinalAnswerCapture,
    ToolCall,
)
from reactive_temporal.memory import NOTES_MAX_CHARS, PRIOR_LESSONS, LessonNote, PriorRun, run_notes
from reactive_temporal.sanitize import clean_text, clean_value, clip, one_line
from reactive_temporal.session_window import (
    WINDOW_BYTES,
    WINDOW_MESSAGES,
    sessions_to_page_out,
    trim_window,
    window_bytes,
)
from tests.support.hostile import (
    PAYLOAD_BUDGET_BYTES,
    hostile_text,
    json_values,
    plain_text,
    storable_text,
)

SEARCH_ATTRIBUTE_MAX_BYTES = 2 * 1024
"""Temporal's limit on one keyword search attribute's value."""


def encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# -- text helpers -------------------------------------------------------------------------------


@given(hostile_text(max_repeat=50_000), st.integers(0, 70_000))
@example("x" * 100, 5)
@example("x" * 10**6, 30)
def test_clip_keeps_text_that_fits_and_cuts_the_rest_to_exactly_the_limit(text: str, limit: int):
    clipped = clip(text, limit)
    if len(text) <= limit:
        assert clipped is text
    else:
        assert len(clipped) == limit
        head = clipped.split("\n… [", 1)[0]  # all of it when no marker fits the limit
        assert text.startswith(head)


@given(hostile_text(max_repeat=5_000), st.integers(1, 500))
def test_one_line_is_one_line_within_its_limit(text: str, limit: int):
    line = one_line(text, limit)
    assert len(line) <= limit
    assert "\n" not in line and "\r" not in line


@given(hostile_text(), st.booleans())
def test_cleaned_text_is_storable_and_changed_only_where_it_had_to_be(text: str, nul: bool):
    cleaned = clean_text(text, nul=nul)
    assert encodable(cleaned) and len(cleaned) == len(text)
    assert not nul or "\x00" not in cleaned
    assert clean_text(cleaned, nul=nul) == cleaned
    assert all(a == b or b == "\ufffd" for a, b in zip(text, cleaned, strict=True))


@given(json_values, hostile_text(), json_values, st.booleans())
def test_cleaned_values_are_storable_and_keep_every_field(
    value: object, name: str, extra: object, nul: bool
):
    to_json(clean_value({"value": value}, nul=nul))  # every string encodes: no surrogate left
    call = ToolCall(id="c1", name=name, arguments=str(value), extra_content={"sig": extra})
    kept = clean_value([call], nul=nul)[0]
    to_json(kept)
    assert kept.extra_content is not None and set(kept.extra_content) == {"sig"}
    assert kept.extra_content == clean_value(call.extra_content, nul=nul)


# -- a model's reply, where it enters (the llm_step activity) ----------------------------------

call_names = st.sampled_from(["calculator", FINAL_ANSWER_TOOL]) | hostile_text(max_repeat=300)


@st.composite
def replies(draw: st.DrawFn) -> tuple[str | None, list[ToolCall]]:
    """A reply's text and calls: few or thousands, small or megabytes, names of any length."""
    content = draw(st.none() | hostile_text(max_repeat=400_000))
    made = st.builds(
        ToolCall,
        id=hostile_text(max_repeat=300),
        name=call_names,
        arguments=hostile_text(max_repeat=200_000),
        extra_content=st.none() | st.just({"thought_signature": "abc"}),
    )
    calls = draw(st.lists(made, max_size=20))
    if draw(st.booleans()):  # one call made again and again (9,000: the explicit example)
        calls += [draw(made)] * draw(st.integers(0, 500))
    return content, calls


@settings(suppress_health_check=[HealthCheck.too_slow])  # its replies are megabytes
@given(replies())
@example(("x", [ToolCall(id="c", name="n" * 200, arguments="{}")] * 9_000))
@example((None, [ToolCall(id="\ud800", name="calc", extra_content={"thought_signature": "s"})]))
def test_a_bounded_reply_fits_every_limit_and_keeps_what_runs(
    reply: tuple[str | None, list[ToolCall]],
):
    content, calls = reply
    bounded_content, bounded = limits.bound_reply(content, calls)
    assert (bounded_content is None) == (content is None)
    assert bounded_content is None or len(bounded_content) <= limits.REPLY_CONTENT_MAX_CHARS
    assert len(bounded) <= min(len(calls), limits.MAX_TOOL_CALLS_KEPT)
    dumped = to_json([bounded_content, [c.model_dump() for c in bounded]])
    assert len(dumped) <= limits.REPLY_MAX_BYTES
    total = 0
    for position, (call, given_call) in enumerate(zip(bounded, calls, strict=False)):
        assert len(call.name) <= limits.TOOL_CALL_NAME_MAX_CHARS
        assert len(call.id) <= limits.TOOL_CALL_NAME_MAX_CHARS
        assert call.extra_content == given_call.extra_content
        if position >= limits.MAX_TOOL_CALLS_PER_TURN or call.oversized is not None:
            assert call.arguments == "{}"
        else:
            assert len(call.arguments) <= limits.arguments_limit(call)
            total += len(call.arguments)
    assert total <= limits.TOOL_ARGUMENTS_TOTAL_MAX_CHARS


@given(
    plain_text,
    st.lists(
        st.builds(ToolCall, id=plain_text, name=plain_text, arguments=plain_text), max_size=16
    ),
)
def test_a_reply_within_the_limits_comes_back_unchanged(content: str, calls: list[ToolCall]):
    content, calls = clean_value(content), clean_value(calls)
    assert limits.bound_reply(content, calls) == (content, calls)


# -- a debrief's synthesis, a final answer ------------------------------------------------------


@given(
    st.dictionaries(
        st.sampled_from(
            [
                "summary",
                "caveats",
                "key_findings",
                "keyFindings",
                "errors_encountered",
                "lessons_learned",
            ]
        ),
        json_values
        | hostile_text(max_repeat=20_000)
        | st.lists(hostile_text(max_repeat=20_000), max_size=40),
    )
)
def test_a_bounded_synthesis_is_within_its_limits(answer: dict[str, object]):
    try:
        fields = SynthesisFields.model_validate(answer)
    except ValidationError:
        return  # refused where the activity reads it: no synthesis
    bounded = limits.bound_synthesis(fields)
    assert bounded is not None
    texts = [bounded.summary, bounded.caveats]
    lists = [bounded.key_findings, bounded.errors_encountered, bounded.lessons_learned]
    texts += [t for items in lists for t in items]
    present = [t for t in texts if t is not None]
    assert all(len(items) <= limits.SYNTHESIS_ITEMS_MAX for items in lists)
    assert all(len(t) <= limits.SYNTHESIS_TEXT_MAX_CHARS for t in present)
    assert sum(len(t) for t in present) <= limits.SYNTHESIS_TOTAL_MAX_CHARS
    assert all(encodable(t) and not any(c < " " and c not in "\t\n" for c in t) for t in present)


@given(
    st.builds(
        FinalAnswerCapture,
        output=hostile_text(),
        format=plain_text,
        summary=hostile_text(max_repeat=40_000),
        confidence=st.none() | hostile_text(max_repeat=40_000),
    )
)
def test_a_bounded_answer_keeps_its_output_and_clips_the_rest(answer: FinalAnswerCapture):
    bounded = limits.bound_answer(answer)
    assert bounded.output == answer.output and bounded.format == answer.format
    assert len(bounded.summary) <= limits.ANSWER_SUMMARY_MAX_CHARS
    assert (bounded.confidence is None) == (answer.confidence is None)
    assert bounded.confidence is None or len(bounded.confidence) <= limits.ANSWER_SUMMARY_MAX_CHARS


# -- records, windows, remembered turns ---------------------------------------------------------


@given(st.lists(hostile_text(max_repeat=3_000), max_size=30), st.integers(0, 60_000), st.booleans())
def test_within_bytes_keeps_the_latest_or_first_that_fit_and_no_more(
    items: list[str], max_bytes: int, latest: bool
):
    items = clean_value(items)
    kept = limits.within_bytes(items, max_bytes, latest=latest)
    assert sum(limits.json_bytes(i) for i in kept) <= max_bytes
    assert kept == (items[len(items) - len(kept) :] if latest else items[: len(kept)])
    if len(kept) < len(items):
        following = items[len(items) - len(kept) - 1] if latest else items[len(kept)]
        assert sum(limits.json_bytes(i) for i in kept) + limits.json_bytes(following) > max_bytes


chat_messages = st.builds(
    ChatMessage,
    role=st.sampled_from(["user", "assistant"]),
    content=storable_text(max_repeat=6_000),
    timestamp=st.just(datetime(2026, 1, 1, tzinfo=UTC)),
)


@given(st.lists(chat_messages, max_size=60))
def test_a_sessions_window_is_within_its_bounds(messages: list[ChatMessage]):
    window = trim_window(messages)
    assert len(window) <= WINDOW_MESSAGES and window_bytes(window) <= WINDOW_BYTES
    assert window == messages[len(messages) - len(window) :]


@given(
    st.dictionaries(plain_text, st.lists(chat_messages, max_size=5), max_size=8),
    st.integers(0, 200_000),
)
def test_paging_out_leaves_the_windows_within_the_budget(
    windows: dict[str, list[ChatMessage]], budget: int
):
    now = datetime(2026, 1, 1, tzinfo=UTC)
    active = {sid: now - timedelta(minutes=n) for n, sid in enumerate(windows)}
    out = sessions_to_page_out(windows, active, budget=budget)
    assert sum(window_bytes(w) for sid, w in windows.items() if sid not in out) <= budget


@given(st.lists(st.tuples(plain_text, storable_text(max_repeat=60_000)), max_size=40))
def test_remembered_replies_stay_within_their_bytes_but_the_newest(turns: list[tuple[str, str]]):
    now = datetime(2026, 1, 1, tzinfo=UTC)
    kept: list[AnsweredTurn] = []
    for update_id, message in turns:
        kept = remember(kept, update_id, ChatReply(message=message, routed_via="direct-llm"), now)
        assert kept[-1].update_id == update_id
        assert sum(turn_bytes(t) for t in kept[:-1]) <= KEEP_BYTES


# -- an agent's configuration, and the search attributes runs carry ----------------------------

names_lists = st.one_of(
    st.lists(hostile_text(max_repeat=150), max_size=5),
    st.tuples(hostile_text(max_repeat=150), st.integers(0, 3_000)).map(lambda t: [t[0]] * t[1]),
)


@st.composite
def agent_configs(draw: st.DrawFn) -> AgentConfig:
    """Agents as a builder, a CLI or a hand-made client may send them (the contract's own
    checks hold: it is a payload pydantic read)."""
    return AgentConfig.model_construct(
        **{
            **AgentConfig(agent_id="a", model="m").model_dump(),
            **draw(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "system_prompt": storable_text(max_repeat=150_000),
                        "debrief_model": storable_text(max_repeat=10_000),
                        "tools": names_lists.map(lambda names: [clean_text(n) for n in names]),
                        "required_tools": names_lists.map(
                            lambda names: [clean_text(n) for n in names]
                        ),
                        "approve_tools": names_lists.map(
                            lambda names: [clean_text(n) for n in names]
                        ),
                    },
                )
            ),
        }
    )


@settings(suppress_health_check=[HealthCheck.too_slow])  # its agents are megabytes
@given(agent_configs(), storable_text(max_repeat=110_000))
def test_an_accepted_agent_and_task_make_a_run_input_within_a_payload(
    agent: AgentConfig, task: str
):
    if limits.agent_config_problem(agent) is not None:
        return
    try:
        run = AgentRunInput(task=task, agent=agent)
    except ValidationError:
        return  # refused where the run is started
    assert len(to_json(run)) <= PAYLOAD_BUDGET_BYTES


@given(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.:-]*", fullmatch=True) | hostile_text(max_repeat=300))
def test_an_agent_name_the_contract_accepts_fits_a_search_attribute(agent_id: str):
    try:
        agent = AgentConfig(agent_id=agent_id, model="m")
    except ValidationError:
        return
    # the run (AgentName), its debrief and a chat's tool-path run set it as a keyword attribute
    assert len(agent.agent_id.encode("utf-8")) <= SEARCH_ATTRIBUTE_MAX_BYTES


# -- what a run is told of earlier runs (the run_seed activity) ---------------------------------

LESSON_AT = datetime(2026, 7, 1, tzinfo=UTC)
run_ids = st.from_regex(r"run-[a-z0-9-]{1,60}", fullmatch=True)


@given(
    st.none()
    | st.builds(
        PriorRun,
        run_id=run_ids,
        outcome=st.sampled_from(["success", "partial", "failed"]),
        summary=hostile_text(max_repeat=3_000),
        age_hours=st.floats(0, 72),
        errors=st.lists(hostile_text(max_repeat=500), max_size=9),
    ),
    st.lists(
        st.builds(
            LessonNote,
            text=hostile_text(max_repeat=500),
            run_id=run_ids,
            created_at=st.just(LESSON_AT),
        ),
        max_size=PRIOR_LESSONS,
    ),
)
@example(
    PriorRun("run-0", "success", "a\n" * 300, 1.0, ["e\n" * 100] * 5),
    [LessonNote("l\n" * 150, "run-1", LESSON_AT)] * 5,
)
def test_a_runs_notes_are_within_their_budget_as_the_model_reads_them(
    prior: PriorRun | None, lessons: list[LessonNote]
):
    notes = run_notes(prior, lessons)
    if notes is None:
        assert prior is None and not lessons
        return
    assert len(notes) <= NOTES_MAX_CHARS
    body = notes.split("<notes>\n", 1)[1].rsplit("\n</notes>", 1)[0]
    assert all(line.startswith(">") for line in body.split("\n"))
