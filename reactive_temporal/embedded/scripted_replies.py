"""What a scripted model's script is made of: replies, tool calls, HTTP errors, dropped
connections, and the script that answers them in order (`ScriptedLLM.script`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ScriptedCall:
    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None
    """The call's id as the model sends it; None for a fresh `call_<12 hex>`."""


def call(
    name: str, raw_arguments: str | None = None, *, call_id: str | None = None, **arguments: Any
) -> ScriptedCall:
    """A tool call for a Reply; `raw_arguments` sends exactly that text (e.g. broken JSON),
    `call_id` an id of the test's choosing."""
    return ScriptedCall(name, raw_arguments if raw_arguments is not None else arguments, call_id)


@dataclass
class Reply:
    content: str | None = None
    tool_calls: list[ScriptedCall] = field(default_factory=list)
    delay: float = 0.0
    """Seconds to wait before answering (a slow model, or one slower than a timeout)."""
    usage: tuple[int, int] | None = None
    """(prompt, completion) tokens; estimated from the text when None."""
    chunks: int | None = None
    """Streamed requests: the content (and each tool call's arguments) in this many pieces;
    None means one piece per word, as a real model's tokens arrive."""
    chunk_delay: float = 0.0
    """Streamed requests: seconds between two chunks."""
    drop_after_chunks: int | None = None
    """Streamed requests: close the connection after this many content/tool chunks, with
    no finish chunk and no `[DONE]` (a stream cut off mid-answer)."""
    reasoning_tokens: int | None = None
    """Reported as `usage.completion_tokens_details.reasoning_tokens` (and counted in the
    completion tokens, as providers bill them) when set."""
    finish_reason: str | None = None
    """Why the model stopped, when not the usual `stop` / `tool_calls`: `length` (cut off at
    the output limit), `content_filter` (stopped by the provider's filter)."""
    reasoning: str | None = None
    """Thinking sent apart from the text, as `reasoning_content` (DeepSeek's API, vLLM with a
    reasoning parser); streamed in deltas of its own, before the text."""
    reasoning_details: list[dict[str, Any]] | None = None
    """OpenRouter's state of the turn, sent as `message.reasoning_details` and streamed in
    fragments as OpenRouter streams it (`reasoning_state`), after the thinking."""
    thinking_blocks: list[dict[str, Any]] | None = None
    """A LiteLLM proxy's (Anthropic with thinking), sent as `message.thinking_blocks` and
    streamed as LiteLLM streams it (`reasoning_state`), after the thinking."""


@dataclass
class HttpError:
    status: int
    message: str = "scripted error"
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] | list[Any] | None = None
    """The exact JSON body to answer with; None: a generic `{"error": {...}}` from `message`."""


@dataclass
class Drop:
    """Close the connection without answering."""


@dataclass
class Raw:
    """An answer written as bytes, whatever they are (an HTML page with status 200, a stream
    with an error object in it, one that trickles forever): `parts` in one chunked response,
    `part_delay` seconds apart."""

    parts: list[bytes]
    status: int = 200
    content_type: str = "text/event-stream"
    part_delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


Step = Reply | HttpError | Drop | Raw
Responder = Callable[[dict[str, Any]], Step]


class Script:
    """Steps answered in order; `repeat_last` keeps answering with the final step."""

    def __init__(self, steps: Iterable[Step], *, repeat_last: bool = False) -> None:
        self.steps = list(steps)
        self.repeat_last = repeat_last
        self.position = 0
        self.lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Step:
        with self.lock:
            if self.position >= len(self.steps):
                if self.repeat_last and self.steps:
                    return self.steps[-1]
                return HttpError(500, f"script exhausted after {len(self.steps)} steps")
            step = self.steps[self.position]
            self.position += 1
            return step
