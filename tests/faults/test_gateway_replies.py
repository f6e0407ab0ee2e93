"""What gateways, proxies and servers in front of a model send in a 200, over real HTTP,
where OpenAI's own API would not: a failed generation (a reply that broke off is the model
failing: asked again, counted against its attempts, its bill kept, never the run's answer,
a chat's reply or a debrief), an error object or an HTML page in place of a stream, a
choice numbered otherwise, a prompt filter's chunk first."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from activities.llm_calls import LlmEndpoint
from activities.llm_request import chat_request
from reactive_temporal.api.chat_refusals import ChatError
from reactive_temporal.config import Settings
from reactive_temporal.embedded.scripted_llm import (
    Raw,
    Reply,
    ScriptedLLM,
    Step,
    call,
)
from reactive_temporal.hosting.worker_factory import llm_client
from tests.support import sse_replies
from tests.support.sse_replies import USAGE, chunk, sse
from tests.support.steps import attempt
from tests.workflow.conftest import Harness

pytestmark = [pytest.mark.faults, pytest.mark.workflow]

HALF = "FINAL ANSWER: The tallest building would stand"
"""What the model had written when its provider failed: a final answer cut mid-sentence."""
DISCONNECTED = {"code": 502, "message": "Provider disconnected unexpectedly"}
"""OpenRouter's error object for a provider that failed while generating."""


def whole(
    finish: str, choice: dict[str, Any] | None = None, content: object = HALF, **extra: Any
) -> Raw:
    """An unstreamed 200 whose message holds `content` (the half answer unless told)."""
    return sse_replies.whole(finish, {"role": "assistant", "content": content}, choice, **extra)


BROKEN_OFF: dict[str, Step] = {
    # OpenRouter streams the error in the choice of its last chunk, finish_reason "error"
    "streamed, the error in the choice": sse(
        chunk({"role": "assistant", "content": HALF}),
        chunk({"content": ""}, "error", error=DISCONNECTED),
        {"id": "gen-1", "object": "chat.completion.chunk", "choices": [], "usage": USAGE},
    ),
    # vLLM's `error` finish reason (a generation the engine failed), nothing else said
    "streamed, finish_reason error alone": sse(
        chunk({"role": "assistant", "content": HALF}), chunk({}, "error")
    ),
    # unstreamed: OpenRouter's 200 whose choice carries the error
    "whole, the error in the choice": whole("error", {"error": DISCONNECTED}),
    # a gateway's 200 with the error beside the choices (it was taken: only an error without
    # choices was refused)
    "whole, the error beside the choices": whole("error", error=DISCONNECTED),
}


@pytest.mark.parametrize("name", list(BROKEN_OFF))
async def test_a_reply_that_broke_off_is_asked_again_not_taken_for_the_answer(
    name: str, harness: Harness, llm: ScriptedLLM, model_name: str
):
    """The half-written `FINAL ANSWER:` ended the run as a success whose answer stopped
    mid-sentence. Now the step is asked again, and the broken reply's bill is counted."""
    llm.script(model_name, [BROKEN_OFF[name], Reply("FINAL ANSWER: 42", usage=(10, 5))])
    result = await asyncio.wait_for(
        harness.run(model_name, "How tall?", memory=False, live_output=True), 60
    )
    assert (result.terminated_by, result.output) == ("final_answer", "42"), result
    assert len(llm.requests[model_name]) == 2
    if "error alone" not in name:  # the usage the broken reply reported is in the run's
        assert result.metadata.prompt_tokens == 1010


async def test_an_error_sent_in_place_of_the_rest_of_a_stream_is_said_in_the_provider_s_words(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """OpenRouter's error mid-stream (a data event whose `error` ends the stream, in a 200)
    passes the provider's own words on in `metadata.raw`: the run said only "APIError:
    Provider returned error"."""
    raw = json.dumps({"error": {"message": "upstream connect error: connection reset"}})
    said = {"code": 502, "message": "Provider returned error", "metadata": {"raw": raw}}
    stream = sse(chunk({"role": "assistant", "content": HALF}), {"error": said})
    llm.script(model_name, [stream], repeat_last=True)
    result = await asyncio.wait_for(
        harness.run(model_name, "How tall?", llm_max_attempts=2, memory=False, live_output=True),
        60,
    )
    assert result.terminated_by == "llm_error", result
    assert "Provider returned error: upstream connect error" in (result.error or ""), result.error
    assert len(llm.requests[model_name]) == 2


async def test_a_proxy_s_page_in_place_of_a_stream_is_said(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """A proxy in front of the model answers a streamed call with its own HTML page, status
    200: read as a stream with no events, the run said "LLM answered with no choices"."""
    page = b"<html><head><title>Bad gateway</title></head><body>cloudflare</body></html>"
    llm.script(model_name, [Raw([page], content_type="text/html")], repeat_last=True)
    result = await asyncio.wait_for(
        harness.run(model_name, "6*7?", llm_max_attempts=2, memory=False, live_output=True), 60
    )
    assert result.terminated_by == "llm_error", result
    assert "text/html" in (result.error or "") and "Bad gateway" in (result.error or "")
    assert len(llm.requests[model_name]) == 2


SYNTHESIS = {
    "summary": "Multiplied 6 by 7 with the calculator.",
    "key_findings": ["6 * 7 = 42"],
    "errors_encountered": [],
    "lessons_learned": ["Check products with the calculator."],
    "caveats": "",
}


async def test_a_debrief_synthesis_that_broke_off_is_asked_again(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """The debrief model's reply broke off halfway through its JSON: read as a whole answer
    that is not JSON, the run's debrief was never synthesized. It is asked again."""
    broken = whole("error", {"error": DISCONNECTED}, content=json.dumps(SYNTHESIS)[:60])
    synth = llm.script(f"{model_name}-synth", [broken, Reply(json.dumps(SYNTHESIS))])
    answer = "42. " * 40  # long enough to be worth a synthesized debrief
    llm.script(
        model_name,
        [
            Reply(None, [call("calculator", expression="6*7")]),
            Reply(None, [call("final-answer", output=answer, format="text", summary="Did.")]),
        ],
    )
    result = await asyncio.wait_for(harness.run(model_name, "6*7?", debrief_model=synth), 60)
    assert result.terminated_by == "final_answer_tool", result
    rich = await asyncio.wait_for(result.debrief_rich(), timeout=60)
    assert rich is not None and rich.synthesized, rich
    assert rich.summary == SYNTHESIS["summary"]
    assert len(llm.requests[synth]) == 2


def numbered(index: int | None, content: str, finish: str | None = None) -> dict[str, Any]:
    """A chunk whose choice is numbered `index` (None: no `index` at all)."""
    choice: dict[str, Any] = {"delta": {"content": content}, "finish_reason": finish}
    if index is not None:
        choice["index"] = index
    return {"id": "gen-1", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}


WORDS = ["FINAL ", "ANSWER: ", "forty-", "two"]
CHOICE_NUMBERING: dict[str, Step] = {
    # Cloudflare Workers AI's OpenAI-compatible endpoint: no `index` in any choice
    "no index": sse(*(numbered(None, w) for w in WORDS), numbered(None, "", "stop")),
    # TGI before 1.4.4 and Foundry Local 0.7: the choice numbered anew in every chunk
    "a new index each chunk": sse(
        *(numbered(i, w) for i, w in enumerate(WORDS)), numbered(len(WORDS), "", "stop")
    ),
}


@pytest.mark.parametrize("name", list(CHOICE_NUMBERING))
async def test_a_streamed_reply_s_choice_is_read_whatever_its_index(
    name: str, harness: Harness, llm: ScriptedLLM, model_name: str
):
    """The text of choices without an `index` was dropped (every reply empty, nudged until
    the run ran out), and a choice numbered per chunk was a choice per token (the reply
    was its first: "FINAL ")."""
    llm.script(model_name, [CHOICE_NUMBERING[name]], repeat_last=True)
    result = await asyncio.wait_for(
        harness.run(model_name, "6*7?", memory=False, live_output=True, max_iterations=3), 60
    )
    assert (result.terminated_by, result.output) == ("final_answer", "forty-two"), result
    assert len(llm.requests[model_name]) == 1


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_run_whose_replies_all_break_off_says_what_the_provider_said(
    streamed: bool, harness: Harness, llm: ScriptedLLM, model_name: str
):
    """Every attempt broke off: the run ends `llm_error` in the provider's words, after the
    agent's `llm_max_attempts` calls."""
    broken = "streamed, the error in the choice" if streamed else "whole, the error in the choice"
    llm.script(model_name, [BROKEN_OFF[broken]], repeat_last=True)
    result = await asyncio.wait_for(
        harness.run(
            model_name, "How tall?", llm_max_attempts=2, memory=False, live_output=streamed
        ),
        60,
    )
    assert result.terminated_by == "llm_error", result
    assert "Provider disconnected unexpectedly" in (result.error or ""), result.error
    assert len(llm.requests[model_name]) == 2
    assert result.metadata.prompt_tokens == 2000  # both bills


async def test_a_chat_reply_that_broke_off_is_not_the_reply(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """A direct chat turn (unstreamed) answered with the half reply, as if whole."""
    llm.script(model_name, [whole("error")], repeat_last=True)
    session = harness.agent(model_name, agent_id="broken-chat", llm_max_attempts=2).session()
    with pytest.raises(ChatError, match="broke off"):
        await asyncio.wait_for(session.chat("How tall?", use_tools=False), 90)
    assert len(llm.requests[model_name]) == 2


async def test_azure_s_prompt_filter_chunk_does_not_name_the_reply(
    settings: Settings, llm: ScriptedLLM, model_name: str
):
    """Azure OpenAI streams its prompt filter's verdict first, in a chunk with no choices and
    `id` and `model` empty: the reply was named by it, and every streamed call's span said
    no `gen_ai.response.model` (the deployment's model and version)."""
    verdict = {
        "choices": [],
        "created": 0,
        "id": "",
        "model": "",
        "object": "",
        "prompt_filter_results": [
            {"prompt_index": 0, "content_filter_results": {"hate": {"filtered": False}}}
        ],
    }
    text = chunk({"role": "assistant", "content": "Hello"})
    named = {**text, "id": "chatcmpl-az1", "model": "gpt-4o-2024-11-20"}
    llm.script(model_name, [sse(verdict, named, {**named, **chunk({}, "stop")})])
    endpoint = LlmEndpoint(llm_client(settings, llm.base_url))
    request = chat_request(model_name, [{"role": "user", "content": "hi"}])
    streamed: list[str] = []
    try:
        completion = await attempt(1).run(
            endpoint.complete, request, max_attempts=2, on_text=streamed.append
        )
    finally:
        await endpoint.close()
    assert (completion.content, "".join(streamed)) == ("Hello", "Hello")
    assert (completion.response.id, completion.response.model) == (
        "chatcmpl-az1",
        "gpt-4o-2024-11-20",
    )


def thinking_chunk(text: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": [{"type": "text", "text": text}]}


@pytest.mark.parametrize("text_as_chunks", [False, True])
async def test_magistral_s_streamed_chunks_are_its_thinking_and_its_answer(
    text_as_chunks: bool, settings: Settings, llm: ScriptedLLM, model_name: str
):
    """Magistral streams `delta.content` as a list of Mistral's chunks: its thinking as
    `thinking` chunks, then its answer. A list was no text: the thinking was dropped (never
    shown live, never recorded) and an answer sent as `text` chunks was lost with it."""
    answer: Any = [{"type": "text", "text": "It is 42."}] if text_as_chunks else "It is 42."
    stream = sse(
        chunk({"role": "assistant", "content": [thinking_chunk("6 times 7")]}),
        chunk({"content": [thinking_chunk(" is 42.")]}),
        chunk({"content": answer}),
        chunk({}, "stop"),
    )
    llm.script(model_name, [stream])
    endpoint = LlmEndpoint(llm_client(settings, llm.base_url))
    request = chat_request(model_name, [{"role": "user", "content": "6*7?"}])
    text: list[str] = []
    thinking: list[str] = []
    try:
        completion = await attempt(1).run(
            endpoint.complete,
            request,
            max_attempts=2,
            on_text=text.append,
            on_thinking=thinking.append,
        )
    finally:
        await endpoint.close()
    assert (completion.content, completion.thinking) == ("It is 42.", "6 times 7 is 42.")
    assert ("".join(text), "".join(thinking)) == ("It is 42.", "6 times 7 is 42.")


async def test_magistral_s_thinking_unstreamed_is_its_thinking(
    settings: Settings, llm: ScriptedLLM, model_name: str
):
    """Unstreamed, Magistral's `content` is the same chunks: its answer was read from the
    text chunk, its thinking from nowhere (never recorded)."""
    content = [thinking_chunk("6 times 7 is 42."), {"type": "text", "text": "It is 42."}]
    llm.script(model_name, [whole("stop", content=content)])
    endpoint = LlmEndpoint(llm_client(settings, llm.base_url))
    request = chat_request(model_name, [{"role": "user", "content": "6*7?"}])
    try:
        completion = await attempt(1).run(endpoint.complete, request, max_attempts=2)
    finally:
        await endpoint.close()
    assert (completion.content, completion.thinking) == ("It is 42.", "6 times 7 is 42.")
