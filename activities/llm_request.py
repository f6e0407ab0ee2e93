"""A chat-completions request as activities send it: its body, how long its HTTP call may take,
and the failure of one longer than the model's context window (`LlmEndpoint` sends it)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.exceptions import ApplicationError


def chat_request(
    model: str,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    reasoning_effort: str | None = None,
) -> dict[str, Any]:
    """A chat-completions request body; parameters left None are not sent.

    `temperature`, `max_tokens` and `reasoning_effort` are wishes: `LlmEndpoint.complete`
    sends them in the form the model accepts, or not at all.
    """
    request: dict[str, Any] = {"model": model, "messages": messages}
    if tools:
        request["tools"] = tools
    if temperature is not None:
        request["temperature"] = temperature
    if max_tokens is not None:
        request["max_tokens"] = max_tokens
    if reasoning_effort is not None:
        request["reasoning_effort"] = reasoning_effort
    return request


class ContextWindowExceeded(ApplicationError):
    """The endpoint said the request is longer than the model's context window."""

    def __init__(self, model: str, detail: str, limit: int | None) -> None:
        super().__init__(
            f"the request is longer than {model}'s context window"
            f"{f' ({limit:,} tokens)' if limit else ''}: {detail[:300]}",
            type="LlmContextWindowExceeded",
            non_retryable=True,
        )
        self.limit = limit


def client_timeout(activity_timeout: timedelta) -> float:
    """Give up on the HTTP call a little before Temporal gives up on the activity, so a hung
    call is seen here and counted against the LLM's attempts."""
    seconds = activity_timeout.total_seconds()
    return max(seconds - 2, seconds * 0.8)
