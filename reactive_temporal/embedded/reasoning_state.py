"""State an endpoint attaches to a model's turn for itself and wants back on that turn, as the
scripted endpoint sends it and checks that it came back (`endpoint_rules.Endpoint.state_back`).

- OpenRouter: `message.reasoning_details`, an array of `reasoning.text` (text, signature),
  `reasoning.summary` and `reasoning.encrypted` (data) entries. Streamed, each entry comes in
  fragments under its `type` and `index`: a `reasoning.text` entry opens with an empty text and
  signature, its text follows piece by piece, its signature last, alone; other entries whole.
  Its docs ("Preserving reasoning blocks") say to send the array back as received with the
  assistant message; Anthropic's models with thinking and tools refuse a request without it.
- A LiteLLM proxy in front of Anthropic with thinking: `message.thinking_blocks`, `thinking`
  blocks (thinking, signature) and `redacted_thinking` ones (data). Streamed, without an
  index: one block per delta, a piece of its thinking with `signature: null`, then its
  signature with empty thinking; a redacted block whole.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from reactive_temporal.embedded.scripted_replies import HttpError, Reply

REASONING_DETAILS = "reasoning_details"
THINKING_BLOCKS = "thinking_blocks"
Pieces = Callable[[str], list[str]]

ANTHROPIC_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


def state_of(reply: Reply) -> dict[str, list[dict[str, Any]]]:
    """The state `reply` comes with, by field."""
    state = {REASONING_DETAILS: reply.reasoning_details, THINKING_BLOCKS: reply.thinking_blocks}
    return {name: value for name, value in state.items() if value is not None}


def state_deltas(reply: Reply, pieces: Pieces) -> list[dict[str, Any]]:
    """The deltas that stream `reply`'s state, each in a chunk of its own, as the endpoint
    streams it; `pieces(text)` splits a text as the reply's other text is split."""
    deltas: list[dict[str, Any]] = []
    for entry in reply.reasoning_details or []:
        deltas += [{REASONING_DETAILS: [f]} for f in _detail_fragments(entry, pieces)]
    for block in reply.thinking_blocks or []:
        deltas += [{THINKING_BLOCKS: [f]} for f in _block_fragments(block, pieces)]
    return deltas


def _detail_fragments(entry: dict[str, Any], pieces: Pieces) -> list[dict[str, Any]]:
    text_key = next((k for k in ("text", "summary") if isinstance(entry.get(k), str)), None)
    if text_key is None or not isinstance(entry.get("index"), int):
        return [entry]
    names = {k: v for k, v in entry.items() if k in ("type", "format", "index", "id")}
    parts = pieces(entry[text_key]) or [""]
    opening = {**entry, text_key: ""}
    if "signature" in entry:
        opening["signature"] = ""
    fragments = [opening, *({**names, text_key: p} for p in parts)]
    if entry.get("signature"):
        fragments.append({**names, "signature": entry["signature"]})
    return fragments


def _block_fragments(block: dict[str, Any], pieces: Pieces) -> list[dict[str, Any]]:
    if block.get("type") != "thinking" or not isinstance(block.get("thinking"), str):
        return [block]
    fragments: list[dict[str, Any]] = [
        {"type": "thinking", "thinking": p, "signature": None} for p in pieces(block["thinking"])
    ]
    if block.get("signature"):
        fragments.append({"type": "thinking", "thinking": "", "signature": block["signature"]})
    return fragments


def remembered(given: dict[str, Any], field: str, reply: Reply) -> Reply:
    """`reply`, its calls given ids where it left them to the endpoint, with what it comes
    with in `field` kept in `given` by each call's id (as it goes on the wire)."""
    state = state_of(reply).get(field)
    if state is None or not reply.tool_calls:
        return reply
    calls = [replace(c, id=c.id or f"call_{uuid.uuid4().hex[:12]}") for c in reply.tool_calls]
    for call in calls:
        given[str(call.id)] = json.loads(json.dumps(state))
    return replace(reply, tool_calls=calls)


def state_refused(
    messages: list[dict[str, Any]], field: str, given: dict[str, Any]
) -> HttpError | None:
    """The endpoint's 400 for the first model's turn whose calls came with state in `field`
    that does not carry it back exactly (none, or changed)."""
    turns = [m for m in messages if m.get("role") != "system"]  # Anthropic's numbering
    for i, message in enumerate(turns):
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            continue
        ids = [c.get("id") for c in message["tool_calls"] if isinstance(c, dict)]
        expected = next((given[c] for c in ids if c in given), None)
        if expected is None:
            continue
        sent = message.get(field)
        if sent is None:
            return _refusal(
                field,
                f"messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but "
                "found `tool_use`. When `thinking` is enabled, a final `assistant` message must "
                "start with a thinking block (preceeding the lastmost set of `tool_use` and "
                "`tool_result` blocks). We recommend you include thinking blocks from previous "
                "turns. To avoid this requirement, disable `thinking`. Please consult our "
                f"documentation at {ANTHROPIC_DOCS}",
            )
        if sent != expected:
            return _refusal(
                field, f"messages.{i}.content.0: Invalid `signature` in `thinking` block"
            )
    return None


def _refusal(field: str, anthropic_message: str) -> HttpError:
    """Anthropic's 400 as OpenRouter passes it on, or as LiteLLM's proxy does."""
    anthropic = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": anthropic_message},
    }
    if field == REASONING_DETAILS:
        body: dict[str, Any] = {
            "error": {
                "message": "Provider returned error",
                "code": 400,
                "metadata": {"raw": json.dumps(anthropic), "provider_name": "Anthropic"},
            }
        }
    else:
        body = {
            "error": {
                "message": "litellm.BadRequestError: AnthropicException - " + json.dumps(anthropic),
                "type": None,
                "param": None,
                "code": "400",
            }
        }
    return HttpError(400, str(body["error"]["message"]), body=body)
