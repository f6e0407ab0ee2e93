"""State an endpoint attaches to a model's turn (OpenRouter's `reasoning_details`, a LiteLLM
proxy's `thinking_blocks`): read from a reply, put together from a stream's fragments, kept
bounded and exact, and sent back on its turn (`activities.turn_state`)."""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
from typing import Any

import pytest
from openai.types.chat import ChatCompletion

from activities.held_reply import HELD_MAX_BYTES, held_reply, hold
from activities.llm_stream import StreamedReply, whole_reply_as_chunk
from activities.reply_calls import ThoughtStep, read_reply, with_thinking
from activities.request_messages import view_messages
from activities.transcript_rows import ThoughtEntry, turn_entry
from activities.turn_state import (
    TURN_STATE_MAX_CHARS,
    StateFragments,
    read_state,
    recorded_state,
    state_of,
    state_text,
)
from reactive_temporal.context_window import LEFT_OUT, STUB, ContextPlan, build_view
from reactive_temporal.contracts.llm_payloads import LlmStepResult
from reactive_temporal.contracts.run import Message, SeqMessage, ToolCall
from reactive_temporal.embedded.scripted_llm import (
    Endpoint,
    Reply,
    call,
    completion_body,
    stream_chunks,
)
from tests.support.steps import attempt

SIGNATURE = "EqcDCkgICBACGAIqQDV0Mem0naIq1Zn2wwggk+SBqPlbWaJWd11LLeySu8CMYgep7DpQTvUQOOocIXlZ=="
CLAUDE: list[dict[str, Any]] = [  # OpenRouter, Anthropic's model: one entry, signed
    {
        "type": "reasoning.text",
        "text": "The user is asking for weather information for Florence, Italy.",
        "signature": SIGNATURE,
        "format": "anthropic-claude-v1",
        "index": 0,
    }
]
GEMINI: list[
    dict[str, Any]
] = [  # OpenRouter, Gemini 3: its summaries, then its thought signature for the call
    {
        "type": "reasoning.text",
        "text": "**Assessing**\n\nA weather call.",
        "format": "google-gemini-v1",
        "index": 0,
    },
    {
        "type": "reasoning.encrypted",
        "data": "CiUBjz1rX+QNZZDaA519jWkm",
        "format": "google-gemini-v1",
        "id": "tool_weather_wJMh",
        "index": 0,
    },
]
BLOCKS: list[
    dict[str, Any]
] = [  # LiteLLM, Anthropic with thinking: blocks with their signatures, one redacted
    {"type": "thinking", "thinking": "Weather for Florence.", "signature": "EqQB-1"},
    {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"},
    {"type": "thinking", "thinking": "Then the call.", "signature": "EqQB-2"},
]


def with_state(reply: Reply, field: str, state: list[dict[str, Any]]) -> Reply:
    """`reply` with `state` in `field` (`reasoning_details` or `thinking_blocks`)."""
    if field == "thinking_blocks":
        return dataclasses.replace(reply, thinking_blocks=state)
    return dataclasses.replace(reply, reasoning_details=state)


def chunk(**delta: Any) -> dict[str, Any]:
    return {"id": "gen-1", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


def message_of(reply: StreamedReply) -> Any:
    return reply.completion().choices[0].message


def test_openrouter_s_streamed_fragments_make_its_whole_array() -> None:
    """As OpenRouter streams Anthropic's thinking (its recorded stream): the entry opens with
    empty text and signature, its text comes in pieces under its index, its signature alone
    at the end, beside `reasoning` deltas and empty arrays; Gemini 3's encrypted entry shares
    the text's index under another type."""
    reply = StreamedReply()
    opening = {**CLAUDE[0], "text": "", "signature": ""}
    names = {"type": "reasoning.text", "format": "anthropic-claude-v1", "index": 0}
    text = CLAUDE[0]["text"]
    reply.add(chunk(role="assistant", content="", reasoning=None, reasoning_details=[]))
    reply.add(chunk(role="assistant", content="", reasoning=None, reasoning_details=[opening]))
    for piece in (text[:9], text[9:30], text[30:]):
        reply.add(chunk(content="", reasoning=piece, reasoning_details=[{**names, "text": piece}]))
    reply.add(chunk(content="", reasoning_details=[{**names, "signature": SIGNATURE}]))
    reply.add(chunk(content="", reasoning=None, reasoning_details=[]))
    state = state_of(message_of(reply))
    assert state == {"reasoning_details": CLAUDE}
    assert list(state["reasoning_details"][0]) == list(opening)  # keys as they came

    gemini = StreamedReply()
    first, second = GEMINI[0]["text"][:12], GEMINI[0]["text"][12:]
    gemini.add(chunk(content="", reasoning_details=[{**GEMINI[0], "text": first}]))
    gemini.add(chunk(content="", reasoning_details=[{**GEMINI[0], "text": second}]))
    gemini.add(chunk(content="", reasoning_details=[GEMINI[1]]))
    assert state_of(message_of(gemini)) == {"reasoning_details": GEMINI}


def test_litellm_s_streamed_blocks_make_its_whole_blocks() -> None:
    """As LiteLLM streams Anthropic's thinking: no index, one block per delta, a piece of its
    thinking with `signature: null`, then its signature with empty thinking; a redacted block
    whole. A signed block is whole: the next thinking starts another."""
    reply = StreamedReply()
    for block in BLOCKS:
        if block["type"] != "thinking":
            reply.add(chunk(content="", thinking_blocks=[block]))
            continue
        for piece in (block["thinking"][:7], block["thinking"][7:]):
            fragment = {"type": "thinking", "thinking": piece, "signature": None}
            reply.add(chunk(content="", reasoning_content=piece, thinking_blocks=[fragment]))
        last = {"type": "thinking", "thinking": "", "signature": block["signature"]}
        reply.add(chunk(content="", thinking_blocks=[last]))
    assert state_of(message_of(reply)) == {"thinking_blocks": BLOCKS}


@pytest.mark.parametrize("state", [CLAUDE, GEMINI, BLOCKS], ids=["claude", "gemini", "blocks"])
def test_a_whole_array_read_as_one_delta_is_as_it_came(state: list[dict[str, Any]]) -> None:
    """An unstreamed reply read as one chunk (an endpoint that ignores `stream`)."""
    field = "thinking_blocks" if state is BLOCKS else "reasoning_details"
    merged = StateFragments()
    merged.add(copy.deepcopy(state))
    assert merged.entries == state
    body = completion_body("m", with_state(Reply("hi"), field, state), {"messages": []})
    reply = StreamedReply()
    reply.add(whole_reply_as_chunk(json.dumps(body).encode()))
    assert state_of(message_of(reply)) == {field: state}


def test_fragments_of_the_wrong_shape_are_skipped() -> None:
    merged = StateFragments()
    merged.add([None, "text", 3, {"type": "thinking", "thinking": "kept", "signature": "s"}])
    assert merged.entries == [{"type": "thinking", "thinking": "kept", "signature": "s"}]
    reply = StreamedReply()
    reply.add(chunk(content="x", reasoning_details="not an array", thinking_blocks={}))
    assert state_of(message_of(reply)) is None


@pytest.mark.parametrize("state", [CLAUDE, GEMINI, BLOCKS], ids=["claude", "gemini", "blocks"])
def test_the_scripted_stream_and_its_unstreamed_body_carry_the_same_state(
    state: list[dict[str, Any]],
) -> None:
    field = "thinking_blocks" if state is BLOCKS else "reasoning_details"
    reply = with_state(Reply(None, [call("calculator", expression="6*7")]), field, state)
    request = {"model": "m", "messages": [], "stream": True}
    streamed = StreamedReply()
    for piece in stream_chunks("m", reply, request):
        streamed.add(piece)
    assert state_of(message_of(streamed)) == {field: state}
    unstreamed = ChatCompletion.model_validate(completion_body("m", reply, request))
    message = unstreamed.choices[0].message
    assert state_of(message) == {field: state}
    read = read_reply(message, {"calculator": "calculator"}, audit_rationale=False, id_prefix="t")
    assert read.state == {field: state}


def test_a_turn_s_state_is_recorded_as_it_came_and_dropped_whole_when_too_big(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Kept as JSON text: keys in the order they came (JSONB would sort them), a NUL and a
    lone surrogate escaped (Postgres refuses them as characters), read back equal. One over
    the bound is dropped, not cut, with a warning that names the run."""
    state = {"thinking_blocks": [{"signature": "s", "type": "thinking", "thinking": "a\0b\ud800"}]}
    text = state_text(state)
    text.encode()  # storable
    read = read_state(text)
    assert read == state
    assert list(read["thinking_blocks"][0]) == ["signature", "type", "thinking"]
    assert recorded_state(state, "run-1") == text and recorded_state(None, "run-1") is None
    huge = {
        "reasoning_details": [{"type": "reasoning.encrypted", "data": "x" * TURN_STATE_MAX_CHARS}]
    }
    with caplog.at_level(logging.WARNING):
        assert recorded_state(huge, "run-huge-7") is None
    assert "run-huge-7" in caplog.text and "reasoning_details" in caplog.text

    result = LlmStepResult(content="hi")
    recorded = with_thinking(result, None, text)
    assert isinstance(recorded, ThoughtStep) and recorded.turn_state == text
    assert with_thinking(result, None, None) is result
    assert "turn_state" not in LlmStepResult.model_validate(recorded.model_dump()).model_dump()


def _run() -> list[SeqMessage]:
    """A run of four turns, each calling a tool; every turn's state recorded, and thinking."""
    entries = [turn_entry(0, Message(role="system", content="sys")),
               turn_entry(1, Message(role="user", content="task"))]  # fmt: skip
    for turn in range(4):
        seq = 2 + 2 * turn
        calls = [ToolCall(id=f"c{turn}", name="calculator", arguments='{"expression": "1+1"}')]
        state = {"reasoning_details": [{**CLAUDE[0], "text": f"turn {turn}"}]}
        entries.append(
            turn_entry(
                seq,
                Message(role="assistant", content="x" * 900, tool_calls=calls),
                f"thought {turn}",
                state_text(state),
            )
        )
        entries.append(
            SeqMessage(
                seq=seq + 1, message=Message(role="tool", content="2", tool_call_id=f"c{turn}")
            )
        )
    return entries


@pytest.mark.parametrize("thinking_sent_back", [False, True])
def test_each_turn_the_view_sends_goes_with_its_state_compacted_or_not(
    thinking_sent_back: bool,
) -> None:
    """A compacted turn keeps its state (the endpoint's credential for its calls, which Gemini
    3 refuses a call of the run without); its thinking, text the model reads, goes empty. A
    turn left out is not in the view: nothing of it is sent. Other messages carry nothing."""
    transcript = _run()
    plan = ContextPlan(levels={2: LEFT_OUT, 3: LEFT_OUT, 4: STUB, 5: STUB})
    view = build_view(transcript, plan)
    sent = view_messages(view, transcript, plan.levels, thinking_sent_back)
    turns = [m for m in sent if m["role"] == "assistant"]
    assert [m["reasoning_details"][0]["text"] for m in turns] == ["turn 1", "turn 2", "turn 3"]
    assert turns[0]["content"] != "x" * 900  # the compacted one
    expected = ["", "thought 2", "thought 3"] if thinking_sent_back else [None] * 3
    assert [m.get("reasoning_content") for m in turns] == expected
    assert all("reasoning_details" not in m for m in sent if m["role"] != "assistant")
    assert not any(isinstance(e, ThoughtEntry) for e in view)  # the view's own entries


def test_a_held_reply_carries_its_turn_s_state_to_the_next_attempt(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The attempt that got a reply it could not record leaves it in its heartbeat: the
    turn's state goes with it, but for one that would take the details past what Temporal
    takes (the turn is then recorded without it, and a warning names the run)."""
    result = LlmStepResult(content="calling", tool_calls=[ToolCall(id="c1", name="calculator")])
    text = state_text({"thinking_blocks": BLOCKS})
    for state, kept in ((text, text), ("x" * HELD_MAX_BYTES, None)):
        beats: list[Any] = []
        first = attempt(1)
        first.on_heartbeat = beats.append
        with caplog.at_level(logging.WARNING):
            first.run(hold, "run-held-3", 2, result, "thought", state)
        again = attempt(2, heartbeat_details=[beats[-1]])
        assert again.run(held_reply, 2) == (result, "thought", kept)
    assert "run-held-3 #2" in caplog.text


def test_a_reply_whose_calls_carry_more_endpoint_state_than_a_heartbeat_takes_is_not_held(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """What the endpoint sent with each call (Gemini's thought signatures) goes back with the
    call, so it cannot be cut: a reply held with 3 MB of it was a heartbeat Temporal refuses
    (measured: TMPRL1103, the attempt failed by the SDK, nothing held); now one past
    HELD_MAX_BYTES is not held, saying so, and the next attempt asks the model again. One
    that fits is held with it."""
    signature = {"google": {"thought_signature": "s" * 1_000_000}}
    calls = [ToolCall(id=f"c{n}", name="calculator", extra_content=signature) for n in (1, 2, 3)]
    result = LlmStepResult(content="calling", tool_calls=calls)
    beats: list[Any] = []
    first = attempt(1)
    first.on_heartbeat = beats.append
    with caplog.at_level(logging.WARNING):
        first.run(hold, "run-held-4", 2, result, "thought", None)
    assert beats == []
    assert "run-held-4 #2: the reply is not held" in caplog.text
    assert attempt(2).run(held_reply, 2) is None
    fits = LlmStepResult(content="calling", tool_calls=calls[:1])
    first.run(hold, "run-held-4", 2, fits, "thought", None)
    back = attempt(2, heartbeat_details=[beats[-1]]).run(held_reply, 2)
    assert back == (fits, "thought", None)
    assert back[0].tool_calls[0].extra_content == signature


def test_the_scripted_endpoint_refuses_a_turn_without_its_state_or_with_it_changed() -> None:
    """As Anthropic does behind OpenRouter and LiteLLM: its words, in each one's body."""
    for field, state in (("reasoning_details", CLAUDE), ("thinking_blocks", BLOCKS)):
        endpoint = Endpoint(state_back=field)
        reply = endpoint.shape(with_state(Reply(None, [call("calculator")]), field, state), {})
        call_id = reply.tool_calls[0].id
        turn = {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call_id, "type": "function",
                            "function": {"name": "calculator", "arguments": "{}"}}],
        }  # fmt: skip
        answer = {"role": "tool", "tool_call_id": call_id, "content": "2"}

        def request(assistant: dict[str, Any], answer: dict[str, Any] = answer) -> dict[str, Any]:
            return {"messages": [{"role": "user", "content": "q"}, assistant, answer]}

        assert endpoint.check(request({**turn, field: copy.deepcopy(state)})) is None
        missing = endpoint.check(request(turn))
        assert missing is not None and missing.status == 400
        assert "Expected `thinking` or `redacted_thinking`, but found `tool_use`" in json.dumps(
            missing.body
        )
        changed = [{**state[0], "signature": "forged"}, *state[1:]]
        refused = endpoint.check(request({**turn, field: changed}))
        assert refused is not None and "Invalid `signature`" in json.dumps(refused.body)
