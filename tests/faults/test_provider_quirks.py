"""Real providers' OpenAI-compatible endpoints as they answer, over real HTTP: what each sends
that OpenAI does not, and what the run makes of it. Each case failed a run, or bought the
same reply again, before."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from temporalio.client import Client

from activities.llm_calls import LlmEndpoint
from activities.llm_request import chat_request
from reactive_temporal.api.chat_refusals import ChatError
from reactive_temporal.capabilities import ModelCapabilities
from reactive_temporal.config import Settings
from reactive_temporal.embedded.scripted_llm import Endpoint, Raw, Reply, ScriptedLLM, Step, call
from reactive_temporal.hosting.worker_factory import llm_client
from tests.support.live_text import adaptations
from tests.support.steps import attempt
from tests.workflow.conftest import Harness, running_worker

pytestmark = [pytest.mark.faults, pytest.mark.workflow]

SIGNATURE = {"google": {"thought_signature": "c2lnbmF0dXJlIG9mIGEgdGhvdWdodA=="}}
GEMINI_MISSING_SIGNATURE = [
    {
        "error": {
            "code": 400,
            "message": "Function call is missing a thought_signature in functionCall parts.",
            "status": "INVALID_ARGUMENT",
        }
    }
]


def sse(*events: object) -> Raw:
    return Raw([*(f"data: {json.dumps(e)}\n\n".encode() for e in events), b"data: [DONE]\n\n"])


def whole(message: dict[str, Any], finish: str = "stop", **extra: object) -> Raw:
    """An unstreamed reply (what an endpoint that does not stream answers)."""
    body = {
        "id": "r1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
        ],
        **extra,
    }
    return Raw([json.dumps(body).encode()], content_type="application/json")


def error(status: int, body: object) -> Raw:
    return Raw([json.dumps(body).encode()], status=status, content_type="application/json")


def calculator(arguments: object, **call: object) -> dict[str, Any]:
    return {"type": "function", "function": {"name": "calculator", "arguments": arguments}, **call}


ANSWER = {"content": "FINAL ANSWER: 42"}


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize("streamed", [True, False])
async def test_gemini_3_gets_its_thought_signature_back(
    streamed: bool, harness: Harness, llm: ScriptedLLM, model_name: str
):
    """Gemini 3 sends a `thought_signature` with each tool call and refuses the next request
    without it: every run with a tool failed at its second step ("HTTP 400: Error code:
    400", the provider's message lost too)."""
    call = calculator('{"expression": "6*7"}', id="fc1", extra_content=SIGNATURE)

    def gemini(request: dict[str, Any]) -> Step:
        sent = [c for m in request["messages"] for c in m.get("tool_calls") or []]
        if any(c.get("extra_content") != SIGNATURE for c in sent):
            return error(400, GEMINI_MISSING_SIGNATURE)
        if sent:
            return sse({"choices": [{"index": 0, "delta": ANSWER}]}) if streamed else whole(ANSWER)
        if streamed:
            return sse({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
        return whole({"content": None, "tool_calls": [call]}, "tool_calls")

    llm.script(model_name, gemini)
    result = await asyncio.wait_for(
        harness.run(model_name, "What is 6*7?", memory=False, live_output=streamed), 60
    )
    assert (result.terminated_by, result.output) == ("final_answer", "42"), result.error
    assert tool_results(llm.requests[model_name][-1]) == ["42"]


async def test_a_provider_s_own_error_body_is_what_the_run_says(
    harness: Harness, llm: ScriptedLLM, model_name: str, caplog: pytest.LogCaptureFixture
):
    """Gemini answers errors as a list: the run said "HTTP 400: Error code: 400". The failed
    attempt is one line in the worker's log (with its traceback, a run against a mistyped
    endpoint printed 1,100 lines in `run`'s terminal)."""
    llm.script(model_name, [error(400, GEMINI_MISSING_SIGNATURE)])
    result = await asyncio.wait_for(harness.run(model_name, "What is 6*7?", memory=False), 60)
    assert result.terminated_by == "llm_error"
    assert "missing a thought_signature" in (result.error or ""), result.error
    [failed] = [r for r in caplog.records if r.getMessage().startswith("Completing activity")]
    assert failed.exc_info is None and "missing a thought_signature" in failed.getMessage()


@pytest.mark.parametrize(
    "call",
    [
        calculator({"expression": "6*7"}, id="c1"),  # arguments as an object
        calculator('{"expression": "6*7"}'),  # no id
        calculator(json.dumps('{"expression": "6*7"}'), id="c1"),  # encoded twice
    ],
    ids=["object-arguments", "no-id", "arguments-encoded-twice"],
)
async def test_tool_calls_in_other_shapes_run_once(
    call: dict[str, Any], harness: Harness, llm: ScriptedLLM, model_name: str
):
    """Unstreamed, a call without an id or with object arguments failed the reply's
    validation: the step called the model again, up to 25 times (each billed); arguments
    encoded twice failed every call of the tool."""
    llm.script(
        model_name, [whole({"content": None, "tool_calls": [call]}, "tool_calls"), whole(ANSWER)]
    )
    result = await asyncio.wait_for(
        harness.run(model_name, "What is 6*7?", memory=False, live_output=False), 60
    )
    assert (result.terminated_by, result.output) == ("final_answer", "42"), result.error
    assert len(llm.requests[model_name]) == 2
    assert tool_results(llm.requests[model_name][-1]) == ["42"]


async def test_streamed_calls_without_index_or_id_stay_apart(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """Two calls in one chunk, each with an empty id and no `index` (Gemini leaves it out)
    were glued into one call whose arguments were two objects."""
    calls = [calculator('{"expression": "6*7"}', id=""), calculator('{"expression": "2+2"}', id="")]
    both = sse({"choices": [{"index": 0, "delta": {"tool_calls": calls}}]})
    llm.script(model_name, [both, sse({"choices": [{"index": 0, "delta": ANSWER}]})])
    result = await asyncio.wait_for(harness.run(model_name, "What is 6*7?", memory=False), 60)
    assert result.output == "42", result.error
    assert tool_results(llm.requests[model_name][-1]) == ["42", "4"]


async def test_an_endpoint_that_does_not_stream_is_read_whole(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """A streamed request answered with one JSON completion was read as an empty stream:
    "no choices", five billed calls, the run failed."""
    usage = {"prompt_tokens": 50, "completion_tokens": 6, "total_tokens": 56}
    llm.script(model_name, [whole(ANSWER, usage=usage)])
    result = await asyncio.wait_for(harness.run(model_name, "What is 6*7?", memory=False), 60)
    assert (result.terminated_by, result.output) == ("final_answer", "42"), result.error
    assert len(llm.requests[model_name]) == 1 and result.metadata.prompt_tokens == 50


async def test_an_account_out_of_credit_is_not_asked_again(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """OpenAI's 429 `insufficient_quota` never succeeds: it was retried like a rate limit."""
    quota = {
        "error": {
            "message": "You exceeded your current quota, please check your plan and billing.",
            "type": "insufficient_quota",
            "param": None,
            "code": "insufficient_quota",
        }
    }
    llm.script(model_name, [error(429, quota)], repeat_last=True)
    result = await asyncio.wait_for(harness.run(model_name, "What is 6*7?", memory=False), 60)
    assert result.terminated_by == "llm_error"
    assert len(llm.requests[model_name]) == 1
    assert "exceeded your current quota" in (result.error or "")


async def test_groq_s_failed_tool_generation_is_asked_again(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """Groq's 400 `tool_use_failed` is the model sampling a bad call; asked again it usually
    answers. The run failed at once."""
    failed = {
        "error": {
            "message": "Failed to call a function. Please adjust your prompt.",
            "type": "invalid_request_error",
            "code": "tool_use_failed",
            "failed_generation": "<function=calculator>{6*7}</function>",
        }
    }
    llm.script(model_name, [error(400, failed), whole(ANSWER)])
    result = await asyncio.wait_for(harness.run(model_name, "What is 6*7?", memory=False), 60)
    assert (result.terminated_by, result.output) == ("final_answer", "42"), result.error
    assert len(llm.requests[model_name]) == 2


async def test_a_refusal_is_the_reply_s_text(harness: Harness, llm: ScriptedLLM, model_name: str):
    """OpenAI's `refusal` with no content was taken for an empty reply, nudged (and billed)
    until the run's iterations ran out, its output empty and the refusal never shown."""
    refusal = "I'm sorry, but I can't help with that request."
    llm.script(model_name, [whole({"content": None, "refusal": refusal})], repeat_last=True)
    result = await asyncio.wait_for(
        harness.run(model_name, "Do something bad", memory=False, live_output=False), 60
    )
    assert result.output == refusal, result
    assert len(llm.requests[model_name]) == 1


async def test_groq_s_streamed_usage_is_counted(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """Groq streams its usage under `x_groq`: the run counted an estimate instead."""
    usage = {"prompt_tokens": 5000, "completion_tokens": 900, "total_tokens": 5900}
    groq = {"choices": [], "x_groq": {"usage": usage}}
    llm.script(model_name, [sse({"choices": [{"index": 0, "delta": ANSWER}]}, groq)])
    result = await asyncio.wait_for(harness.run(model_name, "What is 6*7?", memory=False), 60)
    assert result.output == "42"
    assert (result.metadata.prompt_tokens, result.metadata.completion_tokens) == (5000, 900)


async def test_a_refused_value_leaves_out_that_value_only(
    settings: Settings, llm: ScriptedLLM, model_name: str
):
    """o3 refuses `reasoning_effort: "minimal"` and takes "high": the worker stopped sending
    `reasoning_effort` at all to that model, whatever a later run asked for."""
    refused = {
        "error": {
            "message": "Unsupported value: 'reasoning_effort' does not support 'minimal' with "
            "this model. Supported values are: 'low', 'medium', and 'high'.",
            "type": "invalid_request_error",
            "param": "reasoning_effort",
            "code": "unsupported_value",
        }
    }
    model = f"o3-{model_name}"
    llm.script(model, [error(400, refused), whole(ANSWER), whole(ANSWER)])
    endpoint = LlmEndpoint(llm_client(settings, llm.base_url))
    messages = [{"role": "user", "content": "hi"}]
    try:
        for effort in ("minimal", "high"):
            request = chat_request(model, messages, reasoning_effort=effort)
            await attempt(1).run(endpoint.complete, request, max_attempts=2)
    finally:
        await endpoint.close()
    sent = [r.get("reasoning_effort") for r in llm.requests[model]]
    assert sent == ["minimal", None, "high"]


async def test_a_run_the_content_filter_stops_says_so_when_it_runs_out(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """Every reply stopped by the provider's content filter: the run went on to its
    iteration cap (as the released semantics do) and ended with no word of why."""
    filtered = whole({"content": "I can tell you that"}, "content_filter")
    llm.script(model_name, [filtered], repeat_last=True)
    result = await asyncio.wait_for(
        harness.run(
            model_name, "Something filtered", memory=False, live_output=False, max_iterations=2
        ),
        60,
    )
    assert result.terminated_by == "max_iterations"
    assert "stopped by the provider's content filter" in (result.error or ""), result


async def test_a_bare_final_answer_marker_is_no_answer(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """`FINAL ANSWER:` with nothing after it ended the run as a success whose answer was
    the marker; it is an empty reply, and the model is asked again."""
    llm.script(model_name, [whole({"content": "FINAL ANSWER:"}), whole(ANSWER)])
    result = await asyncio.wait_for(
        harness.run(model_name, "What is 6*7?", memory=False, live_output=False), 60
    )
    assert (result.terminated_by, result.output) == ("final_answer", "42"), result
    assert len(llm.requests[model_name]) == 2


async def test_a_final_answer_with_a_null_summary_is_taken(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """`"summary": null` is no summary (the released `String(args.summary ?? "")`): the call
    was refused with an error that named no field, and the tool hidden for three turns."""
    answer = {"output": "42", "format": "text", "summary": None}
    calc = calculator('{"expression": "6*7"}', id="c1")
    final = {
        "type": "function",
        "id": "f1",
        "function": {"name": "final-answer", "arguments": json.dumps(answer)},
    }
    llm.script(
        model_name,
        [
            whole({"content": None, "tool_calls": [calc]}, "tool_calls"),
            whole({"content": None, "tool_calls": [final]}, "tool_calls"),
        ],
    )
    result = await asyncio.wait_for(
        harness.run(model_name, "What is 6*7?", memory=False, live_output=False), 60
    )
    assert (result.terminated_by, result.output) == ("final_answer_tool", "42"), result


@pytest.mark.parametrize(
    ("said", "endpoint"),
    [
        pytest.param(None, Endpoint(content_required=True), id="openai-null-content"),
        pytest.param("", Endpoint(nonblank_text=True), id="anthropic-empty-text"),
        pytest.param(" \n ", Endpoint(nonblank_text=True), id="anthropic-whitespace-text"),
    ],
)
async def test_an_empty_reply_is_nudged_in_a_request_the_provider_takes(
    said: str | None, endpoint: Endpoint, harness: Harness, llm: ScriptedLLM, model_name: str
):
    """A model that says nothing (no text, no call: Gemini and reasoning models out of
    output tokens do) is nudged to go on. Its empty turn went back in the next request as it
    came, `content: null` (OpenAI: a 400, "expected a string, got null") or blank text
    (Anthropic: "text content blocks must contain non-whitespace text"): refused, the run
    ended as `llm_error` where it should have gone on. The turn is now sent as a placeholder
    text, and a call's blank text as none."""
    llm.endpoint(model_name, endpoint)
    llm.script(
        model_name,
        [
            Reply(said),
            Reply(" ", [call("calculator", expression="6*7")]),
            Reply("FINAL ANSWER: 42"),
        ],
    )
    result = await asyncio.wait_for(harness.run(model_name, "What is 6*7?", memory=False), 60)
    assert (result.terminated_by, result.output) == ("final_answer", "42"), result.error
    assert llm.rejected[model_name] == []
    empty_turn = llm.requests[model_name][1]["messages"][-2]
    assert empty_turn == {"role": "assistant", "content": "(empty reply)"}
    call_turn = llm.requests[model_name][2]["messages"][-2]
    assert call_turn["content"] is None and call_turn["tool_calls"]


@pytest.mark.parametrize(
    "sent", ['{"expression": "6*7"', "not json", '["6*7"]', '{"expression": "6*7"} and more']
)
async def test_a_call_with_broken_arguments_goes_back_as_a_server_that_parses_them_takes(
    sent: str, harness: Harness, llm: ScriptedLLM, model_name: str
):
    """Small local models write broken tool-call JSON, and the servers that run them (vLLM,
    Ollama) parse the arguments of every call a request's history holds: the broken call,
    sent back as it came, made every later request a 400 and the run ended as `llm_error`,
    where the model had been told its arguments were not valid and could go on. The call now
    goes back as a JSON object holding what the model sent."""
    llm.endpoint(model_name, Endpoint(parses_arguments=True))
    fixed = call("calculator", expression="6*7")
    llm.script(
        model_name,
        [Reply(None, [call("calculator", sent)]), Reply(None, [fixed]), Reply("FINAL ANSWER: 42")],
    )
    result = await asyncio.wait_for(harness.run(model_name, "What is 6*7?", memory=False), 60)
    assert (result.terminated_by, result.output) == ("final_answer", "42"), result.error
    assert llm.rejected[model_name] == []
    broken = llm.requests[model_name][1]["messages"][-2]["tool_calls"][0]["function"]
    assert json.loads(broken["arguments"]) == {"invalid_arguments": sent}
    told = llm.requests[model_name][1]["messages"][-1]["content"]
    assert "invalid arguments for calculator" in told


async def test_calls_a_model_gave_one_id_go_back_with_ids_of_their_own(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """Some models give every call the same id (`call_0`, each turn and twice in one reply);
    sent back as given, Anthropic refused the request ("tool_use ids must be unique") and the
    run ended as `llm_error` at its second step. Each call now goes back with an id of its
    own, and each result with its call's."""
    llm.endpoint(model_name, Endpoint(unique_call_ids=True))
    same = "call_0"
    llm.script(
        model_name,
        [
            Reply(None, [call("calculator", call_id=same, expression="1+1")]),
            Reply(None, [call("calculator", call_id=same, expression="2+2")]),
            Reply(None, [call("calculator", call_id=same, expression=f"{n}+{n}") for n in (3, 4)]),
            Reply("FINAL ANSWER: 42"),
        ],
    )
    result = await asyncio.wait_for(harness.run(model_name, "Add up", memory=False), 60)
    assert (result.terminated_by, result.output) == ("final_answer", "42"), result.error
    assert llm.rejected[model_name] == []
    sent = llm.requests[model_name][-1]["messages"]
    calls = [(c["id"], c["function"]["arguments"]) for m in sent for c in m.get("tool_calls", [])]
    assert [i for i, _ in calls] == ["call_0", "call_0-2", "call_0-3", "call_0-4"]
    answers = {m["tool_call_id"]: m["content"] for m in sent if m["role"] == "tool"}
    assert answers == {"call_0": "2", "call_0-2": "4", "call_0-3": "6", "call_0-4": "8"}


async def test_a_reply_cut_short_in_a_provider_s_own_words_does_not_end_the_run(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """Mistral's `model_length` (cut at the context window), a gateway's `max_tokens`, Gemini's
    `SAFETY`: each was taken for a whole reply, and the first half answer ended the run."""
    llm.script(
        model_name,
        [
            Reply("FINAL ANSWER: The capital of France is", finish_reason="model_length"),
            Reply("FINAL ANSWER: The capital", finish_reason="max_tokens"),
            Reply("Nothing but words,", finish_reason="SAFETY"),
            Reply("FINAL ANSWER: Paris.", finish_reason="end_turn"),
            Reply("It is the largest city,", finish_reason="MAX_TOKENS"),  # the chat's turn
        ],
    )
    result = await asyncio.wait_for(
        harness.run(model_name, "Capital of France?", memory=False, max_iterations=6), 60
    )
    assert (result.terminated_by, result.output) == ("final_answer", "Paris."), result
    told = [r["messages"][-1]["content"] for r in llm.requests[model_name][1:4]]
    assert ["cut off" in told[0], "cut off" in told[1], "content filter" in told[2]] == [True] * 3
    reply = await asyncio.wait_for(
        harness.agent(model_name).session().chat("Why?", use_tools=False), 60
    )
    assert reply.message.endswith("[the answer was cut off at the model's output token limit]")


async def test_a_chat_reply_that_cannot_be_read_counts_against_the_model_s_attempts(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """A billed 200 whose choice is no message: the direct turn raised a plain error, retried
    as an outage, a billed call each time, up to every infrastructure retry (55 calls)."""
    usage = {"prompt_tokens": 300, "completion_tokens": 20, "total_tokens": 320}
    body = {"id": "r", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [42], "usage": usage}  # fmt: skip
    unreadable = Raw([json.dumps(body).encode()], content_type="application/json")
    llm.script(model_name, [unreadable], repeat_last=True)
    session = harness.agent(model_name, agent_id="unreadable-chat", llm_max_attempts=2).session()
    with pytest.raises(ChatError, match="reply that could not be read.*attempts exhausted"):
        await asyncio.wait_for(session.chat("Hi", use_tools=False), 90)
    assert len(llm.requests[model_name]) == 2


async def test_qwen3_on_model_studio_is_asked_unstreamed_with_its_thinking_off(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """Alibaba Cloud Model Studio (DashScope) refuses Qwen3's calls that do not stream
    unless `enable_thinking` is false: a run without live output failed at its first step
    (`LlmRequestRejected`), and every debrief's synthesis with it. Learned from the 400 once
    per worker; a streamed call keeps the model's thinking."""
    model = llm.endpoint(f"qwen3-max-{model_name}", Endpoint(thinks_streamed_only=True))
    llm.script(
        model,
        [
            Reply("Adding.", [call("calculator", expression="40+2")]),
            Reply("FINAL ANSWER: 42"),
            Reply("FINAL ANSWER: 43"),
        ],
    )
    quiet = harness.agent(model, agent_id=f"qw-{model_name[:8]}", live_output=False, memory=False)
    result = await asyncio.wait_for(quiet.run("What is 40+2?"), 60)
    assert (result.terminated_by, result.output) == ("final_answer", "42"), result
    watched = harness.agent(model, agent_id=f"qs-{model_name[:8]}", memory=False)
    assert (await asyncio.wait_for(watched.run("And 40+3?"), 60)).output == "43"
    assert len(llm.rejected[model]) == 1  # the first call only: learned
    unstreamed = [r for r in llm.requests[model] if not r.get("stream")]
    assert [r.get("enable_thinking") for r in unstreamed] == [None, False, False]
    assert [r.get("enable_thinking") for r in llm.requests[model] if r.get("stream")] == [None]


def thinking_sent(request: dict[str, Any]) -> list[str | None]:
    """What each of a request's model turns carried back as its thinking."""
    return [m.get("reasoning_content") for m in request["messages"] if m["role"] == "assistant"]


async def test_deepseek_s_thinking_mode_gets_each_turn_back_with_its_thinking(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """DeepSeek's thinking mode (deepseek-reasoner, V4) and Moonshot's Kimi K2 refuse a request
    whose turns that called tools come back without their `reasoning_content`: every run with
    tools failed at its second step (`LlmRequestRejected`). Known by name, sent from the first
    request, each turn with the thinking its step recorded."""
    model = llm.endpoint(f"deepseek-v4-flash-{model_name}", Endpoint(thinking_sent_back=True))
    llm.script(
        model,
        [
            Reply(None, [call("calculator", expression="40+2")], reasoning="Add with the tool."),
            Reply(None, [call("calculator", expression="42*2")], reasoning="Now double it."),
            Reply("FINAL ANSWER: 84", reasoning="The tool said 84."),
        ],
    )
    agent = harness.agent(model, agent_id=f"ds-{model_name[:8]}", memory=False)
    result = await asyncio.wait_for(agent.run("What is (40+2)*2?"), 60)
    assert (result.terminated_by, result.output) == ("final_answer", "84"), result
    assert llm.rejected[model] == []
    assert [thinking_sent(r) for r in llm.requests[model]] == [
        [],
        ["Add with the tool."],
        ["Add with the tool.", "Now double it."],
    ]


async def test_a_model_that_wants_its_thinking_back_is_learned_from_its_refusal(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """The same API under a name the table does not know (a gateway's, a deployment's): its
    400 is read once per worker, the call goes again with every turn carrying the field, and
    the later steps send each turn's own thinking. A model that wants nothing back is sent
    none (`test_open_models`)."""
    model = llm.endpoint(f"house-thinker-{model_name}", Endpoint(thinking_sent_back=True))
    llm.script(
        model,
        [
            Reply(None, [call("calculator", expression="40+2")], reasoning="Add with the tool."),
            Reply(None, [call("calculator", expression="42*2")], reasoning="Now double it."),
            Reply("FINAL ANSWER: 84"),
        ],
    )
    agent = harness.agent(model, agent_id=f"ht-{model_name[:8]}", memory=False)
    result = await asyncio.wait_for(agent.run("What is (40+2)*2?"), 60)
    assert (result.terminated_by, result.output) == ("final_answer", "84"), result
    assert len(llm.rejected[model]) == 1  # the second step's first call only: learned
    assert [thinking_sent(r) for r in llm.requests[model]] == [
        [],
        [None],  # refused
        [""],  # sent again as it was learned: the field, which the endpoint checks, is there
        ["Add with the tool.", "Now double it."],
    ]


@pytest.mark.parametrize(("refused", "streamed"), [("stream_options", True), ("stream", False)])
async def test_an_endpoint_that_refuses_streaming_or_its_usage_chunk_is_asked_as_it_takes(
    harness: Harness, llm: ScriptedLLM, model_name: str, refused: str, streamed: bool
):
    """A run with live output streams its calls and asks for the usage chunk
    (`stream_options`). An endpoint that refuses `stream` is asked without streaming from then
    on; one that refuses only `stream_options` (Azure OpenAI's older API versions, some local
    servers: "Unrecognized request argument supplied: stream_options") is still streamed,
    without it, its usage estimated: it was asked without streaming, and its watchers saw
    nothing until each reply had come whole."""
    model = llm.endpoint(f"older-{refused}-{model_name}", Endpoint(unrecognized=(refused,)))
    llm.script(
        model,
        [Reply("Adding.", [call("calculator", expression="40+2")]), Reply("FINAL ANSWER: 42")],
    )
    agent = harness.agent(model, agent_id=f"so-{refused[-4:]}-{model_name[:8]}", memory=False)
    result = await asyncio.wait_for(agent.run("What is 40+2?"), 60)
    assert (result.terminated_by, result.output) == ("final_answer", "42"), result
    assert len(llm.rejected[model]) == 1  # the first call only: learned
    later = llm.requests[model][1:]
    assert [r.get("stream") for r in later] == ([True, True] if streamed else [None, None])
    assert not any("stream_options" in r for r in later)
    assert result.metadata.prompt_tokens > 0  # estimated where the endpoint said nothing


@pytest.mark.parametrize("name", ["gemma3-4b", "gpt-4o"], ids=["open-model", "behind-a-proxy"])
async def test_a_model_whose_server_takes_no_tools_gets_them_in_its_prompt(
    name: str, harness: Harness, llm: ScriptedLLM, model_name: str
):
    """Ollama refuses any request with `tools` for a model whose template has none (Gemma,
    older DeepSeek-R1 tags, Phi-3): every run with a tool failed at its first step
    (`LlmRequestRejected`). Learned from that 400 once per worker: the tools go in the system
    message, the model writes its calls in its text, and they run; its turns' calls and their
    results go back as text, which a template without tools renders (it drops `tool`
    messages and `tool_calls`). A hosted model behind a proxy that takes no tools too, though
    the table says its endpoint parses calls."""
    model = llm.endpoint(f"{name}-{model_name}", Endpoint(no_tools=True))
    llm.script(
        model,
        [
            Reply(
                "I will multiply.\n<tool_call>\n"
                '{"name": "calculator", "arguments": {"expression": "6*7"}}\n</tool_call>'
            ),
            Reply("FINAL ANSWER: 42"),
        ],
    )
    agent = harness.agent(model, agent_id=f"nt-{name[:4]}-{model_name[:8]}", memory=False)
    result = await asyncio.wait_for(agent.run("What is 6*7?"), 60)
    assert (result.terminated_by, result.output) == ("final_answer", "42"), result
    [refused] = llm.rejected[model]  # the first call only: learned
    assert "does not support tools" in refused["error"]["message"]
    later = llm.requests[model][1:]
    assert len(later) == 2 and not any(set(r) & {"tools", "tool_choice"} for r in later)
    messages = [m for r in later for m in r["messages"]]
    assert not any(m["role"] == "tool" or "tool_calls" in m for m in messages)
    system, *rest = later[-1]["messages"]
    assert system["role"] == "system" and '"name": "calculator"' in system["content"]
    assert "<tool_call>" in system["content"]
    call_turn, answered = rest[-2:]
    assert call_turn["role"] == "assistant" and call_turn["content"].startswith(
        'I will multiply.\n<tool_call>\n{"name": "calculator", "arguments": {"expression": "6*7"}}'
    )
    assert answered["role"] == "user"
    assert answered["content"].startswith('<tool_response call="text_')
    assert 'name="calculator">\n42\n</tool_response>' in answered["content"]
    assert adaptations(model, "shape_learned") == 1
    # the calls are where the prompt asked for them: no "endpoint does not parse them" warning
    assert adaptations(model, "calls_in_text") == 0


async def test_a_model_configured_as_taking_no_tools_is_never_sent_them(
    client: Client, settings: Settings, llm: ScriptedLLM, model_name: str
):
    """`"tools_in_prompt": true` in AGENT_MODEL_CAPABILITIES says it from the start: not one
    request refused, the tools in the prompt from the first, the call read from the text."""
    model = llm.endpoint(f"gemma3-{model_name}", Endpoint(no_tools=True))
    llm.script(
        model,
        [
            Reply(
                '<tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}}</tool_call>'
            ),
            Reply("FINAL ANSWER: 42"),
        ],
    )
    configured = settings.model_copy(
        update={"model_capabilities": {model: ModelCapabilities(tools_in_prompt=True)}}
    )
    async with running_worker(client, configured) as harness:
        agent = harness.agent(model, agent_id=f"nc-{model_name[:8]}", memory=False)
        result = await asyncio.wait_for(agent.run("What is 6*7?"), 60)
    assert (result.terminated_by, result.output) == ("final_answer", "42"), result
    assert llm.rejected[model] == []
    assert [
        ("tools" in r, "<tool_call>" in r["messages"][0]["content"]) for r in llm.requests[model]
    ] == [
        (False, True),
        (False, True),
    ]
    assert adaptations(model, "shape_learned") == 0
