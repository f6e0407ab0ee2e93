"""What providers answer in place of a reply, over real HTTP, and what a step makes of it:
their errors in their own words (a context window passed, Groq's refused call), a wait
asked as a date, and a reply whose thinking used up its cap, said only in its usage."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError

from activities.llm_calls import LlmEndpoint
from activities.llm_request import ContextWindowExceeded, chat_request
from reactive_temporal.capabilities import REASONING_ROOM_TOKENS
from reactive_temporal.config import Settings
from reactive_temporal.embedded.scripted_llm import HttpError, Reply, ScriptedLLM
from reactive_temporal.hosting.worker_factory import llm_client
from tests.support.steps import attempt
from tests.workflow.conftest import Harness

pytestmark = [pytest.mark.faults, pytest.mark.workflow]


async def test_a_retry_after_date_is_waited_for(
    settings: Settings, llm: ScriptedLLM, model_name: str
):
    """A proxy's 503 for a model being redeployed says when to come back as an HTTP date
    (RFC 9110 allows either form): it was ignored, and the step retried at once, again and
    again, its attempts spent before the model was back. The wait is counted from the
    response's own `Date` (the server's clock)."""
    back_at = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    body = {"error": {"message": "upstream is being redeployed", "type": "service_unavailable"}}
    llm.script(model_name, [HttpError(503, body=body, headers={"retry-after": back_at})])
    endpoint = LlmEndpoint(llm_client(settings, llm.base_url))
    request = chat_request(model_name, [{"role": "user", "content": "hi"}])
    try:
        with pytest.raises(ApplicationError) as refused:
            await attempt(1).run(endpoint.complete, request, max_attempts=5)
    finally:
        await endpoint.close()
    assert "upstream is being redeployed" in str(refused.value)
    assert refused.value.non_retryable is False
    waited = refused.value.next_retry_delay
    assert waited is not None and 25 <= waited.total_seconds() <= 31, waited


ANTHROPIC_OVER = {  # its OpenAI-compatible endpoint answers in its own words
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "input length and `max_tokens` exceed context limit: 174167 + 64000 > "
        "200000, decrease input length or `max_tokens` and try again",
    },
}
LITELLM_BEDROCK_OVER = {  # a LiteLLM proxy in front of AWS Bedrock
    "error": {
        "message": "litellm.BadRequestError: litellm.ContextWindowExceededError: "
        "BedrockException - Input is too long for requested model.",
        "type": None,
        "param": None,
        "code": "400",
    }
}


LLAMA_CPP_OVER = {  # llama.cpp's server, its counts beside the message
    "error": {
        "code": 400,
        "message": "request (9000 tokens) exceeds the available context size (8192 tokens), "
        "try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 9000,
        "n_ctx": 8192,
    }
}
LLAMA_CPP_OLDER_OVER = {
    "error": {
        "code": 400,
        "message": "the request exceeds the available context size, try increasing it",
        "type": "invalid_request_error",
    }
}


@pytest.mark.parametrize(
    ("body", "window"),
    [
        (ANTHROPIC_OVER, 200_000),
        (LITELLM_BEDROCK_OVER, None),
        (LLAMA_CPP_OVER, 8192),
        (LLAMA_CPP_OLDER_OVER, None),
    ],
)
async def test_a_context_overflow_in_other_words_is_an_overflow(
    body: dict[str, Any],
    window: int | None,
    settings: Settings,
    llm: ScriptedLLM,
    model_name: str,
):
    """Anthropic's 400 for a prompt that fits but not with its `max_tokens`, Bedrock's
    through LiteLLM (which names every provider's overflow ContextWindowExceededError), and
    llama.cpp's server's were final 400s: the run ended `llm_error` where its step compacts
    and goes again."""
    llm.script(model_name, [HttpError(400, body=body)])
    endpoint = LlmEndpoint(llm_client(settings, llm.base_url))
    request = chat_request(model_name, [{"role": "user", "content": "hi"}])
    try:
        with pytest.raises(ContextWindowExceeded) as refused:
            await attempt(1).run(endpoint.complete, request, max_attempts=2)
    finally:
        await endpoint.close()
    assert refused.value.limit == window


async def test_groq_s_refused_generation_is_shown_when_its_attempts_run_out(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """Groq's `tool_use_failed`, every time: the run said "Failed to call a function. Please
    adjust your prompt.", and what the model wrote (in `failed_generation`) was nowhere."""
    failed = {
        "error": {
            "message": "Failed to call a function. Please adjust your prompt. See "
            "'failed_generation' for more details.",
            "type": "invalid_request_error",
            "code": "tool_use_failed",
            "failed_generation": '<function=calculator>{"expression": 6*7}</function>',
        }
    }
    llm.script(model_name, [HttpError(400, body=failed)], repeat_last=True)
    result = await asyncio.wait_for(
        harness.run(model_name, "6*7?", llm_max_attempts=2, memory=False), 60
    )
    assert result.terminated_by == "llm_error", result
    assert "<function=calculator>" in (result.error or ""), result.error
    assert len(llm.requests[model_name]) == 2


async def test_a_chat_reply_cut_off_by_hidden_thinking_is_asked_again_with_room(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """Gemini 2.5 (and any model that thinks without sending its thinking) spends its output
    cap thinking, and says so only in its usage (`reasoning_tokens`): the chat's 1,024
    tokens went on thinking, and the person read that the answer was cut off. A reply whose
    usage counts thinking is learned as a model that thinks, as one whose thinking is seen."""
    llm.script(
        model_name,
        [
            Reply(None, finish_reason="length", usage=(40, 0), reasoning_tokens=1024),
            Reply("Hello there.", usage=(40, 4), reasoning_tokens=1500),
        ],
    )
    session = harness.agent(model_name, agent_id="hidden-thinker").session()
    reply = await asyncio.wait_for(session.chat("Hi!", use_tools=False), 60)
    assert reply.message == "Hello there."
    asked = [r["max_tokens"] for r in llm.requests[model_name]]
    assert asked == [1024, 1024 + REASONING_ROOM_TOKENS], asked


MISTRAL_EXTRA = {  # Mistral's API: 422, the message an object of pydantic's details
    "object": "error",
    "message": {
        "detail": [
            {
                "type": "extra_forbidden",
                "loc": ["body", "stream_options"],
                "msg": "Extra inputs are not permitted",
                "input": {"include_usage": True},
            }
        ]
    },
    "type": "invalid_request_error",
    "param": None,
    "code": None,
}
MISTRAL_EXTRA_AS_TEXT = {  # its older form: the same details as a JSON string
    "object": "error",
    "message": '{"detail":[{"type":"extra_forbidden","loc":["body","stream_options"],'
    '"msg":"Extra inputs are not permitted","input":{"include_usage":true}}]}',
    "type": "internal_error_proxy",
    "param": None,
    "code": "1000",
}


@pytest.mark.parametrize("body", [MISTRAL_EXTRA, MISTRAL_EXTRA_AS_TEXT])
async def test_a_parameter_mistral_refuses_with_a_422_is_left_out(
    body: dict[str, Any], harness: Harness, llm: ScriptedLLM, model_name: str
):
    """Mistral refuses any field it does not know with HTTP 422 `extra_forbidden`, not a 400,
    and names it in pydantic's details: a run with live output ended `llm_error` at its
    first step. The field is left out for the model, as from a 400 that names one."""
    llm.script(model_name, [HttpError(422, body=body), Reply("FINAL ANSWER: 42")])
    result = await asyncio.wait_for(
        harness.run(model_name, "6*7?", memory=False, live_output=True), 60
    )
    assert (result.terminated_by, result.output) == ("final_answer", "42"), result.error
    sent = llm.requests[model_name]
    assert len(sent) == 2 and "stream_options" in sent[0] and "stream_options" not in sent[1]
