"""An LLM request that ends without the endpoint's usage is still counted, as an estimate,
when the provider is likely to bill it: stopped with its run, timed out, or cut off after
text arrived. A refused request (a 4xx, a connection never made) is not."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.exceptions import ApplicationError

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
