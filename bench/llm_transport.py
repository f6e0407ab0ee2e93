"""What the model client's HTTP transport costs the worker's event loop per streamed reply:
openai's default, httpx2 (before), against openai's aiohttp transport (now,
`openai.DefaultAioHttpClient`, which `hosting/worker_factory.llm_client` uses).

Both are the same `openai.AsyncOpenAI` with the worker's connection limits, read by the
worker's code path (`client.post(..., stream=True)`, chunks merged by `StreamedReply`), from
one ScriptedLLM over real HTTP, interleaved trial by trial. The figure is the CPU time of the
thread running the event loop (the scripted server runs in its own threads), per reply:

- one reply at a time: 1 chunk, 20 and 50 chunks sent at once, 50 chunks 5 ms apart (a
  model's pace, each chunk its own read);
- 200 replies at once, each 50 chunks 20 ms apart (a loaded worker: 1 s of streaming each),
  rounds alternating which transport goes first.

    .venv/bin/python -m bench.llm_transport [--trials T] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import openai

from bench.stream_merge import same_reply, with_dicts
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM
from reactive_temporal.hosting.worker_factory import llm_connection_limits

SINGLE = {
    "1 chunk": Reply("The answer is 42.", chunks=1),
    "20 chunks at once": Reply(" ".join(f"w{i}" for i in range(20))),
    "50 chunks at once": Reply(" ".join(f"w{i}" for i in range(50))),
    "50 chunks, 5 ms apart": Reply(" ".join(f"w{i}" for i in range(50)), chunk_delay=0.005),
}
CONCURRENT = 200


def clients(base_url: str) -> dict[str, openai.AsyncOpenAI]:
    limits = llm_connection_limits(500)  # the worker's, with its default activity slots
    return {
        "httpx2": openai.AsyncOpenAI(
            base_url=base_url,
            api_key="bench",
            max_retries=0,
            http_client=openai.DefaultAsyncHttpxClient(limits=limits),
        ),
        "aiohttp": openai.AsyncOpenAI(
            base_url=base_url,
            api_key="bench",
            max_retries=0,
            http_client=openai.DefaultAioHttpClient(limits=limits),
        ),
    }


async def main(trials: int, rounds: int) -> None:
    with ScriptedLLM() as llm:
        llm._server.socket.listen(1024)  # bench-side: hold CONCURRENT connections at once
        by_name = clients(llm.base_url)
        rows: list[tuple[str, float, float]] = []
        for label, reply in SINGLE.items():
            model = f"transport-{abs(hash(label))}"
            llm.script(model, [reply], repeat_last=True)
            first, second = [await with_dicts(c, model) for c in by_name.values()]
            assert same_reply(first, second), f"{label}: the transports read different replies"
            cpu: dict[str, list[float]] = {name: [] for name in by_name}
            for _ in range(trials):
                for name, client in by_name.items():
                    started = time.thread_time()
                    await with_dicts(client, model)
                    cpu[name].append((time.thread_time() - started) * 1000)
            rows.append(
                (label, statistics.median(cpu["httpx2"]), statistics.median(cpu["aiohttp"]))
            )

        llm.script(
            "transport-paced",
            [Reply(SINGLE["50 chunks at once"].content, chunk_delay=0.02)],
            repeat_last=True,
        )
        loaded: dict[str, list[float]] = {name: [] for name in by_name}
        walls: dict[str, list[float]] = {name: [] for name in by_name}
        for r in range(rounds):
            order = list(by_name) if r % 2 == 0 else list(reversed(by_name))
            for name in order:
                started, wall = time.thread_time(), time.perf_counter()
                await asyncio.gather(
                    *(with_dicts(by_name[name], "transport-paced") for _ in range(CONCURRENT))
                )
                loaded[name].append((time.thread_time() - started) * 1000 / CONCURRENT)
                walls[name].append(time.perf_counter() - wall)
        rows.append(
            (
                f"{CONCURRENT} at once, 50 chunks 20 ms apart",
                statistics.median(loaded["httpx2"]),
                statistics.median(loaded["aiohttp"]),
            )
        )
        for client in by_name.values():
            await client.close()
    print(f"event-loop CPU per streamed reply, ms (median of {trials} trials; {rounds} rounds)\n")
    print(f"{'reply':<38} {'httpx2 (before)':>16} {'aiohttp (now)':>14} {'now / before':>13}")
    for label, before, now in rows:
        print(f"{label:<38} {before:>16.2f} {now:>14.2f} {now / before:>12.2f}×")
    print(
        f"\nwall time of the {CONCURRENT} at once (ideal 1 s): httpx2 "
        f"{statistics.median(walls['httpx2']):.2f} s, aiohttp "
        f"{statistics.median(walls['aiohttp']):.2f} s"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="8 trials, 2 rounds")
    args = parser.parse_args()
    asyncio.run(main(8 if args.quick else args.trials, 2 if args.quick else 4))
