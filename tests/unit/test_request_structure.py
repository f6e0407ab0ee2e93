"""A request's structure as providers check it: the scripted endpoint's rules answer their
real 400s, and what runs and direct chat turns send passes them (pure, in milliseconds)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from activities.chat import direct_messages
from activities.request_messages import for_strict_templates, merged_turns, request_messages
from reactive_temporal.context_window import LEFT_OUT, STUB, ContextPlan, build_view
from reactive_temporal.contracts.entity import ChatMessage
from reactive_temporal.contracts.run import Message, SeqMessage, ToolCall
from reactive_temporal.embedded.endpoint_rules import Endpoint
from reactive_temporal.embedded.message_rules import ALTERNATE, NINE_CHAR_IDS

PAIRS = Endpoint(pairs_tool_calls=True)
TEMPLATE = Endpoint(alternating_roles=True, last_user_or_tool=True)
MISTRAL = Endpoint(
    alternating_roles=True,
    last_user_or_tool=True,
    role_order=True,
    nine_char_call_ids=True,
    pairs_tool_calls=True,
    unique_call_ids=True,
)
"""Mistral's rules: its API's and mistral-common's, and its templates' under vLLM."""


def asks(*ids: str) -> dict[str, Any]:
    calls = [
        {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def answers(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "content": "ok", "tool_call_id": call_id}


def text(role: str, content: str = "hi") -> dict[str, Any]:
    return {"role": role, "content": content}


def refusal(endpoint: Endpoint, messages: list[dict[str, Any]]) -> str | None:
    refused = endpoint.check({"model": "m", "messages": messages})
    if refused is None:
        return None
    assert refused.status == 400 and isinstance(refused.body, dict)
    error = refused.body["error"] if "error" in refused.body else refused.body
    return str(error["message"])


HEAD = [text("system", "You help."), text("user", "task")]


def test_calls_answered_right_after_them_are_taken() -> None:
    messages = [*HEAD, asks("a", "b"), answers("b"), answers("a"), text("user", "go on")]
    assert refusal(PAIRS, messages) is None


@pytest.mark.parametrize(
    ("messages", "said"),
    [
        pytest.param(
            [*HEAD, asks("a", "b"), answers("a"), text("user", "go on")],
            "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. The following tool_call_ids did not have "
            "response messages: b",
            id="a-call-without-its-result",
        ),
        pytest.param(
            [*HEAD, asks("a", "b"), answers("a"), text("user", "steer"), answers("b")],
            "The following tool_call_ids did not have response messages: b",
            id="a-user-message-between-the-results",
        ),
        pytest.param(
            [*HEAD, asks("a")],
            "The following tool_call_ids did not have response messages: a",
            id="ends-with-the-calls",
        ),
        pytest.param(
            [*HEAD, answers("a")],
            "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
            "message with 'tool_calls'.",
            id="a-result-with-no-call",
        ),
        pytest.param(
            [*HEAD, asks("a"), answers("a"), text("user", "go on"), answers("a")],
            "must be a response to a preceeding message with 'tool_calls'",
            id="a-result-after-another-message",
        ),
        pytest.param(
            [*HEAD, asks("c" * 41), answers("c" * 41)],
            "Invalid 'messages[2].tool_calls[0].id': string too long. Expected a string with "
            "maximum length 40, but got a string with length 41 instead.",
            id="an-id-past-40-characters",
        ),
    ],
)
def test_openai_refuses_calls_and_results_that_do_not_pair(
    messages: list[dict[str, Any]], said: str
) -> None:
    assert said in (refusal(PAIRS, messages) or "")


@pytest.mark.parametrize(
    ("messages", "said"),
    [
        pytest.param(
            [*HEAD, text("user", "notes")],
            "After the optional system message, conversation roles must alternate",
            id="two-user-turns",
        ),
        pytest.param(
            [text("system"), text("assistant"), text("user")],
            "After the optional system message, conversation roles must alternate",
            id="the-model-first",
        ),
        pytest.param(
            [*HEAD, text("assistant"), text("system"), text("user")],
            "with the exception of an initial optional system message",
            id="a-later-system-message",
        ),
        pytest.param(
            [*HEAD, text("assistant")],
            "Expected last role User or Tool (or Assistant with prefix True) for serving but "
            "got assistant",
            id="ends-with-the-model",
        ),
    ],
)
def test_strict_templates_refuse_turns_that_do_not_alternate(
    messages: list[dict[str, Any]], said: str
) -> None:
    assert said in (refusal(TEMPLATE, messages) or "")


def test_a_run_s_task_and_notes_go_as_one_user_turn() -> None:
    """A run's seed is the task, then the agent's notes: two user messages in a row."""
    call = ToolCall(id="a", name="calculator", arguments="{}")
    transcript = [
        Message(role="system", content="You help."),
        Message(role="user", content="task"),
        Message(role="user", content="notes"),
        Message(role="assistant", content=None, tool_calls=[call]),
        Message(role="tool", content="4", tool_call_id="a", name="calculator"),
    ]
    sent = request_messages(transcript)
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
    assert sent[1] == {"role": "user", "content": "task\n\nnotes"}
    assert refusal(TEMPLATE, sent) is None and refusal(PAIRS, sent) is None
    assert transcript[1].content == "task"  # the transcript is the record: untouched


def _long_run(turns: int) -> list[SeqMessage]:
    messages = [
        Message(role="system", content="You read pages."),
        Message(role="user", content="Read them."),
        Message(role="user", content="Notes from your earlier runs."),
    ]
    for i in range(turns):
        calls = [ToolCall(id=f"c{i}-{j}", name="fetch_page", arguments="{}") for j in range(2)]
        messages.append(Message(role="assistant", content=f"Page {i}.", tool_calls=calls))
        messages += [
            Message(role="tool", content="x" * 3_000, tool_call_id=c.id, name=c.name) for c in calls
        ]
        if i % 3 == 0:
            messages.append(Message(role="user", content="Go on."))
    return [SeqMessage(seq=i, message=m) for i, m in enumerate(messages)]


@pytest.mark.parametrize("left_out", [range(0), range(0, 3), range(2, 6), range(0, 9)])
def test_a_compacted_view_sends_whole_pairs(left_out: range) -> None:
    """Turns left out go whole (the reply and its results), whichever they are, and a plan
    made for another transcript (a rerun) still pairs each call it shows."""
    transcript = _long_run(10)
    replies = [e.seq for e in transcript if e.message.role == "assistant"]
    levels = {replies[i]: LEFT_OUT for i in left_out}
    levels |= {e.seq: STUB for e in transcript if e.message.role == "tool" and e.seq % 2}
    levels[replies[-1] + 1] = LEFT_OUT  # a result's own level never leaves it out alone
    sent = request_messages(e.message for e in build_view(transcript, ContextPlan(levels=levels)))
    assert refusal(PAIRS, sent) is None
    assert refusal(Endpoint(last_user_or_tool=True), sent) is None
    shaped = for_strict_templates(sent, strict_roles=True, nine_char_call_ids=True)
    assert refusal(MISTRAL, shaped) is None


def _chat(*roles: str) -> list[ChatMessage]:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return [ChatMessage(role=r, content=f"{r} {i}", timestamp=now) for i, r in enumerate(roles)]  # type: ignore[arg-type]


@pytest.mark.parametrize("notes", [None, "Notes from your earlier runs"])
@pytest.mark.parametrize(
    "history",
    [
        _chat(),
        _chat("user", "assistant"),
        _chat("assistant", "user", "assistant"),  # the window cut a turn in two
        _chat("assistant"),
        _chat("user", "assistant", "user", "assistant"),
    ],
)
def test_a_direct_turn_sends_whole_turns(notes: str | None, history: list[ChatMessage]) -> None:
    sent = direct_messages("You are Ada.", notes, history, "What now?")
    assert sent[0] == {"role": "system", "content": "You are Ada."}
    assert refusal(TEMPLATE, sent) is None
    assert sent[-1]["content"].endswith("What now?")
    if notes:
        assert sent[1]["content"].startswith(notes)
    kept = [m.content for m in history[1:]] if history and history[0].role == "assistant" else []
    assert all(any(k in m["content"] for m in sent) for k in kept)


def test_merged_turns_leaves_calls_and_results_as_they_are() -> None:
    messages = [text("user", "a"), text("user", "b"), asks("x"), answers("x"), text("user", "c")]
    assert merged_turns(messages) == [
        text("user", "a\n\nb"),
        asks("x"),
        answers("x"),
        text("user", "c"),
    ]


def test_a_repeated_long_call_id_goes_renamed_within_40_characters() -> None:
    """A model that repeats a 40-character id (as some local servers make them): its second
    call went as `<id>-2`, 42 characters, which OpenAI refuses ("string too long")."""
    long_id = "chatcmpl-tool-" + "a" * 26
    assert len(long_id) == 40
    calls = [ToolCall(id=long_id, name="calculator", arguments="{}")]
    transcript = [
        Message(role="system", content="You help."),
        Message(role="user", content="task"),
        *[
            m
            for _ in range(3)
            for m in (
                Message(role="assistant", content=None, tool_calls=calls),
                Message(role="tool", content="4", tool_call_id=long_id),
            )
        ],
    ]
    sent = request_messages(transcript)
    ids = [c["id"] for m in sent for c in m.get("tool_calls", ())]
    assert len(set(ids)) == 3 and all(len(i) <= 40 for i in ids), ids
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == ids
    assert refusal(PAIRS, sent) is None


def _nudged_run() -> list[Message]:
    """A run as Mistral's models make it: nine-character ids, one given twice, and a reply
    with a call and `FINAL ANSWER:` before a required tool ran (nudged after its result)."""
    ask = [ToolCall(id="abcdefghi", name="lookup", arguments="{}")]
    again = [ToolCall(id="abcdefghi", name="calculator", arguments="{}")]
    return [
        Message(role="system", content="You help."),
        Message(role="user", content="task"),
        Message(role="assistant", content="Looking. FINAL ANSWER: 4", tool_calls=ask),
        Message(role="tool", content="no such tool", tool_call_id="abcdefghi"),
        Message(role="user", content="[harness] Not done yet: call calculator."),
        Message(role="assistant", content=None, tool_calls=again),
        Message(role="tool", content="4", tool_call_id="abcdefghi"),
    ]


@pytest.mark.parametrize(
    ("endpoint", "said"),
    [
        (Endpoint(role_order=True), "Unexpected role 'user' after role 'tool'"),
        (Endpoint(alternating_roles=True), ALTERNATE),
        (Endpoint(nine_char_call_ids=True), NINE_CHAR_IDS),
    ],
)
def test_mistral_refuses_a_nudged_run_as_openai_takes_it(endpoint: Endpoint, said: str) -> None:
    sent = request_messages(_nudged_run())
    assert refusal(PAIRS, sent) is None  # OpenAI takes it as it is
    assert said in (refusal(endpoint, sent) or "")


def test_a_nudged_run_shaped_for_strict_templates_is_taken_by_every_rule() -> None:
    sent = request_messages(_nudged_run())
    shaped = for_strict_templates(sent, strict_roles=True, nine_char_call_ids=True)
    assert refusal(MISTRAL, shaped) is None and refusal(PAIRS, shaped) is None
    assert [m["role"] for m in shaped] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert shaped[3]["content"] == "no such tool\n\n[harness] Not done yet: call calculator."
    first, second = (m["tool_calls"][0]["id"] for m in (shaped[2], shaped[4]))
    assert first == "abcdefghi"  # an id of the shape goes as it is
    assert second != first and len(second) == 9 and second.isalnum()
    assert [shaped[3]["tool_call_id"], shaped[5]["tool_call_id"]] == [first, second]
    # the same at every step: the request's prefix stays what the provider cached
    assert for_strict_templates(sent, strict_roles=True, nine_char_call_ids=True) == shaped
    assert sent[3]["content"] == "no such tool"  # what it was given is left as it was


def test_only_the_shapes_a_model_wants_are_applied() -> None:
    sent = request_messages(_nudged_run())
    assert for_strict_templates(sent, strict_roles=False, nine_char_call_ids=False) == sent
    roles_only = for_strict_templates(sent, strict_roles=True, nine_char_call_ids=False)
    assert refusal(Endpoint(role_order=True, alternating_roles=True), roles_only) is None
    assert refusal(Endpoint(nine_char_call_ids=True), roles_only) == NINE_CHAR_IDS
