"""An error object a 200 carries in place of (the rest of) its reply that says what a status
would have, over real HTTP: a context window passed is the refusal a 400 is (compacted and
sent again, the window learned), a rate limit is waited out as a 429 is (its wait, when the
object asks one, kept), not the model failing, counted against its attempts."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError

from activities.llm_calls import LlmEndpoint
from activities.llm_request import ContextWindowExceeded, chat_request
from reactive_temporal.config import Settings
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, Step
from reactive_temporal.hosting.worker_factory import llm_client
from tests.support.sse_replies import chunk, sse, whole
from tests.support.steps import attempt
from tests.workflow.conftest import Harness

pytestmark = [pytest.mark.faults, pytest.mark.workflow]

HALF = {"role": "assistant", "content": "FINAL ANSWER: The tallest"}


def openrouter_429(wait_seconds: float) -> dict[str, Any]:
    """OpenRouter's rate limit: the status as `code`, the limit's headers in `metadata`
    (`X-RateLimit-Reset` in epoch milliseconds)."""
    reset = int((time.time() + wait_seconds) * 1000)
    return {
        "code": 429,
        "message": "Rate limit exceeded: free-models-per-min.",
        "metadata": {
            "headers": {
                "X-RateLimit-Limit": "20",
                "X-RateLimit-Remaining": "0",
                "X-RateLimit-Reset": str(reset),
            }
        },
    }


def rate_limits() -> dict[str, tuple[Step, float]]:
    """Each rate limit sent in a 200, with the wait it asks for (seconds)."""
    groq = {
        "message": "Rate limit reached for model `llama-3.3-70b-versatile` on tokens per "
        "minute (TPM): Limit 6000, Used 5800, Requested 900. Please try again in 7.5s.",
        "type": "tokens",
        "code": "rate_limit_exceeded",
    }
    anthropic_raw = json.dumps(
        {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    )
    via_gateway = {
        "code": 502,
        "message": "Provider returned error",
        "metadata": {"raw": anthropic_raw, "provider_name": "Anthropic"},
    }
    return {
        # OpenRouter, mid-stream: `data: {"error": …}` in place of the rest
        "streamed, in place of the rest": (
            sse(chunk(HALF), {"error": openrouter_429(20)}),
            20,
        ),
        # in the last chunk's choice, finish_reason "error"
        "streamed, in the choice": (
            sse(chunk(HALF), chunk({}, "error", error={**groq, "code": 429})),
            7.5,
        ),
        # unstreamed, the error in the choice, the provider's own under metadata.raw
        "whole, the provider's own in the choice": (
            whole("error", HALF, {"error": via_gateway}),
            0,
        ),
        "whole, beside the choices": (whole("error", HALF, error=groq), 7.5),
    }


@pytest.mark.parametrize("name", list(rate_limits()))
async def test_a_rate_limit_in_a_200_is_waited_out_as_a_429(
    name: str, settings: Settings, llm: ScriptedLLM, model_name: str
):
    """The error said 429 (or rate limit) and was counted as a bad reply: on an agent's last
    attempt the run ended `llm_error` at once, where a 429 is waited out for its patience;
    the wait the object asked for was not kept."""
    step, asked = rate_limits()[name]
    llm.script(model_name, [step])
    endpoint = LlmEndpoint(llm_client(settings, llm.base_url))
    request = chat_request(model_name, [{"role": "user", "content": "hi"}])
    streamed = name.startswith("streamed")
    try:
        with pytest.raises(ApplicationError) as limited:
            await attempt(1).run(
                endpoint.complete,
                request,
                max_attempts=1,
                on_text=(lambda _: None) if streamed else None,
            )
    finally:
        await endpoint.close()
    err = limited.value
    assert (err.type, err.non_retryable) == ("LlmHttpError", False), err
    assert "rate limited" in str(err), err
    waited = err.next_retry_delay
    assert waited is not None and asked - 1 <= waited.total_seconds() <= asked * 1.5 + 1, waited


OVERFLOW = {
    "code": "context_length_exceeded",
    "message": "This model's maximum context length is 8192 tokens. However, your messages "
    "resulted in 9000 tokens. Please reduce the length of the messages.",
}
ANTHROPIC_RAW = json.dumps(
    {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 210000 tokens > 200000 maximum",
        },
    }
)
OVERFLOWS: dict[str, tuple[Step, int]] = {
    "streamed, in place of the rest": (sse(chunk(HALF), {"error": OVERFLOW}), 8192),
    "streamed, in the choice": (
        sse(
            chunk(HALF),
            chunk(
                {},
                "error",
                error={
                    "code": 400,
                    "message": "Provider returned error",
                    "metadata": {"raw": ANTHROPIC_RAW},
                },
            ),
        ),
        200_000,
    ),
    "whole, in the choice": (whole("error", HALF, {"error": OVERFLOW}), 8192),
}


@pytest.mark.parametrize("name", list(OVERFLOWS))
async def test_a_context_overflow_in_a_200_is_an_overflow(
    name: str, settings: Settings, llm: ScriptedLLM, model_name: str
):
    """The error said the request was too long for the window: counted as a bad reply, the
    step asked again with the same request until its attempts ran out, where a 400 saying it
    has the step compact and go again, and the window learned."""
    step, window = OVERFLOWS[name]
    llm.script(model_name, [step])
    endpoint = LlmEndpoint(llm_client(settings, llm.base_url))
    request = chat_request(model_name, [{"role": "user", "content": "hi"}])
    streamed = name.startswith("streamed")
    try:
        with pytest.raises(ContextWindowExceeded) as refused:
            await attempt(1).run(
                endpoint.complete,
                request,
                max_attempts=2,
                on_text=(lambda _: None) if streamed else None,
            )
    finally:
        await endpoint.close()
    assert refused.value.limit == window
    assert f"context {window}" in endpoint.quirks.learned()[model_name]


async def test_a_run_rate_limited_mid_stream_goes_on_past_its_llm_attempts(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """OpenRouter's 429 mid-stream, then an unstreamed 200 rate limit with its bill, for an
    agent with one LLM attempt: the run ended `llm_error` at the first. Now both are waited
    out, and the billed one is counted in the run's usage."""
    limited_whole = whole("error", HALF, {"error": {"code": 429, "message": "Rate limit"}})
    llm.script(
        model_name,
        [
            sse(chunk(HALF), {"error": openrouter_429(0)}),
            limited_whole,
            Reply("FINAL ANSWER: 42", usage=(10, 5)),
        ],
    )
    result = await asyncio.wait_for(
        harness.run(model_name, "How tall?", llm_max_attempts=1, memory=False, live_output=True),
        60,
    )
    assert (result.terminated_by, result.output) == ("final_answer", "42"), result
    assert len(llm.requests[model_name]) == 3
    assert result.metadata.prompt_tokens == 1010, result.metadata


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_200_whose_whole_body_is_a_rate_limit_is_waited_out(
    streamed: bool, settings: Settings, llm: ScriptedLLM, model_name: str
):
    """A gateway's 200 whose body is nothing but an error object (asked to stream, or not)
    was a reply that could not be read, counted against the model's attempts, also when it
    said the provider was rate limited or the request too long."""
    limited = whole(None, HALF)
    limited.parts = [json.dumps({"error": openrouter_429(5)}).encode()]
    over = whole(None, HALF)
    over.parts = [json.dumps({"error": OVERFLOW}).encode()]
    llm.script(model_name, [limited, over])
    endpoint = LlmEndpoint(llm_client(settings, llm.base_url))
    request = chat_request(model_name, [{"role": "user", "content": "hi"}])
    on_text = (lambda _: None) if streamed else None
    try:
        with pytest.raises(ApplicationError) as refused:
            await attempt(1).run(endpoint.complete, request, max_attempts=1, on_text=on_text)
        assert (refused.value.type, refused.value.non_retryable) == ("LlmHttpError", False)
        with pytest.raises(ContextWindowExceeded):
            await attempt(1).run(endpoint.complete, request, max_attempts=1, on_text=on_text)
    finally:
        await endpoint.close()
