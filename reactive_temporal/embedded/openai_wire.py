"""The scripted model's side of OpenAI's chat-completions wire: a provider's 400s before a
script answers (`Endpoint`), a reply as a `chat.completion` body, and the same reply as the
`chat.completion.chunk` objects a streamed request gets."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from reactive_temporal.embedded.scripted_replies import HttpError, Reply


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def estimate_request_tokens(request: dict[str, Any]) -> int:
    """What a context-limited endpoint counts a request as: its messages and tool schemas."""
    tokens = _estimate_tokens(json.dumps(request.get("messages", [])))
    if request.get("tools"):
        tokens += _estimate_tokens(json.dumps(request["tools"]))
    return tokens


def invalid_request(message: str, *, param: str | None, code: str | None) -> HttpError:
    """An HTTP 400 with OpenAI's error body shape."""
    body = {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": param,
            "code": code,
        }
    }
    return HttpError(400, message, body=body)


def _call_ids_refused(messages: list[dict[str, Any]]) -> HttpError | None:
    ids: list[str] = []
    for i, message in enumerate(messages):
        for call in message.get("tool_calls") or []:
            if call.get("id") in ids:
                return invalid_request(
                    f"messages.{i}.content: tool_use ids must be unique", param=None, code=None
                )
            ids.append(call.get("id"))
        answered = message.get("tool_call_id")
        if message.get("role") == "tool" and answered not in ids:
            return invalid_request(
                f"messages.{i}: unexpected tool_use_id found in tool_result blocks: {answered}",
                param=None,
                code=None,
            )
    return None


CALL_ID_MAX_CHARS = 40
"""OpenAI's limit on a tool call id in a request's history."""


def _pairing_refused(messages: list[dict[str, Any]]) -> HttpError | None:
    """OpenAI's 400 for a request whose tool calls and results do not pair: each assistant
    message with `tool_calls` followed at once by a `tool` message for each of its ids, and
    every `tool` message answering a call of that assistant message; ids at most 40
    characters."""
    waiting: dict[str, None] = {}  # the ids of the calls not answered yet, in order
    answerable: set[str] = set()
    asked_at = 0
    for i, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            answered = message.get("tool_call_id")
            if answered not in answerable:
                return invalid_request(
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",
                    param=f"messages.[{i}].role",
                    code=None,
                )
            waiting.pop(answered, None)
            continue
        if waiting:
            return invalid_request(
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(waiting)}",
                param=f"messages.[{asked_at}].role",
                code=None,
            )
        calls = (message.get("tool_calls") or []) if role == "assistant" else []
        for j, call in enumerate(calls):
            given = str(call.get("id") or "")
            if len(given) > CALL_ID_MAX_CHARS:
                return invalid_request(
                    f"Invalid 'messages[{i}].tool_calls[{j}].id': string too long. Expected a "
                    f"string with maximum length {CALL_ID_MAX_CHARS}, but got a string with "
                    f"length {len(given)} instead.",
                    param=f"messages[{i}].tool_calls[{j}].id",
                    code="string_above_max_length",
                )
        waiting = {str(c.get("id")): None for c in calls}
        answerable, asked_at = set(waiting), i
    if waiting:
        return invalid_request(
            "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. The following tool_call_ids did not have "
            f"response messages: {', '.join(waiting)}",
            param=f"messages.[{asked_at}].role",
            code=None,
        )
    return None


def template_error(message: str) -> HttpError:
    """vLLM's 400 when the model's chat template raised (`raise_exception` in its Jinja)."""
    body = {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}}
    return HttpError(400, message, body=body)


ALTERNATE = (
    "After the optional system message, conversation roles must alternate "
    "user/assistant/user/assistant/..."
)
SYSTEM_FIRST = (
    "Only user and assistant roles are supported, with the exception of an initial optional "
    "system message!"
)


def _alternation_refused(messages: list[dict[str, Any]]) -> HttpError | None:
    """A strict chat template's refusal (Mistral-7B-Instruct's, Gemma's, Llama 2's, as vLLM
    or LM Studio render them): a system message only first; after it the conversation's
    turns alternate user/assistant, beginning with the user. Tool results and the assistant
    messages that make calls are left out of the count, as Mistral's templates with tools
    leave them."""
    turns = messages[1:] if messages and messages[0].get("role") == "system" else messages
    index = 0
    for message in turns:
        role = message.get("role")
        if role == "system":
            return template_error(SYSTEM_FIRST)
        if role == "tool" or message.get("tool_calls"):
            continue
        if (role == "user") != (index % 2 == 0):
            return template_error(ALTERNATE)
        index += 1
    return None


def _last_role_refused(messages: list[dict[str, Any]]) -> HttpError | None:
    """Mistral's 400 for a request that ends with the model's own turn (without `prefix`)."""
    last = messages[-1] if messages else {}
    if last.get("role") in ("user", "tool") or last.get("prefix"):
        return None
    message = (
        "Expected last role User or Tool (or Assistant with prefix True) for serving but got "
        f"{last.get('role')}"
    )
    body = {
        "object": "error",
        "message": message,
        "type": "invalid_request_message_order",
        "param": None,
        "code": "3230",
    }
    return HttpError(400, message, body=body)


def _json_object(text: object) -> bool:
    try:
        return isinstance(text, str) and isinstance(json.loads(text), dict)
    except ValueError:
        return False


def _listed(values: Iterable[str]) -> str:
    quoted = [f"'{v}'" for v in values]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + f", and {quoted[-1]}"


@dataclass
class Endpoint:
    """How a provider treats a model's requests, checked before the model's script answers.

    Each refusal is the provider's own HTTP 400 body, so code that learns from those bodies is
    tested against what it will meet. `Endpoint.reasoning_model()` is an OpenAI o-series or
    gpt-5 model.
    """

    unsupported_parameters: dict[str, str] = field(default_factory=dict)
    """Parameter → advice appended to the message; sending it at all is a 400
    `unsupported_parameter`."""
    default_only: dict[str, float] = field(default_factory=dict)
    """Parameter → its only accepted value; any other value is a 400 `unsupported_value`."""
    unrecognized: tuple[str, ...] = ()
    """Parameters refused the older way: `param: null`, "Unrecognized request argument
    supplied: X" (what OpenAI-compatible servers often answer)."""
    reasoning_efforts: tuple[str, ...] | None = None
    """Accepted `reasoning_effort` values; None: the parameter is not checked."""
    reasoning_tokens: int | None = None
    """Reasoning tokens reported with every reply (and billed as completion tokens)."""
    context_tokens: int | None = None
    """The context window: a request whose estimated tokens (plus the output it asks for)
    exceed it is a 400 `context_length_exceeded`."""
    content_required: bool = False
    """OpenAI's rule: an assistant message with no tool calls must have text (`content:
    null` alone is a 400)."""
    nonblank_text: bool = False
    """Anthropic's rule: no message's text may be empty or only whitespace, but the last
    message's, an assistant's to continue."""
    unique_call_ids: bool = False
    """Anthropic's rule: no tool call id twice in a request's history, and every tool
    result answering a call made before it."""
    parses_arguments: bool = False
    """A server that parses the arguments of the tool calls a request's assistant messages
    hold (vLLM and Ollama do, for their chat templates): any that is not a JSON object is a
    400."""

    pairs_tool_calls: bool = False
    """OpenAI's rule: an assistant message's tool calls answered by `tool` messages right
    after it, one for each id, before any other message; a `tool` message only for a call of
    the assistant message before it; call ids at most 40 characters."""
    alternating_roles: bool = False
    """A strict chat template's rule (Mistral-7B-Instruct, Gemma, Llama 2 under vLLM): a
    system message only first, then user and assistant turns alternating, user first (tool
    results and calling turns not counted)."""
    last_user_or_tool: bool = False
    """Mistral's rule: the last message is the user's or a tool result, never the model's."""

    @classmethod
    def reasoning_model(
        cls, *, reasoning_tokens: int = 64, context_tokens: int | None = None
    ) -> Endpoint:
        return cls(
            unsupported_parameters={"max_tokens": "Use 'max_completion_tokens' instead."},
            default_only={"temperature": 1, "top_p": 1},
            reasoning_efforts=("minimal", "low", "medium", "high"),
            reasoning_tokens=reasoning_tokens,
            context_tokens=context_tokens,
        )

    def check(self, request: dict[str, Any]) -> HttpError | None:
        """The provider's 400 for this request, or None when it would be served."""
        for name in self.unrecognized:
            if name in request:
                return invalid_request(
                    f"Unrecognized request argument supplied: {name}", param=None, code=None
                )
        for name, advice in self.unsupported_parameters.items():
            if name in request:
                message = f"Unsupported parameter: '{name}' is not supported with this model."
                return invalid_request(
                    f"{message} {advice}".strip(), param=name, code="unsupported_parameter"
                )
        for name, default in self.default_only.items():
            value = request.get(name)
            if value is not None and value != default:
                return invalid_request(
                    f"Unsupported value: '{name}' does not support {value} with this model. "
                    f"Only the default ({default}) value is supported.",
                    param=name,
                    code="unsupported_value",
                )
        effort = request.get("reasoning_effort")
        if self.reasoning_efforts is not None and effort is not None:
            if effort not in self.reasoning_efforts:
                return invalid_request(
                    f"Unsupported value: 'reasoning_effort' does not support '{effort}' with "
                    f"this model. Supported values are: {_listed(self.reasoning_efforts)}.",
                    param="reasoning_effort",
                    code="unsupported_value",
                )
        return self._check_messages(request) or self._check_context(request)

    def _check_messages(self, request: dict[str, Any]) -> HttpError | None:
        messages = request.get("messages") or []
        if self.unique_call_ids and (refused := _call_ids_refused(messages)) is not None:
            return refused
        if self.pairs_tool_calls and (refused := _pairing_refused(messages)) is not None:
            return refused
        if self.alternating_roles and (refused := _alternation_refused(messages)) is not None:
            return refused
        if self.last_user_or_tool and (refused := _last_role_refused(messages)) is not None:
            return refused
        for i, message in enumerate(messages):
            content = message.get("content")
            if (
                self.content_required
                and message.get("role") == "assistant"
                and content is None
                and not message.get("tool_calls")
            ):
                return invalid_request(
                    "Invalid value for 'content': expected a string, got null.",
                    param=f"messages.[{i}].content",
                    code=None,
                )
            if self.parses_arguments and not all(
                _json_object(c.get("function", {}).get("arguments"))
                for c in message.get("tool_calls") or []
            ):
                return invalid_request("invalid tool call arguments", param=None, code=None)
            last = i == len(messages) - 1 and message.get("role") == "assistant"
            texts = message.get("role") in ("system", "user", "assistant")
            blank = isinstance(content, str) and not content.strip()
            if self.nonblank_text and texts and blank and not last:
                return invalid_request(
                    "messages: text content blocks must contain non-whitespace text",
                    param=None,
                    code=None,
                )
        return None

    def _check_context(self, request: dict[str, Any]) -> HttpError | None:
        if self.context_tokens is None:
            return None
        prompt = estimate_request_tokens(request)
        output = request.get("max_completion_tokens") or request.get("max_tokens") or 0
        limit = self.context_tokens
        if prompt > limit:
            message = (
                f"This model's maximum context length is {limit} tokens. However, your messages "
                f"resulted in {prompt} tokens. Please reduce the length of the messages."
            )
        elif prompt + output > limit:
            message = (
                f"This model's maximum context length is {limit} tokens. However, you requested "
                f"{prompt + output} tokens ({prompt} in the messages, {output} in the "
                "completion). Please reduce the length of the messages or completion."
            )
        else:
            return None
        return invalid_request(message, param="messages", code="context_length_exceeded")

    def shape(self, reply: Reply, request: dict[str, Any]) -> Reply:
        """The reply as this endpoint reports it: reasoning tokens, prompt tokens counted the
        way its context window counts them."""
        changes: dict[str, Any] = {}
        if self.reasoning_tokens is not None and reply.reasoning_tokens is None:
            changes["reasoning_tokens"] = self.reasoning_tokens
        if self.context_tokens is not None and reply.usage is None:
            calls = json.dumps([[c.name, c.arguments] for c in reply.tool_calls])
            completion = _estimate_tokens((reply.content or "") + calls)
            changes["usage"] = (estimate_request_tokens(request), completion)
        return replace(reply, **changes) if changes else reply


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
    if tool_calls:
        message["tool_calls"] = tool_calls
    prompt, completion = reply.usage or (
        _estimate_tokens(json.dumps(request.get("messages", []))),
        _estimate_tokens((reply.content or "") + json.dumps(message.get("tool_calls", []))),
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
