"""A streamed reply put back together from plain chunks (`activities.llm_stream`) is the
reply openai's own `ChatCompletionStreamState` makes of the same chunks, and an unstreamed
call's body; chunks of the wrong shape are skipped, and values some endpoints repeat in
every chunk are not glued together."""

from __future__ import annotations

from typing import Any

import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionMessageFunctionToolCall,
)

from activities.llm_stream import StreamedReply
from reactive_temporal.embedded.scripted_llm import Reply, call, completion_body, stream_chunks

REQUEST = {"model": "m", "messages": [], "stream": True, "stream_options": {"include_usage": True}}

REPLIES = {
    "text": Reply("The answer is 42, computed twice and checked once.", usage=(30, 12)),
    "text in 3 pieces": Reply("Forty-two.", chunks=3),
    "tool calls": Reply(
        "Looking both up.",
        [call("lookup", sku="A"), call("calculator", expression="6*7")],
        chunks=4,
    ),
    "only a tool call": Reply(None, [call("http_get", url="https://example.com/a?b=1")]),
    "empty": Reply(""),
}


def merged(chunks: list[dict[str, Any]]) -> tuple[StreamedReply, str]:
    reply, text = StreamedReply(), ""
    for chunk in chunks:
        text += reply.add(chunk)
    return reply, text


def calls_of(completion: ChatCompletion) -> list[ChatCompletionMessageFunctionToolCall]:
    calls = completion.choices[0].message.tool_calls or []
    return [c for c in calls if isinstance(c, ChatCompletionMessageFunctionToolCall)]


def essentials(completion: ChatCompletion, *, ids: bool = True) -> dict[str, Any]:
    """What the run, chat and synthesis read of a reply (`ids`: with the reply's and the
    calls' ids, which each scripted answer draws anew)."""
    choice = completion.choices[0]
    return {
        "id": completion.id if ids else None,
        "model": completion.model,
        "content": choice.message.content or None,
        "role": choice.message.role,
        "finish_reason": choice.finish_reason,
        "tool_calls": [
            (c.id if ids else None, c.type, c.function.name, c.function.arguments)
            for c in calls_of(completion)
        ],
        "usage": completion.usage.model_dump() if completion.usage else None,
    }


@pytest.mark.parametrize("name", list(REPLIES))
def test_the_same_reply_as_openais_stream_state_and_an_unstreamed_call(name):
    chunks = stream_chunks("m", REPLIES[name], REQUEST)
    reply, text = merged(chunks)
    ours = reply.completion()

    state: ChatCompletionStreamState[None] = ChatCompletionStreamState()
    for chunk in chunks:
        state.handle_chunk(ChatCompletionChunk.model_validate(chunk))
    theirs = state.get_final_completion()
    unstreamed = ChatCompletion.model_validate(completion_body("m", REPLIES[name], REQUEST))

    assert essentials(ours) == essentials(theirs)
    assert essentials(ours, ids=False) == essentials(unstreamed, ids=False)
    assert text == (REPLIES[name].content or "")
    ChatCompletion.model_validate(ours.model_dump())  # a well-formed reply, as validated


def test_every_choice_is_the_one_asked_for_whatever_its_index():
    """One choice is asked for (never `n`): Cloudflare Workers AI leaves `index` out, older
    TGI and Foundry Local number every chunk. Each chunk's text was dropped, or made a choice
    of its own (the reply was its first token)."""
    reply = StreamedReply()
    assert reply.add({"id": "c", "choices": [{"delta": {"content": "It "}}]}) == "It "
    assert reply.add({"choices": [{"index": 1, "delta": {"content": "is "}}]}) == "is "
    assert reply.add({"choices": [{"index": 2, "delta": {"content": "42"}}]}) == "42"
    completion = reply.completion()
    assert [c.message.content for c in completion.choices] == ["It is 42"]


def test_chunks_of_the_wrong_shape_are_skipped_not_raised_on():
    reply = StreamedReply()
    hostile: list[object] = [
        None,
        "data",
        [1, 2],
        {"choices": "many"},
        {"choices": [None, "x", {"index": "0", "delta": {"content": "no"}}]},
        {"choices": [{"index": 0, "delta": "text"}]},
        {"choices": [{"index": 0, "delta": {"content": 5, "tool_calls": "x"}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [None, {"index": "1"}, {"id": "x"}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": "f"}]}}]},
        {"usage": "lots", "model": 7, "id": ["x"]},
        {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]},
    ]
    text = "".join(reply.add(chunk) for chunk in hostile)
    assert text == "ok"
    completion = reply.completion()
    assert completion.choices[0].message.content == "ok"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is None and completion.model == ""
    # fragments without an int index are placed by id (a new id, a new call); the
    # well-indexed one with a non-dict function joins call 0: calls with no name yet
    assert [(c.id, c.function.name) for c in calls_of(completion)] == [("", ""), ("x", "")]


def test_values_an_endpoint_repeats_in_every_chunk_are_kept_once():
    """Some OpenAI-compatible servers send the role, the reply's id and a call's id and name
    with every chunk; openai's merge concatenates them ("assistantassistant")."""
    base = {"id": "chatcmpl-1", "model": "m", "created": 1}
    pieces = ['{"sku"', ': "A"}']
    chunks = [
        {
            **base,
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "lookup", "arguments": piece},
                            }
                        ],
                    },
                }
            ],
        }
        for piece in pieces
    ]
    reply, _ = merged(chunks)
    message = reply.completion().choices[0].message
    assert message.role == "assistant"
    assert [
        (c.id, c.function.name, c.function.arguments) for c in calls_of(reply.completion())
    ] == [("call_1", "lookup", '{"sku": "A"}')]


def test_a_name_sent_in_pieces_is_joined():
    chunks = [
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "id": "c", "function": {"name": p}}]},
                }
            ]
        }
        for p in ("get_", "weather")
    ]
    reply, _ = merged(chunks)
    assert [c.function.name for c in calls_of(reply.completion())] == ["get_weather"]


def test_usage_with_reasoning_tokens_is_kept_whole():
    usage = {
        "prompt_tokens": 10,
        "completion_tokens": 30,
        "total_tokens": 40,
        "completion_tokens_details": {"reasoning_tokens": 24},
    }
    reply, _ = merged(
        [
            {"id": "x", "choices": [{"index": 0, "delta": {"content": "hi"}}]},
            {"id": "x", "choices": [], "usage": usage},
        ]
    )
    completion = reply.completion()
    assert completion.usage is not None
    assert completion.usage.completion_tokens_details is not None
    assert completion.usage.completion_tokens_details.reasoning_tokens == 24


def test_calls_of_an_endpoint_that_sends_no_index_are_kept():
    """Some endpoints leave `index` out of their call fragments: each call was dropped, and
    the run went on to its iteration cap with none of the model's calls run."""

    def fragment(**call: object) -> dict:
        return {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}

    chunks = [
        fragment(id="c1", function={"name": "lookup", "arguments": '{"sku"'}),
        fragment(function={"arguments": ': "A"}'}),
        fragment(id="c2", function={"name": "lookup", "arguments": '{"sku": "B"}'}),
        fragment(id="c1", function={"arguments": ""}),
    ]
    reply, _ = merged(chunks)
    assert [
        (c.id, c.function.name, c.function.arguments) for c in calls_of(reply.completion())
    ] == [("c1", "lookup", '{"sku": "A"}'), ("c2", "lookup", '{"sku": "B"}')]


def test_a_new_id_is_a_new_call_only_when_it_names_one_or_the_last_is_whole():
    """Under one `index`: a proxy that numbers every call 0 starts each with a new id and its
    name (two calls); an endpoint that makes up an id for every chunk continues one call
    (one call, whole)."""

    def fragment(call_id: str, arguments: str, name: str | None = None) -> dict:
        function = {"arguments": arguments, **({"name": name} if name else {})}
        call = {"index": 0, "id": call_id, "function": function}
        return {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}

    proxy = [fragment("c1", '{"sku": "A"}', "lookup"), fragment("c2", '{"sku": "B"}', "lookup")]
    reply, _ = merged(proxy)
    assert [(c.id, c.function.arguments) for c in calls_of(reply.completion())] == [
        ("c1", '{"sku": "A"}'),
        ("c2", '{"sku": "B"}'),
    ]
    renamed = [fragment("a", "", "lookup"), fragment("b", '{"sku"'), fragment("c", ': "A"}')]
    reply, _ = merged(renamed)
    assert [(c.id, c.function.arguments) for c in calls_of(reply.completion())] == [
        ("a", '{"sku": "A"}')
    ]
