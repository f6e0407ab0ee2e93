"""A streamed chat completion put back together from its chunks, as plain data.

openai's `ChatCompletionStreamState` builds model objects for every chunk and re-dumps the
whole message so far to merge each delta in: a real model sends a chunk per token or two, so
a long reply costs work that grows with its square, on the worker's one event loop that every
run shares (bench/README.md, "Streamed replies"). Here the chunks stay the dicts the SSE
decoder made (the stream is read as `AsyncStream[object]`), each delta is appended to a list,
and one `ChatCompletion` is built at the end, the way the client builds an unstreamed reply.

Chunks come from the network: anything that is not the expected shape is skipped, never
raised on. Where providers differ, the first value stands for what names the reply or a call
(`id`, `role`, a tool call's `id`), so an endpoint that repeats them in every chunk does not
get them glued together; text, refusals and arguments are concatenated.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from openai.types.chat import ChatCompletion

from activities.reply_calls import arguments_text, extra_content_of
from activities.turn_state import STATE_FIELDS, StateFragments
from reactive_temporal.thinking import REASONING_FIELDS, content_chunks


@dataclass
class _ToolCall:
    id: str = ""
    type: str = "function"
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    extra_content: dict[str, Any] | None = None

    def add(self, delta: dict[str, Any]) -> None:
        if not self.id and isinstance(delta.get("id"), str):
            self.id = delta["id"]
        if isinstance(delta.get("type"), str):
            self.type = delta["type"]
        if self.extra_content is None:
            self.extra_content = extra_content_of(delta)
        function = delta.get("function")
        if not isinstance(function, dict):
            return
        name = function.get("name")
        if isinstance(name, str) and name != self.name:  # some endpoints repeat the whole name
            self.name += name
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            self.arguments.append(arguments)
        elif isinstance(arguments, dict):  # the object itself, in one fragment
            self.arguments.append(arguments_text(arguments))

    def complete(self) -> bool:
        """Named, with arguments that are a whole JSON value (a fragment that names a call
        after this starts another one)."""
        if not self.name or not self.arguments or not self.arguments[-1].rstrip().endswith("}"):
            return False  # (checked first: endpoints that repeat the name do it every chunk)
        try:
            json.loads("".join(self.arguments))
        except (ValueError, RecursionError):
            return False
        return True

    def wire(self) -> dict[str, Any]:
        wired: dict[str, Any] = {
            "id": self.id,
            "type": self.type,
            "function": {"name": self.name, "arguments": "".join(self.arguments)},
        }
        if self.extra_content is not None:
            wired["extra_content"] = self.extra_content
        return wired


@dataclass
class _Choice:
    index: int
    role: str | None = None
    content: list[str] = field(default_factory=list)
    refusal: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    """A reasoning parser's thinking (`reasoning_content` or `reasoning` deltas)."""
    tool_calls: dict[int, _ToolCall] = field(default_factory=dict)
    state: dict[str, StateFragments] = field(default_factory=dict)
    """What the endpoint attaches to the turn for itself (`activities.turn_state`), by field."""
    finish_reason: str | None = None
    error: dict[str, Any] | None = None
    """The error a gateway put in the choice when its provider failed mid-reply (OpenRouter:
    `finish_reason: "error"` and `error: {code, message}` in the last chunk's choice)."""
    slots: dict[int, int] = field(default_factory=dict)
    """An endpoint's `index` → the call it stands for now (a proxy that numbers every call
    0 starts the next one under the same index, with a new id)."""

    def add(self, delta: dict[str, Any]) -> tuple[str, str]:
        """Merge one delta; the text and the thinking it added."""
        if self.role is None and isinstance(delta.get("role"), str):
            self.role = delta["role"]
        text = delta.get("content")
        thought = ""
        if isinstance(text, list):  # Mistral's chunks: Magistral's thinking, then its text
            text, thought = content_chunks(text)
            if thought:
                self.reasoning.append(thought)
        if isinstance(text, str) and text:
            self.content.append(text)
        else:
            text = ""
        refusal = delta.get("refusal")
        if isinstance(refusal, str):
            self.refusal.append(refusal)
        if len(delta) > 1 or "content" not in delta:  # a text delta alone is most of them
            sent = delta.get(REASONING_FIELDS[0], delta.get(REASONING_FIELDS[1]))
            if isinstance(sent, str):
                self.reasoning.append(sent)
                thought += sent
            for name in STATE_FIELDS:
                fragments = delta.get(name)
                if isinstance(fragments, list) and fragments:
                    self.state.setdefault(name, StateFragments()).add(fragments)
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for call in calls:
                if isinstance(call, dict):
                    self.tool_calls.setdefault(self._index_of(call), _ToolCall()).add(call)
        return text, thought

    def _index_of(self, call: dict[str, Any]) -> int:
        """The call a fragment belongs to: the one its `index` stands for, unless the
        fragment names another id with a function or after that call was whole, or names a
        function after that call was whole (a new call, under an index used before). Without
        an index (endpoints that leave it out: their calls were dropped), the call with its
        id, a new call for a new id or a new name, and other fragments continue the last
        call."""
        index, call_id = call.get("index"), call.get("id")
        call_id = call_id if isinstance(call_id, str) and call_id else None
        named = isinstance(call.get("function"), dict) and bool(call["function"].get("name"))
        if isinstance(index, int):
            slot = self.slots.get(index)
            if slot is None:
                slot = index
            else:
                current = self.tool_calls[slot]
                renamed = bool(call_id and current.id and call_id != current.id)
                # a new id is a new call when it names one, or the call so far is whole: an
                # endpoint that makes up an id for every chunk (vLLM's tool parsers, in some
                # versions) continues its call under another, and it was cut in pieces
                if (renamed and (named or current.complete())) or (
                    named and not call_id and current.complete()
                ):
                    slot = self._next()
            self.slots[index] = slot
            return slot
        if call_id is not None:
            known = next((i for i, c in self.tool_calls.items() if c.id == call_id), None)
            return known if known is not None else self._next()
        last = max(self.tool_calls, default=None)
        if last is None or (named and self.tool_calls[last].complete()):
            return self._next()
        return last

    def _next(self) -> int:
        return max(self.tool_calls, default=-1) + 1

    def wire(self) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": self.role or "assistant",
            "content": "".join(self.content) if self.content else None,
            "refusal": "".join(self.refusal) if self.refusal else None,
        }
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        for name, fragments in self.state.items():
            if entries := fragments.entries:
                message[name] = entries
        if self.tool_calls:
            message["tool_calls"] = [self.tool_calls[i].wire() for i in sorted(self.tool_calls)]
        wired = {"index": self.index, "message": message, "finish_reason": self.finish_reason}
        return wired if self.error is None else {**wired, "error": self.error}


class Added(NamedTuple):
    """What one chunk added to the reply's first choice: to its text, to its thinking sent
    apart (both for the live output)."""

    text: str
    thinking: str


@dataclass
class StreamedReply:
    """The chunks of one streamed reply, merged as they arrive."""

    id: str | None = None
    model: str | None = None
    created: int = 0
    system_fingerprint: str | None = None
    service_tier: str | None = None
    usage: dict[str, Any] | None = None
    choices: dict[int, _Choice] = field(default_factory=dict)

    def add(self, chunk: object) -> str:
        """Merge one chunk; the text it added to the first choice ('' when none)."""
        return self.merge(chunk).text

    def merge(self, chunk: object) -> Added:
        """Merge one chunk; the text and the thinking it added to the reply."""
        if not isinstance(chunk, dict):
            return Added("", "")
        # Azure OpenAI's first chunk is its prompt filter's verdict, with `id` and `model`
        # empty: the first that names them names the reply
        if not self.id and isinstance(chunk.get("id"), str):
            self.id = chunk["id"]
        if not self.model and isinstance(chunk.get("model"), str):
            self.model = chunk["model"]
        if not self.created and isinstance(chunk.get("created"), int):
            self.created = chunk["created"]
        for key in ("system_fingerprint", "service_tier"):
            if isinstance(chunk.get(key), str):
                setattr(self, key, chunk[key])
        if isinstance(chunk.get("usage"), dict):  # the last chunk, or with the last choice
            self.usage = chunk["usage"]
        elif self.usage is None and isinstance(groq := chunk.get("x_groq"), dict):
            if isinstance(groq.get("usage"), dict):  # Groq's place for it, without stream_options
                self.usage = groq["usage"]
        text = thought = ""
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else []:
            # One choice is asked for (never `n`), so each is that one, whatever its `index`:
            # Cloudflare Workers AI leaves it out, and older TGI and Foundry Local number
            # every chunk (1, 2, 3…): the reply was empty, or its first token alone
            if not isinstance(choice, dict) or not isinstance(choice.get("index", 0), int):
                continue
            merged = self.choices.setdefault(0, _Choice(0))
            delta = choice.get("delta")
            added = merged.add(delta) if isinstance(delta, dict) else ("", "")
            if isinstance(choice.get("finish_reason"), str):
                merged.finish_reason = choice["finish_reason"]
            if isinstance(choice.get("error"), dict) and choice["error"]:
                merged.error = choice["error"]
            text, thought = text + added[0], thought + added[1]
        return Added(text, thought)

    def completion(self) -> ChatCompletion:
        """The reply as an unstreamed call returns it (built without validation, as the
        openai client builds that one)."""
        body: dict[str, Any] = {
            "id": self.id or "",
            "object": "chat.completion",
            "created": self.created,
            "model": self.model or "",
            "choices": [self.choices[i].wire() for i in sorted(self.choices)],
            "usage": self.usage,
        }
        if self.system_fingerprint is not None:
            body["system_fingerprint"] = self.system_fingerprint
        if self.service_tier is not None:
            body["service_tier"] = self.service_tier
        return ChatCompletion.model_construct(**body)


def whole_reply_as_chunk(body: bytes) -> object:
    """An unstreamed reply's JSON body as one chunk `StreamedReply.add` merges: each choice's
    `message` as its `delta`. Anything else comes back as it is (and is no reply)."""
    try:
        reply = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(reply, dict) or not isinstance(reply.get("choices"), list):
        return reply
    choices = [
        {**c, "delta": c.get("message")} if isinstance(c, dict) else c for c in reply["choices"]
    ]
    return {**reply, "choices": choices}
