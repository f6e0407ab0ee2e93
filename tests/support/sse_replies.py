"""Replies a gateway or a provider writes on the wire, for the scripted server's `Raw`:
streamed chunks, the events of an SSE stream, an unstreamed body as JSON."""

from __future__ import annotations

import json
from typing import Any

from reactive_temporal.embedded.scripted_llm import Raw

USAGE = {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}


def chunk(delta: dict[str, Any], finish: str | None = None, **choice: object) -> dict[str, Any]:
    """A `chat.completion.chunk` whose one choice carries `delta` (and `choice`'s fields)."""
    return {
        "id": "gen-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, **choice}],
    }


def sse(*events: object, done: bool = True) -> Raw:
    """Each event as a `data:` line of a 200's stream, `data: [DONE]` last (unless not
    `done`)."""
    lines = [f"data: {json.dumps(e)}\n\n".encode() for e in events]
    return Raw([*lines, *([b"data: [DONE]\n\n"] if done else [])])


def whole(
    finish: str | None, message: dict[str, Any], choice: dict[str, Any] | None = None, **extra: Any
) -> Raw:
    """An unstreamed 200: one choice with `message`, `USAGE` unless `extra` says otherwise."""
    body = {
        "id": "gen-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, **(choice or {})}],
        "usage": USAGE,
        **extra,
    }
    return Raw([json.dumps(body).encode()], content_type="application/json")
