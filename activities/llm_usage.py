"""What one LLM reply is counted as: its tokens as the endpoint reported them, read in every
shape providers send, or estimated where it sent none (a reply is billed either way); and a
prompt count too low for the request it answered, said (`prompt_count_low`).
"""

from __future__ import annotations

from typing import Any

from openai.types.chat import ChatCompletion
from temporalio import activity

from activities.reply_calls import arguments_text
from reactive_temporal.context_window import (
    count_implausibly_low,
    estimate_tokens,
    wire_prompt_tokens,
)
from reactive_temporal.contracts.run import Usage
from reactive_temporal.telemetry.metrics import record_adaptation

MAX_TOKENS_PER_CALL = 100_000_000
"""A count an endpoint reports for one call is taken up to this (no model reads or writes
near it): a usage of 10**30 went into budgets, metrics and the store's columns as it was."""


def _count(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return min(value, MAX_TOKENS_PER_CALL)
    return 0


def usage_of(response: ChatCompletion, request: dict[str, Any]) -> Usage:
    """The call's token usage as the endpoint reported it (`prompt_tokens`, or
    `input_tokens` as some name it), each side estimated where it reported none or one that
    is no count (`{}`, -1000, "NaN", 1.5: each counted zero, budgets were never reached);
    estimated whole when it reported no usage (`estimated_usage`). A `total_tokens` above
    the two sides counts the rest as reasoning output: endpoints that leave thinking out of
    `completion_tokens` bill it all the same."""
    usage = getattr(response, "usage", None)
    if usage is None:
        return estimated_usage(request, response)
    prompt = _count(getattr(usage, "prompt_tokens", None)) or _count(
        getattr(usage, "input_tokens", None)
    )
    completion = _count(getattr(usage, "completion_tokens", None)) or _count(
        getattr(usage, "output_tokens", None)
    )
    estimated = False
    if not prompt or not completion:
        estimate = estimated_usage(request, response)
        if not prompt:
            prompt, estimated = estimate.prompt_tokens, True
        if not completion and estimate.completion_tokens:
            completion, estimated = estimate.completion_tokens, True
    details = getattr(usage, "completion_tokens_details", None)
    reasoning = _count(getattr(details, "reasoning_tokens", 0))
    unreported = _count(getattr(usage, "total_tokens", None)) - prompt - completion
    if unreported > 0 and not estimated:  # thinking billed outside `completion_tokens`
        completion = min(completion + unreported, MAX_TOKENS_PER_CALL)  # (Gemini's)
        reasoning = max(reasoning, unreported)
    cached = cached_tokens_of(usage)
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        reasoning_tokens=min(reasoning, completion),
        cached_tokens=min(cached, prompt),
        estimated=estimated,
    )


def _field(value: object, name: str) -> object:
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)


CACHED_FIELDS = (
    ("prompt_tokens_details", "cached_tokens"),  # OpenAI's, and most others'
    ("prompt_cache_hit_tokens",),  # DeepSeek's
    ("cached_tokens",),  # Moonshot's (Kimi)
    ("cache_read_input_tokens",),  # Anthropic's, as gateways pass it on
    ("input_tokens_details", "cached_tokens"),  # the Responses API's, as gateways pass it on
)


def cached_tokens_of(usage: object) -> int:
    """The prompt tokens a reply's usage says were read from the provider's cache, in
    whichever field its provider puts them (CACHED_FIELDS): read in OpenAI's alone, DeepSeek's
    and Kimi's were priced as uncached, and an agent's steps repeat their whole prefix, so
    their cost (and a cost budget's end) came to several times what was billed."""
    for path in CACHED_FIELDS:
        value: object = usage
        for name in path:
            value = _field(value, name)
        if counted := _count(value):
            return counted
    return 0


def estimated_usage(request: dict[str, Any], response: ChatCompletion) -> Usage:
    """What a reply whose endpoint reported no usage cost, estimated as the context window
    estimates: the request as sent, the reply's text and calls. Counted as zero, the run's
    token and cost budgets were never reached on an endpoint that reports none (many ignore
    `stream_options` and never send the usage chunk)."""
    output = 0
    for choice in getattr(response, "choices", None) or []:
        message = choice.message
        output += estimate_tokens(message.content)
        for call in message.tool_calls or []:
            function = getattr(call, "function", None)
            if function is not None:
                name = function.name if isinstance(function.name, str) else ""
                output += estimate_tokens(name + arguments_text(function.arguments))
    return Usage(
        prompt_tokens=wire_prompt_tokens(request), completion_tokens=output, estimated=True
    )


def prompt_count_low(
    model: str, usage: Usage, request: dict[str, Any], warned: set[str] | None = None
) -> bool:
    """Whether the endpoint counted fewer prompt tokens than the request as sent can hold
    (`context_window.count_implausibly_low`): counted each time (the `prompt_count_low`
    adaptation), and said once per model of `warned` (the worker's) with what to do. Nothing
    else shows it: a server that cuts prompts to its context length answers as if whole.

    The usage stays as reported (billing, budgets and metrics take the endpoint's word); the
    next step's estimate of how full its request is distrusts it (`estimate_prompt`)."""
    sent = wire_prompt_tokens(request)
    if not count_implausibly_low(usage.prompt_tokens, sent):
        return False
    record_adaptation(model, "prompt_count_low")
    if warned is not None and model not in warned:
        warned.add(model)
        activity.logger.warning(
            "model %s: the endpoint counted %d prompt tokens for a request of about %d "
            "(estimated at 3 characters a token): it may be cutting prompts to its context "
            "length (Ollama: raise num_ctx / OLLAMA_CONTEXT_LENGTH; LM Studio: its context "
            "length) — set context_tokens for %s in AGENT_MODEL_CAPABILITIES to its real "
            "window. (Or it leaves cached tokens out of its count.) This worker estimates "
            "such requests itself.",
            model,
            usage.prompt_tokens,
            sent,
            model,
        )
    return True
