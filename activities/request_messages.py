"""A run's transcript as a chat-completions request sends it back to the model.

What the model wrote is stored as it came (the transcript is the record); what goes back
is shaped so that every provider takes it, whatever the model wrote: the turns and calls
a provider would refuse in a request's history are sent in a form it takes.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import string
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from activities.transcript_rows import ThoughtEntry
from activities.turn_state import STATE_FIELDS
from reactive_temporal.contracts.run import Message, SeqMessage
from reactive_temporal.tool_registry import wire_name

CACHED_ARGUMENTS_MAX_CHARS = 2_000
"""Arguments up to this are checked once per worker (4,096 kept: 16 MB at the most); longer
ones, rarer, are parsed at each step rather than held (64,000 characters each at most)."""


def wire_arguments(arguments: str) -> str:
    """A tool call's arguments as a request sends them back: as the model wrote them when
    they are a JSON object, else a JSON object holding what it wrote.

    Servers that parse the arguments of the calls in a request's history (vLLM and Ollama
    do, for their chat templates) refused the whole request over one broken call (small
    local models write them), and every later step of the run with it; the model was told
    of it by the call's error. Each step sends a run's calls again, the same strings: the
    short ones' answers are cached.
    """
    if len(arguments) > CACHED_ARGUMENTS_MAX_CHARS:
        return _as_object(arguments)
    return _cached_as_object(arguments)


def _as_object(arguments: str) -> str:
    try:
        if isinstance(json.loads(arguments), dict):
            return arguments
    except (ValueError, RecursionError):  # nested past what a parser takes: no object either
        pass
    return json.dumps({"invalid_arguments": arguments})


_cached_as_object = functools.lru_cache(maxsize=4096)(_as_object)


CALL_ID_MAX_CHARS = 40
"""The longest tool call id OpenAI takes in a request's history ("string too long")."""

EMPTY_REPLY_TEXT = "(empty reply)"
"""A model's turn that said nothing and called nothing, as the next requests show it."""


THINKING_FIELD = "reasoning_content"
"""Where a turn's thinking goes back to the endpoints that want it
(`ModelCapabilities.thinking_sent_back`): DeepSeek's and Moonshot's name for it."""


def to_openai(
    message: Message, thinking: str | None = None, state: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The chat-completions wire shape of a transcript message; a model's turn with its
    `thinking` beside it (THINKING_FIELD) when that is not None, and with the `state` its
    endpoint attached to it (`activities.turn_state`), in the fields it came in, as it came.

    A model's turn with no text goes back as providers take it: with calls, as `content:
    null`; with none (an empty reply, nudged), as EMPTY_REPLY_TEXT. Sent as it came, OpenAI
    refused `null` alone ("expected a string, got null") and Anthropic blank text ("text
    content blocks must contain non-whitespace text"), and the run ended on the nudge meant
    to keep it going.
    """
    content = message.content
    if message.role == "assistant" and (content is None or not content.strip()):
        content = None if message.tool_calls else EMPTY_REPLY_TEXT
    out: dict[str, Any] = {"role": message.role, "content": content}
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": wire_name(c.name), "arguments": wire_arguments(c.arguments)},
                **({"extra_content": c.extra_content} if c.extra_content else {}),
            }
            for c in message.tool_calls
        ]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if thinking is not None and message.role == "assistant":
        out[THINKING_FIELD] = thinking
    if state and message.role == "assistant":
        out.update((name, value) for name, value in state.items() if name in STATE_FIELDS)
    return out


def thinking_back(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A request's messages with every model's turn carrying THINKING_FIELD, empty where the
    request has none for it, for an endpoint that refuses a turn without it (a call the worker
    learned that of mid-way, a chat's turns, a turn from before the run was continued): the
    field must be there; what it holds is the model's own continuity."""
    if all(m.get("role") != "assistant" or THINKING_FIELD in m for m in messages):
        return messages
    return [
        {**m, THINKING_FIELD: ""} if m.get("role") == "assistant" and THINKING_FIELD not in m else m
        for m in messages
    ]


def view_messages(
    view: Sequence[SeqMessage],
    transcript: Sequence[SeqMessage],
    compacted: Mapping[int, int],
    thinking_sent_back: bool,
) -> list[dict[str, Any]]:
    """A step's view of `transcript` as its request sends it (`request_messages`).

    Each model's turn goes with the state its endpoint attached to it (what its step recorded:
    `ThoughtEntry.turn_state`), a turn the plan `compacted` too: the state is the endpoint's
    credential for the turn, which it checks, not text the compaction could shorten. Gemini 3
    (through OpenRouter) refuses a call of the current turn, every step after the task,
    without its thought signature, and a thinking block cut short no longer matches its
    signature: dropped or cut, a compacted turn's state would cost the run its next request.
    (A turn the plan leaves out is not in the view: none of it goes, calls nor state. Not
    counted in the context estimate: `activities.turn_state` says why.)

    For an endpoint that wants the turns back with their thinking (`thinking_sent_back`),
    each goes with what its step recorded, but a compacted turn: its thinking is text the
    model reads again, and would undo what the compaction saved (the field goes, empty).
    """
    recorded = {e.seq: e for e in transcript if isinstance(e, ThoughtEntry)}
    thinking = None
    if thinking_sent_back:
        thinking = [
            "" if compacted.get(e.seq) or e.seq not in recorded else recorded[e.seq].thinking
            for e in view
        ]
    states = [recorded[e.seq].turn_state if e.seq in recorded else None for e in view]
    return request_messages([e.message for e in view], thinking, states)


def request_messages(
    messages: Iterable[Message],
    thinking: Sequence[str | None] | None = None,
    states: Sequence[Mapping[str, Any] | None] | None = None,
) -> list[dict[str, Any]]:
    """A request's messages, each as `to_openai` sends it (with `thinking[i]` and `states[i]`
    beside the i-th message when given), with every tool call id unique and no two user
    messages in a row.

    Some models give one id to several calls (`call_0` every turn, or twice in one reply),
    and the transcript keeps what they gave; Anthropic refuses a request whose history holds
    an id twice ("tool_use ids must be unique"), and a result then names no call in
    particular. A call whose id came before in the request goes as `<id>-2` (`-3`, …), and
    its result, the next with that id, follows it.

    The agent's notes follow the task as a user message of their own (and a note on turns
    left out may follow them): strict chat templates refused the request ("conversation
    roles must alternate user/assistant/…", `merged_turns`), every run of an agent with
    lessons at its first step. Such a run of user messages goes as one.
    """
    sent: list[dict[str, Any]] = []
    seen: set[str] = set()
    renamed: dict[str, deque[str]] = {}
    for i, message in enumerate(messages):
        if message.role == "user" and sent and sent[-1]["role"] == "user" and message.content:
            last = sent[-1]
            if isinstance(last["content"], str) and len(last) == 2:  # role and text only
                sent[-1] = {"role": "user", "content": f"{last['content']}\n\n{message.content}"}
                continue
        wire = to_openai(
            message,
            thinking[i] if thinking is not None else None,
            states[i] if states is not None else None,
        )
        for call in wire.get("tool_calls", ()):
            given = call["id"]
            unique, n = given, 2
            while not unique or unique in seen:
                suffix = f"-{n}"  # within OpenAI's 40 characters, however long the id given
                unique, n = f"{(given or 'call')[: CALL_ID_MAX_CHARS - len(suffix)]}{suffix}", n + 1
            seen.add(unique)
            renamed.setdefault(given, deque()).append(unique)
            call["id"] = unique
        answered = message.tool_call_id
        if answered is not None and renamed.get(answered):
            wire["tool_call_id"] = renamed[answered].popleft()
        sent.append(wire)
    return sent


def merged_turns(messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Text messages, each run of them with one role sent as one message (their texts joined
    by a blank line); messages with calls, call ids or non-text content go as they are.

    Strict chat templates (Mistral-7B-Instruct's, Gemma's, Llama 2's, as vLLM and LM Studio
    render them) refuse two user turns in a row: "After the optional system message,
    conversation roles must alternate user/assistant/user/assistant/...". Anthropic and
    Mistral's own API join such a run themselves, the same way; OpenAI reads it the same.
    """
    sent: list[dict[str, Any]] = []
    for message in messages:
        last = sent[-1] if sent else None
        if (
            last is not None
            and _plain_text(last)
            and _plain_text(message)
            and last.get("role") == message.get("role")
            and message.get("role") in ("user", "assistant")
        ):
            sent[-1] = {**last, "content": f"{last['content']}\n\n{message['content']}"}
        else:
            sent.append(message)
    return sent


def _plain_text(message: dict[str, Any]) -> bool:
    return isinstance(message.get("content"), str) and message.keys() <= {"role", "content"}


MISTRAL_CALL_ID = re.compile(r"[A-Za-z0-9]{9}")
_ID_ALPHABET = string.ascii_letters + string.digits


def for_strict_templates(
    messages: list[dict[str, Any]], *, strict_roles: bool, nine_char_call_ids: bool
) -> list[dict[str, Any]]:
    """A request's messages (`request_messages`) as Mistral's templates take them, by the
    model's capabilities (`ModelCapabilities.strict_roles`, `nine_char_call_ids`).

    Their checks refused the request at every later step of a run: a note after tool results
    (a required tool's nudge, the note on turns left out) is a user turn after a tool's
    ("Unexpected role 'user' after role 'tool'"; vLLM's "roles must alternate"), and a call
    id not nine letters and digits (one renamed `-2`, or a rerun's OpenAI ids) is refused
    outright. The note goes at the end of the last result instead (the run's notes say they
    are the harness's); an id goes as nine characters derived from it, the same at every
    step, so the request's prefix stays cacheable.
    """
    sent: list[dict[str, Any]] = []
    ids = _NineCharIds()
    for message in messages:
        last = sent[-1] if sent else None
        if (
            strict_roles
            and last is not None
            and last["role"] == "tool"
            and message["role"] == "user"
            and isinstance(last.get("content"), str)
            and isinstance(message.get("content"), str)
        ):
            sent[-1] = {**last, "content": f"{last['content']}\n\n{message['content']}"}
            continue
        if nine_char_call_ids and (message.get("tool_calls") or message.get("tool_call_id")):
            message = ids.shape(message)
        sent.append(message)
    return sent


class _NineCharIds:
    """The call ids of one request, each as nine letters and digits: those given that have
    the shape as they are, any other derived from it; each sent id unique in the request."""

    def __init__(self) -> None:
        self.sent: dict[str, str] = {}
        self.taken: set[str] = set()

    def __call__(self, given: str) -> str:
        if given not in self.sent:
            candidate, salt = given, 0
            while not MISTRAL_CALL_ID.fullmatch(candidate) or candidate in self.taken:
                digest = hashlib.sha256(f"{given}\0{salt}".encode()).digest()
                candidate, salt = "".join(_ID_ALPHABET[b % 62] for b in digest[:9]), salt + 1
            self.sent[given] = candidate
            self.taken.add(candidate)
        return self.sent[given]

    def shape(self, message: dict[str, Any]) -> dict[str, Any]:
        """`message` with its calls' ids, or the id it answers, as sent."""
        out = dict(message)
        if message.get("tool_calls"):
            out["tool_calls"] = [
                {**c, "id": self(str(c.get("id") or ""))} for c in message["tool_calls"]
            ]
        if message.get("tool_call_id") is not None:
            out["tool_call_id"] = self(str(message["tool_call_id"]))
        return out
