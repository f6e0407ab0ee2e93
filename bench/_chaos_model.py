"""The chaos soak's model: the project's ScriptedLLM in its own process, flaky on purpose,
logging every request it answers so the soak can check what each run was billed.

    python -m bench._chaos_model --log FILE --seed S [--flaky P]

prints `READY <base_url>`, then reads commands on stdin, one a line, answering each with a
JSON line: `storm SECONDS` answers every request with HTTP 503 for that long (a provider
outage), `stats` only answers. It stops when stdin closes.

A process of its own so killing a worker, Postgres or Temporal never touches it, and so a
request's billing is logged where no worker crash can lose it.

What it answers is read from a tag in the text (`⟦R-0007 t3 q1 e1⟧`, `⟦C-0003 t1⟧`):
- a run step (a request that offers tools): `t` calculator calls, then `current_time` when
  `q1` (the run's required tool), then final-answer; with `e1` it first tries final-answer
  once before the required tool was called (the gate refuses it). The run's tag is the last
  one in the first user message (a tool-path chat run's task ends with the chat message);
  with `l1` the answer is long (a few hundred characters: its debrief is synthesized);
- a direct chat turn (no tools offered): one line naming the turn's tag (the last one in the
  last user message);
- a debrief synthesis (the project's synthesis system prompt): the JSON it asks for.

Every answer is a reply with fixed usage: a function of the request's kind and iteration, so
the same model call asked twice is billed the same twice, and a run's result tokens can be
compared with what it was billed (`usage_for`). Before answering, a request waits a small
random delay (50 ms to 1 s); a fraction `P` (default 6%) are answered with a 429
(retry-after 1 s), a 500,
a dropped connection, or (streamed) a stream cut half-way, in equal parts.

Each request is one line of the log: {t, kind, tag, key, status, prompt, completion,
stream}. `status` is `ok` (billed: a whole reply went out), `429`, `500`, `503`, `drop` (no
answer) or `cut` (a streamed reply cut off before its usage chunk: a real provider bills it,
the client cannot know how much).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

from reactive_temporal.embedded.scripted_llm import Drop, HttpError, Reply, ScriptedLLM, Step, call
from reactive_temporal.prompts import SYNTHESIS_SYSTEM_PROMPT

TAG = re.compile(r"⟦([RC]-\d+)([^⟧]*)⟧")
"""A run's or a chat turn's tag, with its options (`t3 q1 e1`)."""


def usage_for(kind: str, key: int) -> tuple[int, int]:
    """(prompt, completion) tokens billed for a call of this kind at this iteration."""
    base = {"step": 100, "chat": 70, "debrief": 300}.get(kind, 50)
    return base + 10 * key, 7 + key


def tag_of(text: str) -> tuple[str, dict[str, int]] | None:
    """The last tag in `text`, with its options as numbers."""
    found = TAG.findall(text)
    if not found:
        return None
    name, rest = found[-1]
    options = {m[0]: int(m[1:]) for m in rest.split() if m[:1].isalpha() and m[1:].isdigit()}
    return name, options


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else json.dumps(content)


def classify(request: dict[str, Any]) -> tuple[str, str, int, dict[str, int]]:
    """(kind, tag, key, options): `key` is the call's iteration within its run or turn."""
    messages = request.get("messages", [])
    system = next((_text(m) for m in messages if m.get("role") == "system"), "")
    users = [_text(m) for m in messages if m.get("role") == "user"]
    assistants = sum(1 for m in messages if m.get("role") == "assistant")
    if system == SYNTHESIS_SYSTEM_PROMPT:
        found = tag_of(users[0] if users else "")
        return "debrief", found[0] if found else "", 0, {}
    if request.get("tools"):
        found = tag_of(users[0] if users else "")
        return "step", found[0] if found else "", assistants, found[1] if found else {}
    found = tag_of(users[-1] if users else "")
    return "chat", found[0] if found else "", 0, found[1] if found else {}


def step_reply(request: dict[str, Any], tag: str, options: dict[str, int], key: int) -> Reply:
    """The next move of a run, from what it has called so far."""
    messages = request.get("messages", [])
    offered = {t["function"]["name"] for t in request.get("tools", [])}
    called = [
        c["function"]["name"]
        for m in messages
        if m.get("role") == "assistant"
        for c in m.get("tool_calls") or []
    ]
    calculations = called.count("calculator")
    required_done = "current_time" in called
    usage = usage_for("step", key)
    if options.get("e") and "final-answer" not in called and calculations >= 1:
        if "final-answer" in offered:  # before its required tool: the gate refuses it
            return Reply("Done, I think.", [call("final-answer", output="early")], usage=usage)
    if calculations < options.get("t", 1) and "calculator" in offered:
        expression = f"{key + 2} * {key + 3}"
        return Reply(f"Computing {expression}.", [call("calculator", expression=expression)],
                     usage=usage)  # fmt: skip
    if options.get("q") and not required_done and "current_time" in offered:
        return Reply("Checking the clock.", [call("current_time")], usage=usage)
    answer = f"{tag}: done after {calculations} calculations"
    if options.get("l"):  # long enough that the run's debrief is synthesized by a child
        answer += ". " + " ".join(f"Product {n} checked." for n in range(20))
    if "final-answer" in offered:
        final = call("final-answer", output=answer, format="text", summary="Computed, answered.")
        return Reply("Submitting.", [final], usage=usage)
    return Reply(f"FINAL ANSWER: {answer}", usage=usage)


def debrief_reply() -> Reply:
    return Reply(
        json.dumps(
            {
                "summary": "The agent computed what it was asked and answered.",
                "key_findings": ["It answered."],
                "errors_encountered": [],
                "lessons_learned": ["The calculator gets the answer directly."],
                "caveats": "",
            }
        ),
        usage=usage_for("debrief", 0),
    )


class ChaosModel:
    """The responder: delays, faults and the log."""

    def __init__(self, log_path: Path, seed: int, flaky: float) -> None:
        self.random = random.Random(seed)
        self.flaky = flaky
        self.lock = threading.Lock()
        self.log = open(log_path, "a", buffering=1)  # noqa: SIM115 — open for the process's life
        self.storm_until = 0.0
        self.requests = 0

    def record(self, **entry: Any) -> None:
        with self.lock:
            self.requests += 1
            self.log.write(json.dumps({"t": time.time(), **entry}) + "\n")

    def __call__(self, request: dict[str, Any]) -> Step:
        kind, tag, key, options = classify(request)
        stream = request.get("stream") is True
        with self.lock:
            delay = self.random.uniform(0.05, 1.0)
            roll = self.random.random()
            fault = self.random.choice(["429", "500", "drop", "cut"]) if roll < self.flaky else ""
        entry: dict[str, Any] = {"kind": kind, "tag": tag, "key": key, "stream": stream}
        time.sleep(delay)
        if time.monotonic() < self.storm_until:
            self.record(**entry, status="503", prompt=0, completion=0)
            return HttpError(503, "scripted outage")
        if fault == "429":
            self.record(**entry, status="429", prompt=0, completion=0)
            return HttpError(429, "rate limited", headers={"retry-after": "1"})
        if fault == "500":
            self.record(**entry, status="500", prompt=0, completion=0)
            return HttpError(500, "scripted server error")
        if fault == "drop":
            self.record(**entry, status="drop", prompt=0, completion=0)
            return Drop()
        if kind == "debrief":
            reply = debrief_reply()
        elif kind == "chat":
            reply = Reply(
                f"Chat answer for {tag or 'an untagged turn'}.", usage=usage_for("chat", 0)
            )
        else:
            reply = step_reply(request, tag, options, key)
        assert reply.usage is not None
        if fault == "cut" and stream:
            reply.chunks, reply.drop_after_chunks = 4, 2
            self.record(**entry, status="cut", prompt=reply.usage[0], completion=reply.usage[1])
            return reply
        self.record(**entry, status="ok", prompt=reply.usage[0], completion=reply.usage[1])
        return reply


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--log", type=Path, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--flaky", type=float, default=0.06)
    args = p.parse_args()
    model = ChaosModel(args.log, args.seed, args.flaky)
    llm = ScriptedLLM(default=model).start()
    print(f"READY {llm.base_url}", flush=True)
    for line in sys.stdin:
        command = line.split()
        if command[:1] == ["storm"]:
            model.storm_until = time.monotonic() + float(command[1])
        print(json.dumps({"requests": model.requests}), flush=True)
    llm.stop()


if __name__ == "__main__":
    main()
