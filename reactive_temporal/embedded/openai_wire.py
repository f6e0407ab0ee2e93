"""The scripted model's side of OpenAI's chat-completions wire: a reply as a
`chat.completion` body, and the same reply as the `chat.completion.chunk` objects a streamed
request gets (what a provider refuses before a script answers: `endpoint_rules`)."""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import Any

from reactive_temporal.embedded.endpoint_rules import scripted_tokens
from reactive_temporal.embedded.reasoning_state import state_deltas, state_of
from reactive_temporal.embedded.scripted_replies import Reply


def completion_body(model: str, reply: Reply, request: dict[str, Any]) -> dict[str, Any]:
    tool_calls = [
        {
            "id": c.id if c.id is not None else f"call_{uuid.uuid4().hex[:12]}",
            "type": "function",
            "function": {
                "name": c.name,
                "arguments": c.arguments
                if isinstance(c.arguments, str)
                else json.dumps(c.arguments),
            },
        }
        for c in reply.tool_calls
    ]
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    message.update(state_of(reply))
    if tool_calls:
        message["tool_calls"] = tool_calls
    prompt, completion = reply.usage or (
        scripted_tokens(json.dumps(request.get("messages", []))),
        scripted_tokens((reply.content or "") + json.dumps(message.get("tool_calls", []))),
    )
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if reply.reasoning_tokens is not None:
        completion += reply.reasoning_tokens
        usage.update(
            completion_tokens=completion,
            total_tokens=prompt + completion,
            completion_tokens_details={"reasoning_tokens": reply.reasoning_tokens},
        )
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": reply.finish_reason or ("tool_calls" if tool_calls else "stop"),
            }
        ],
        "usage": usage,
    }


def split_text(text: str, pieces: int | None) -> list[str]:
    """`text` in `pieces` non-empty parts that join back to it (None: one per word)."""
    if not text:
        return []
    if pieces is None:
        return re.findall(r"\S+\s*|\s+", text)
    pieces = max(1, min(pieces, len(text)))
    size, extra = divmod(len(text), pieces)
    parts, start = [], 0
    for i in range(pieces):
        end = start + size + (1 if i < extra else 0)
        parts.append(text[start:end])
        start = end
    return parts


def stream_chunks(model: str, reply: Reply, request: dict[str, Any]) -> list[dict[str, Any]]:
    """The `chat.completion.chunk` objects that stream the same answer `completion_body`
    gives: a role chunk, content pieces, tool-call fragments, a finish chunk, and a usage
    chunk when the request's `stream_options.include_usage` asks for one."""
    whole = completion_body(model, reply, request)
    message = whole["choices"][0]["message"]
    base = {
        "id": whole["id"],
        "object": "chat.completion.chunk",
        "created": whole["created"],
        "model": model,
    }
    include_usage = bool((request.get("stream_options") or {}).get("include_usage"))

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        body = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if include_usage:
            body["usage"] = None
        return body

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"reasoning_content": t}) for t in split_text(reply.reasoning or "", None)]
    chunks += [chunk(d) for d in state_deltas(reply, lambda text: split_text(text, None))]
    chunks += [chunk({"content": piece}) for piece in split_text(reply.content or "", reply.chunks)]
    for index, tool_call in enumerate(message.get("tool_calls", [])):
        function = tool_call["function"]
        header = {"index": index, "id": tool_call["id"], "type": "function"}
        chunks.append(
            chunk(
                {
                    "tool_calls": [
                        {**header, "function": {"name": function["name"], "arguments": ""}}
                    ]
                }
            )
        )
        chunks += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in split_text(function["arguments"], reply.chunks)
        ]
    chunks.append(chunk({}, whole["choices"][0]["finish_reason"]))
    if include_usage:
        chunks.append({**base, "choices": [], "usage": whole["usage"]})
    return chunks
