"""The scripted model streams as OpenAI does, checked with the real openai client.

Live output (issue 12) reads `stream: true` answers; these tests pin the wire format the
scripted server speaks: SSE `chat.completion.chunk`s, tool-call fragments, the usage chunk,
`[DONE]`, and the knobs tests use (how many chunks, the delay, a stream cut off).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import openai
import pytest

from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call, split_text

ANSWER = "The answer is 42, computed twice and checked once."


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as llm:
        yield llm


def client_for(server: ScriptedLLM) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0)


async def test_content_arrives_in_the_scripted_number_of_chunks_with_usage_last(server):
    server.script("stream-content", [Reply(ANSWER, chunks=7, usage=(30, 12))])
    stream = await client_for(server).chat.completions.create(
        model="stream-content",
        messages=[{"role": "user", "content": "?"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]

    deltas = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert len(deltas) == 7
    assert "".join(deltas) == ANSWER
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    # the usage chunk comes last, with no choices; the others carry usage null
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (30, 12)
    assert all(c.usage is None for c in chunks[:-1])


async def test_no_usage_chunk_unless_asked(server):
    server.script("stream-no-usage", [Reply(ANSWER, chunks=3)])
    stream = await client_for(server).chat.completions.create(
        model="stream-no-usage", messages=[{"role": "user", "content": "?"}], stream=True
    )
    chunks = [chunk async for chunk in stream]
    assert all(c.choices for c in chunks)
    assert all(c.usage is None for c in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == ANSWER


async def test_tool_calls_stream_as_fragments_the_openai_helper_reassembles(server):
    server.script(
        "stream-tools",
        [
            Reply(
                "Let me compute.",
                tool_calls=[call("calculator", expression="6*7"), call("current_time")],
                chunks=4,
            )
        ],
    )
    async with client_for(server).chat.completions.stream(
        model="stream-tools", messages=[{"role": "user", "content": "?"}]
    ) as stream:
        fragments = [
            event async for event in stream if event.type == "tool_calls.function.arguments.delta"
        ]
        final = await stream.get_final_completion()

    message = final.choices[0].message
    assert final.choices[0].finish_reason == "tool_calls"
    assert message.content == "Let me compute."
    assert [(c.function.name, c.function.arguments) for c in message.tool_calls or []] == [
        ("calculator", '{"expression": "6*7"}'),
        ("current_time", "{}"),
    ]
    # the arguments came in pieces, after the header fragment that names the function
    assert len([f for f in fragments if f.index == 0 and f.arguments_delta]) == 4


async def test_chunks_default_to_one_per_word(server):
    server.script("stream-words", [Reply("one two  three")])
    stream = await client_for(server).chat.completions.create(
        model="stream-words", messages=[{"role": "user", "content": "?"}], stream=True
    )
    deltas = [c.choices[0].delta.content async for c in stream if c.choices[0].delta.content]
    assert deltas == ["one ", "two  ", "three"]


async def test_chunk_delay_spaces_the_chunks(server):
    server.script("stream-slow", [Reply(ANSWER, chunks=4, chunk_delay=0.2)])
    stream = await client_for(server).chat.completions.create(
        model="stream-slow", messages=[{"role": "user", "content": "?"}], stream=True
    )
    arrivals = [time.monotonic() async for c in stream if c.choices[0].delta.content]
    assert len(arrivals) == 4
    # three pauses of 0.2 s between four chunks (a lower bound: load only adds time)
    assert arrivals[-1] - arrivals[0] >= 0.55


async def test_a_stream_cut_off_mid_answer_fails_after_the_chunks_it_sent(server):
    server.script("stream-cut", [Reply(ANSWER, chunks=5, drop_after_chunks=2)])
    stream = await client_for(server).chat.completions.create(
        model="stream-cut", messages=[{"role": "user", "content": "?"}], stream=True
    )
    received: list[str] = []
    with pytest.raises(openai.APIError):  # the client sees the connection end mid-stream
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                received.append(chunk.choices[0].delta.content)
    assert "".join(received) == ANSWER[: len("".join(split_text(ANSWER, 5)[:2]))]
    assert len(received) == 2


async def test_errors_are_plain_json_even_when_streaming_was_asked(server):
    from reactive_temporal.embedded.scripted_llm import HttpError

    server.script("stream-429", [HttpError(429, "slow down", headers={"retry-after": "1"})])
    with pytest.raises(openai.RateLimitError) as caught:
        await client_for(server).chat.completions.create(
            model="stream-429", messages=[{"role": "user", "content": "?"}], stream=True
        )
    assert caught.value.response.headers["retry-after"] == "1"


async def test_a_client_that_hangs_up_during_the_delay_is_counted_as_abandoned(server):
    """A cancelled call really stops waiting: the server sees the hang-up at once."""
    import asyncio

    server.script("slow-gone", [Reply(ANSWER, delay=30)])
    server.script("slow-kept", [Reply(ANSWER, delay=0.3)])
    asking = asyncio.ensure_future(
        client_for(server).chat.completions.create(
            model="slow-gone", messages=[{"role": "user", "content": "?"}], stream=True
        )
    )
    deadline = time.monotonic() + 60  # hang guards: a loaded machine is slow, not stuck
    while not server.requests["slow-gone"]:  # the call reached the server: it waits there
        assert time.monotonic() < deadline, "the call never reached the server"
        await asyncio.sleep(0.05)
    asking.cancel()  # what a cancelled activity's call does
    with pytest.raises(asyncio.CancelledError):
        await asking
    deadline = time.monotonic() + 60
    while server.abandoned["slow-gone"] == 0:
        assert time.monotonic() < deadline, "the hang-up went unseen"
        await asyncio.sleep(0.05)
    assert server.abandoned["slow-gone"] == 1

    reply = await client_for(server).chat.completions.create(
        model="slow-kept", messages=[{"role": "user", "content": "?"}]
    )
    assert reply.choices[0].message.content == ANSWER
    assert server.abandoned["slow-kept"] == 0


def test_split_text_joins_back_and_never_yields_empty_pieces():
    for text in ["", "a", "ab", "hello world", "x" * 101]:
        for pieces in [None, 1, 2, 7, 50, 500]:
            parts = split_text(text, pieces)
            assert "".join(parts) == text
            assert all(parts)
            if pieces is not None and text:
                assert len(parts) == min(pieces, len(text))
