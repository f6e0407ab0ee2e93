"""An LLM request that ends without the endpoint's usage is still counted, as an estimate,
when the provider is likely to bill it: stopped with its run, timed out, or cut off after
text arrived. A refused request (a 4xx, a connection never made) is not."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from openai.types.chat import ChatCompletion
from temporalio.exceptions import ApplicationError

from activities.llm_usage import usage_of
from reactive_temporal.context_window import wire_prompt_tokens
from reactive_temporal.telemetry.metrics import REGISTRY
from reactive_temporal.telemetry.observe import observe_llm_call

REQUEST = {
    "model": "m",
    "messages": [
        {"role": "system", "content": "x" * 300},
        {"role": "user", "content": "y" * 600},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "arguments": "{}"}]},
    ],
    "tools": [{"type": "function", "function": {"name": "calculator"}}],
}


def unreported(model: str) -> tuple[float, float, float]:
    def sample(name: str, labels: dict[str, str]) -> float:
        return REGISTRY.get_sample_value(name, {"model": model, **labels}) or 0.0

    return (
        sample("reactive_temporal_llm_unreported_tokens_total", {"kind": "input"}),
        sample("reactive_temporal_llm_unreported_tokens_total", {"kind": "output"}),
        sample("reactive_temporal_llm_unreported_cost_usd_total", {}),
    )


def per_token(input_tokens: int, output_tokens: int) -> float:
    return input_tokens * 1.0 + output_tokens * 10.0


def test_the_prompt_is_estimated_from_the_request_as_sent():
    estimate = wire_prompt_tokens(REQUEST)
    assert 300 <= estimate <= 420  # 900 characters of text at 3 a token, and the overheads
    assert wire_prompt_tokens({"messages": "not a list"}) == 0


def test_a_stopped_request_counts_its_prompt_and_the_text_that_arrived():
    model = f"stopped-{uuid.uuid4().hex[:6]}"
    with pytest.raises(asyncio.CancelledError):
        with observe_llm_call(model, priced=per_token) as call:
            call.sent(REQUEST)
            call.streamed("a" * 30)
            raise asyncio.CancelledError
    tokens_in, tokens_out, cost = unreported(model)
    assert (tokens_in, tokens_out) == (wire_prompt_tokens(REQUEST), 10)
    assert cost == per_token(int(tokens_in), 10)


def test_a_request_cut_off_after_text_arrived_counts():
    model = f"cut-{uuid.uuid4().hex[:6]}"
    with pytest.raises(ApplicationError):
        with observe_llm_call(model) as call:
            call.sent(REQUEST)
            call.streamed("partial")
            raise ApplicationError("LLM endpoint unreachable: dropped", type="LlmConnectionError")
    assert unreported(model)[:2] == (wire_prompt_tokens(REQUEST), 3)


def test_a_timed_out_request_counts_its_prompt():
    model = f"slow-{uuid.uuid4().hex[:6]}"
    with pytest.raises(ApplicationError):
        with observe_llm_call(model) as call:
            call.sent(REQUEST)
            call.timed_out = True
            raise ApplicationError("LLM endpoint unreachable: timed out")
    assert unreported(model)[:2] == (wire_prompt_tokens(REQUEST), 0)


@pytest.mark.parametrize("sent", [True, False])
def test_refused_or_unsent_requests_and_answered_ones_do_not_count(sent: bool):
    refused = f"refused-{uuid.uuid4().hex[:6]}"
    with pytest.raises(ApplicationError):
        with observe_llm_call(refused) as call:
            if sent:
                call.sent(REQUEST)
            raise ApplicationError("LLM endpoint answered HTTP 400", non_retryable=True)
    never_sent = f"unsent-{uuid.uuid4().hex[:6]}"
    with pytest.raises(asyncio.CancelledError):
        with observe_llm_call(never_sent):
            raise asyncio.CancelledError
    answered = f"answered-{uuid.uuid4().hex[:6]}"
    with observe_llm_call(answered) as call:
        call.sent(REQUEST)
        call.streamed("whole reply")
        call.succeeded(input_tokens=5, output_tokens=2, cost_usd=0.0)
    assert unreported(refused) == unreported(never_sent) == unreported(answered) == (0, 0, 0)


def _reply(usage: object) -> ChatCompletion:
    """A reply as the openai client builds one: unvalidated, whatever the endpoint sent."""
    fields: dict[str, Any] = {
        "id": "r",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "z" * 300},
            }
        ],
        "usage": usage,
    }
    return ChatCompletion.construct(**fields)


@pytest.mark.parametrize(
    "usage",
    [
        {},
        {"total_tokens": 1100},
        {"prompt_tokens": -1000, "completion_tokens": "NaN"},
        {"prompt_tokens": 1000.5, "completion_tokens": 1e300},
    ],
)
def test_usage_that_is_no_count_is_estimated_side_by_side(usage):
    """A usage object whose counts are missing or not counts was taken as zero tokens and
    $0: token and cost budgets were never reached."""
    counted = usage_of(_reply(usage), REQUEST)
    assert counted.estimated
    assert counted.prompt_tokens == wire_prompt_tokens(REQUEST)
    assert counted.completion_tokens > 0


def test_usage_is_read_under_either_name_and_its_parts_within_their_whole():
    reported = usage_of(
        _reply(
            {
                "input_tokens": 1000,
                "output_tokens": 100,
                "prompt_tokens_details": {"cached_tokens": 5000},
                "completion_tokens_details": {"reasoning_tokens": 10**18},
            }
        ),
        REQUEST,
    )
    assert (reported.prompt_tokens, reported.completion_tokens) == (1000, 100)
    assert (reported.cached_tokens, reported.reasoning_tokens) == (1000, 100)
    assert not reported.estimated
    half = usage_of(_reply({"prompt_tokens": 1000, "completion_tokens": 0}), REQUEST)
    assert half.prompt_tokens == 1000 and half.completion_tokens > 0 and half.estimated


@pytest.mark.parametrize(
    "cached",
    [{"prompt_tokens_details": {"cached_tokens": 900}},  # OpenAI's
     {"prompt_cache_hit_tokens": 900, "prompt_cache_miss_tokens": 100},  # DeepSeek's
     {"cached_tokens": 900},  # Moonshot's (Kimi)
     {"cache_read_input_tokens": 900},  # Anthropic's, through a gateway
     {"input_tokens_details": {"cached_tokens": 900}},  # the Responses API's
     {"prompt_tokens_details": {"cached_tokens": 0}, "prompt_cache_hit_tokens": 900}],
)  # fmt: skip
def test_cached_tokens_are_read_in_each_provider_s_field(cached: dict[str, Any]):
    """DeepSeek and Kimi say what they read from their cache in fields of their own: read
    in OpenAI's alone, their cached prompt was priced as uncached (an agent's steps resend
    their whole prefix: most of a run's prompt tokens)."""
    usage = {"prompt_tokens": 1000, "completion_tokens": 10, **cached}
    assert usage_of(_reply(usage), REQUEST).cached_tokens == 900
    assert usage_of(_reply({**usage, "prompt_tokens": 500}), REQUEST).cached_tokens == 500


def test_thinking_left_out_of_completion_tokens_counts_from_the_total():
    """Gemini reports thinking in `total_tokens` only: it was billed and counted nowhere."""
    usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 610}
    counted = usage_of(_reply(usage), REQUEST)
    assert (counted.prompt_tokens, counted.completion_tokens) == (100, 510)
    assert counted.reasoning_tokens == 500 and not counted.estimated
    usual = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
    assert usage_of(_reply(usual), REQUEST).completion_tokens == 10
