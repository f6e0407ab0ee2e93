"""What reading a streamed reply costs the worker's event loop: openai's chunk models and
`ChatCompletionStreamState` (before) against plain chunks merged by `StreamedReply` (now),
and, beside them, the same request sent with httpx2 (the HTTP client openai itself uses)
directly and its SSE lines read by hand: what the openai client's own request and stream
machinery costs on top of HTTP.

All read the same scripted replies over real HTTP, interleaved trial by trial; a reply of N
chunks is N words of text (a real model sends about a word per chunk) and, for the tool-call
case, a call whose arguments come in N/4 pieces. The figure is the CPU time of the thread
running the event loop (the scripted server runs in its own threads and is not counted), per
reply. The openai client on its aiohttp transport (`openai[aiohttp]`, `DefaultAioHttpClient`)
was measured the same way once (2026-12-01, bench/README.md) and is not kept here.

    .venv/bin/python -m bench.stream_merge [--trials T] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2
import openai
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionMessageFunctionToolCall,
)

from activities.llm_stream import StreamedReply
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call

SIZES = (20, 200, 1000)


def body(model: str) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": "?"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def with_models(client: openai.AsyncOpenAI, model: str) -> ChatCompletion:
    """The code before: a `ChatCompletionChunk` per chunk, merged by openai's stream state."""
    stream = await client.post(
        "/chat/completions",
        body=body(model),
        cast_to=ChatCompletion,
        stream=True,
        stream_cls=openai.AsyncStream[ChatCompletionChunk],
    )
    state: ChatCompletionStreamState[None] = ChatCompletionStreamState()
    async with stream:
        async for chunk in stream:
            state.handle_chunk(chunk)
            for choice in chunk.choices:
                if choice.index == 0 and choice.delta.content:
                    pass  # the live output's sink
    return state.get_final_completion()


async def with_dicts(client: openai.AsyncOpenAI, model: str) -> ChatCompletion:
    """The code now (`LlmEndpoint._stream`): chunks as decoded JSON, merged as data."""
    stream = await client.post(
        "/chat/completions",
        body=body(model),
        cast_to=ChatCompletion,
        stream=True,
        stream_cls=openai.AsyncStream[object],
    )
    reply = StreamedReply()
    async with stream:
        async for chunk in stream:
            reply.add(chunk)
    return reply.completion()


Reader = Callable[[openai.AsyncOpenAI, str], Awaitable[ChatCompletion]]


def httpx_reader(http: httpx2.AsyncClient) -> Reader:
    """A reader with no openai client: one POST on `http` (an httpx2 client like openai's),
    `data:` lines parsed as JSON and merged by `StreamedReply` (what a thin client of our
    own would do); the openai client only lends its base URL."""

    async def with_httpx(client: openai.AsyncOpenAI, model: str) -> ChatCompletion:
        reply = StreamedReply()
        async with http.stream(
            "POST",
            f"{client.base_url}chat/completions",
            json=body(model),
            headers={"Authorization": "Bearer bench"},
        ) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    reply.add(json.loads(line[6:]))
        return reply.completion()

    return with_httpx


def same_reply(a: ChatCompletion, b: ChatCompletion) -> bool:
    """The same text and calls (the scripted model makes up call ids per request)."""
    ma, mb = a.choices[0].message, b.choices[0].message
    calls = [
        [
            (c.function.name, c.function.arguments)
            for c in m.tool_calls or []
            if isinstance(c, ChatCompletionMessageFunctionToolCall)
        ]
        for m in (ma, mb)
    ]
    return ma.content == mb.content and calls[0] == calls[1]


async def cpu_of(
    read: Reader,
    client: openai.AsyncOpenAI,
    model: str,
) -> float:
    started = time.thread_time()
    await read(client, model)
    return time.thread_time() - started


async def main(trials: int) -> None:
    with ScriptedLLM() as llm:
        client = openai.AsyncOpenAI(base_url=llm.base_url, api_key="bench", max_retries=0)
        http = httpx2.AsyncClient(timeout=60)
        with_httpx = httpx_reader(http)
        rows = []
        for size in SIZES:
            words = " ".join(f"w{i}" for i in range(size))
            cases = {
                f"text, {size} chunks": Reply(words),
                f"text + a tool call, {size} chunks": Reply(
                    " ".join(f"w{i}" for i in range(size // 2)),
                    [call("lookup", query=words[: size * 3])],
                    chunks=size // 2,
                ),
            }
            for label, reply in cases.items():
                model = f"bench-{abs(hash(label))}"
                llm.script(model, [reply], repeat_last=True)
                before: list[float] = []
                after: list[float] = []
                raw: list[float] = []
                await with_dicts(client, model)  # warm every path
                await with_models(client, model)
                direct, usual = await with_httpx(client, model), await with_dicts(client, model)
                assert same_reply(direct, usual), f"{label}: the direct read merged another reply"
                for _ in range(trials):
                    before.append(await cpu_of(with_models, client, model))
                    after.append(await cpu_of(with_dicts, client, model))
                    raw.append(await cpu_of(with_httpx, client, model))
                b, a = statistics.median(before) * 1000, statistics.median(after) * 1000
                rows.append((label, b, a, statistics.median(raw) * 1000))
        await client.close()
        await http.aclose()
    print(f"event-loop CPU per streamed reply, median of {trials} trials (ms)\n")
    print(
        f"{'reply':<34} {'openai models':>14} {'plain chunks':>13} {'ratio':>7}"
        f" {'httpx2 directly':>16} {'plain / direct':>15}"
    )
    for label, b, a, r in rows:
        print(f"{label:<34} {b:>14.2f} {a:>13.2f} {a / b:>6.2f}× {r:>16.2f} {a / r:>14.2f}×")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="5 trials")
    args = parser.parse_args()
    asyncio.run(main(5 if args.quick else args.trials))
