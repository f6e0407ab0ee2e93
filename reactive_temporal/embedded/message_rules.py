"""Providers' rules on the shape of a request's messages, each answering the provider's own
400: what the scripted endpoint (`endpoint_rules.Endpoint`) checks before a script answers, so
request shaping is tested against what real endpoints refuse.
"""

from __future__ import annotations

from typing import Any

from reactive_temporal.embedded.scripted_replies import HttpError


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


def call_ids_refused(messages: list[dict[str, Any]]) -> HttpError | None:
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


def _unanswered(waiting: dict[str, None], asked_at: int) -> HttpError:
    """OpenAI's 400 for calls of the message at `asked_at` that no result answers."""
    return invalid_request(
        "An assistant message with 'tool_calls' must be followed by tool messages "
        "responding to each 'tool_call_id'. The following tool_call_ids did not have "
        f"response messages: {', '.join(waiting)}",
        param=f"messages.[{asked_at}].role",
        code=None,
    )


def pairing_refused(messages: list[dict[str, Any]]) -> HttpError | None:
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
            return _unanswered(waiting, asked_at)
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
        return _unanswered(waiting, asked_at)
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


def alternation_refused(messages: list[dict[str, Any]]) -> HttpError | None:
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


def mistral_error(message: str) -> HttpError:
    """Mistral's API's 400 for a request whose messages it refuses."""
    body = {
        "object": "error",
        "message": message,
        "type": "invalid_request_message_order",
        "param": None,
        "code": "3230",
    }
    return HttpError(400, message, body=body)


def role_order_refused(messages: list[dict[str, Any]]) -> HttpError | None:
    """Mistral's rule on which role may follow which (its API's and mistral-common's): after
    a tool result only another result or the model's turn."""
    for previous, message in zip(messages, messages[1:], strict=False):
        if previous.get("role") == "tool" and message.get("role") not in ("tool", "assistant"):
            return mistral_error(f"Unexpected role '{message.get('role')}' after role 'tool'")
    return None


NINE_CHAR_IDS = "Tool call IDs should be alphanumeric strings with length 9!"


def call_id_shape_refused(messages: list[dict[str, Any]]) -> HttpError | None:
    """Mistral's templates' rule on call ids (vLLM renders it): nine letters and digits, in
    each call and in each result."""
    for message in messages:
        given = [c.get("id") for c in message.get("tool_calls") or []]
        if message.get("role") == "tool":
            given.append(message.get("tool_call_id"))
        if not all(isinstance(i, str) and len(i) == 9 and i.isalnum() for i in given):
            return template_error(NINE_CHAR_IDS)
    return None


def last_role_refused(messages: list[dict[str, Any]]) -> HttpError | None:
    """Mistral's 400 for a request that ends with the model's own turn (without `prefix`)."""
    last = messages[-1] if messages else {}
    if last.get("role") in ("user", "tool") or last.get("prefix"):
        return None
    return mistral_error(
        "Expected last role User or Tool (or Assistant with prefix True) for serving but got "
        f"{last.get('role')}"
    )
