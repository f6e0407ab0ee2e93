"""The benches' model: the project's ScriptedLLM in its own process, counting what it serves.

    python -m bench._model [--port P]

prints `READY <base_url>` on stdout, then answers one JSON line of statistics for each line
it reads on stdin (`stats`; `reset` zeroes the counters first; `backlog N` makes the
listening socket's backlog N, bench-side: socketserver's default is 5) until stdin closes.

The model name says what to answer (no scripting round trip, any number of concurrent runs):
`bench-t<N>-d<S>` calls the `noop` tool until the request holds N tool results, then answers
`FINAL ANSWER: done`; every reply takes S seconds (a slow model). `bench-t<N>-d<S>-s<K>`
streams a streamed request's reply as a real model does: its first chunk after S/2 seconds,
then K chunks over the other S/2 (a request not streamed still waits S seconds; peak in flight
counts the first half). A request is identified by
its first user message (each bench run has its own task) and the number of assistant
messages in it (the iteration), so a second request with the same pair is a duplicate call:
the same model call made again.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
from collections import Counter
from typing import Any

from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, Step, call

MODEL = re.compile(r"^bench-t(?P<tools>\d+)-d(?P<delay>[\d.]+)(?:-s(?P<chunks>\d+))?$")


def model_name(tool_calls: int, delay: float = 0.0, chunks: int = 0) -> str:
    return f"bench-t{tool_calls}-d{delay:g}" + (f"-s{chunks}" if chunks else "")


class Counting:
    """The responder: answers by the model name, sleeps in the handler thread, counts."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.requests = 0
            self.in_flight = 0
            self.peak_in_flight = 0
            self.per_call: Counter[tuple[str, int]] = Counter()
            self.first_at: float | None = None
            self.last_at: float | None = None

    def __call__(self, request: dict[str, Any]) -> Step:
        messages = request.get("messages", [])
        task = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
        iteration = sum(1 for m in messages if m.get("role") == "assistant")
        match = MODEL.match(str(request.get("model", "")))
        tools = int(match["tools"]) if match else 0
        delay = float(match["delay"]) if match else 0.0
        chunks = int(match["chunks"] or 0) if match and request.get("stream") else 0
        if chunks:
            delay /= 2  # the first half before the first chunk, the other while streaming
        with self.lock:
            now = time.monotonic()
            self.first_at = self.first_at or now
            self.requests += 1
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            self.per_call[(task, iteration)] += 1
        try:
            if delay:
                time.sleep(delay)
        finally:
            with self.lock:
                self.in_flight -= 1
                self.last_at = time.monotonic()
        results = sum(1 for m in messages if m.get("role") == "tool")
        pace = delay / chunks if chunks else 0.0
        if results < tools:
            text = f"Calling noop.{' Thinking.' * chunks}"
            return Reply(text, [call("noop")], chunks=chunks or None, chunk_delay=pace)
        return Reply("FINAL ANSWER: done", chunks=chunks or None, chunk_delay=pace)

    def stats(self) -> dict[str, Any]:
        with self.lock:
            return {
                "requests": self.requests,
                "distinct_calls": len(self.per_call),
                "duplicate_calls": sum(n - 1 for n in self.per_call.values()),
                "peak_in_flight": self.peak_in_flight,
                "in_flight": self.in_flight,
                "threads": threading.active_count(),
                "serving_seconds": (self.last_at or 0) - (self.first_at or 0),
            }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--port", type=int, default=0)
    args = p.parse_args()
    counting = Counting()
    llm = ScriptedLLM(port=args.port, default=counting)
    peak_threads = 0

    def watch_threads() -> None:
        nonlocal peak_threads
        while True:
            peak_threads = max(peak_threads, threading.active_count())
            time.sleep(0.05)

    threading.Thread(target=watch_threads, daemon=True).start()
    llm.start()
    print(f"READY {llm.base_url}", flush=True)
    for line in sys.stdin:
        command = line.split()
        if command == ["reset"]:
            counting.reset()
            peak_threads = threading.active_count()
        elif command[:1] == ["backlog"]:
            llm._server.socket.listen(int(command[1]))
        print(json.dumps({**counting.stats(), "peak_threads": peak_threads}), flush=True)
    llm.stop()


if __name__ == "__main__":
    main()
