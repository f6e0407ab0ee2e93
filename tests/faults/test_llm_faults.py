"""A misbehaving LLM endpoint: every run ends with the right terminated_by and outcome,
and none hangs (each is bounded in time)."""

from __future__ import annotations

import asyncio
import gzip
import json
from dataclasses import dataclass, field

import pytest

from activities import llm_errors
from activities.llm_calls import LlmEndpoint
from activities.llm_request import ContextWindowExceeded, chat_request
from reactive_temporal.config import Settings
from reactive_temporal.embedded.scripted_llm import (
    Drop,
    HttpError,
    Raw,
    Reply,
    ScriptedLLM,
    Step,
    call,
)
from reactive_temporal.hosting import worker_factory
from reactive_temporal.hosting.worker_factory import llm_client
from reactive_temporal.pricing import register_price
from tests.support.steps import attempt
from tests.workflow.conftest import Harness

pytestmark = [pytest.mark.faults, pytest.mark.workflow]

CALC = Reply(None, [call("calculator", expression="6*7")])
DONE = Reply("FINAL ANSWER: 42")
LONG_DONE = Reply(None, [call("final-answer", output="42. " * 40, format="text", summary="Did.")])


@dataclass
class Case:
    steps: list[Step]
    terminated_by: str
    outcome: str
    output: str | None = "42"
    config: dict[str, object] = field(default_factory=dict)
    synthesis: list[Step] | None = None
    synthesized: bool | None = None


CASES = {
    "429 with retry-after": Case(
        [HttpError(429, "slow down", headers={"retry-after": "1"}), DONE], "final_answer", "success"
    ),
    # a rate limit is waited out, not counted against the LLM's attempts: before, the first
    # 429 of a one-attempt agent ended its run as llm_error
    "rate limited past the LLM's attempts": Case(
        [*[HttpError(429, "Rate limit reached", headers={"retry-after": "0"})] * 3, DONE],
        "final_answer",
        "success",
        config={"llm_max_attempts": 1},
    ),
    "500 then fine": Case([HttpError(500, "oops"), CALC, DONE], "final_answer", "success"),
    "dropped connection": Case([CALC, Drop(), DONE], "final_answer", "success"),
    "slower than the activity timeout": Case(
        [Reply("late", delay=5), DONE], "final_answer", "success", config={"llm_timeout_seconds": 2}
    ),
    "malformed tool-call arguments": Case(
        [Reply(None, [call("calculator", raw_arguments='{"expression": 6*7')]), CALC, DONE],
        "final_answer",
        "partial",  # an error happened on the way, and the debrief says so
    ),
    "empty content": Case([Reply(""), Reply(None), DONE], "final_answer", "success"),
    "non-JSON synthesis answer": Case(
        [CALC, LONG_DONE],
        "final_answer_tool",
        "success",
        output="42. " * 40,
        synthesis=[Reply("Sure! The run went well.")],
        synthesized=False,
    ),
    "400 is final": Case([HttpError(400, "bad model")], "llm_error", "failed", output=""),
    "500 forever": Case(
        [HttpError(503, "down")],
        "llm_error",
        "failed",
        output="",
        config={"llm_max_attempts": 2},
    ),
    "hangs forever": Case(
        [Reply("never", delay=30)],
        "llm_error",
        "failed",
        output="",
        config={"llm_timeout_seconds": 1, "llm_max_attempts": 2},
    ),
}


@pytest.mark.parametrize("name", list(CASES))
async def test_llm_fault(name: str, harness: Harness, llm: ScriptedLLM, model_name: str):
    case = CASES[name]
    llm.script(model_name, case.steps, repeat_last=case.steps[-1] is not DONE)
    config = dict(case.config)
    if case.synthesis is not None:
        config["debrief_model"] = llm.script(f"{model_name}-synth", case.synthesis)
    result = await asyncio.wait_for(harness.run(model_name, "What is 6*7?", **config), timeout=60)

    assert result.terminated_by == case.terminated_by, result
    assert result.debrief is not None and result.debrief.outcome == case.outcome
    if case.output is not None:
        assert result.output.strip() == case.output.strip()
    if case.synthesized is not None:
        rich = await asyncio.wait_for(result.debrief_rich(), timeout=60)
        assert rich is not None and rich.synthesized is case.synthesized


def test_cases_cover_the_issue_list():
    assert len(CASES) >= 7
    assert json.dumps(sorted(CASES))  # names are plain strings, shown in the report


async def test_a_reply_broken_off_counts_against_the_llm_attempts(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """An endpoint that cuts every streamed reply part-way is the LLM failing, each time a
    billed call: `llm_max_attempts` calls, then `llm_error` — never retried as an outage (up
    to 20 calls more). openai wraps the transport's error mid-stream as it does before the
    response starts; this keeps an upgrade of it or of the transport honest."""
    cut = Reply("The answer is forty-two, because", chunks=6, chunk_delay=0.05, drop_after_chunks=3)
    llm.script(model_name, [cut], repeat_last=True)
    result = await asyncio.wait_for(  # no memory: a failed run's debrief would ask this model too
        harness.run(model_name, "What is 6*7?", llm_max_attempts=2, memory=False), timeout=60
    )
    assert result.terminated_by == "llm_error", result
    assert len(llm.requests[model_name]) == 2
    assert result.error is not None and "LlmConnectionError" in result.error


def sse(*events: object) -> list[bytes]:
    return [f"data: {json.dumps(e)}\n\n".encode() for e in events]


TEXT = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Half an answer"}}]}
UNREADABLE = {
    "a page of HTML with status 200": Raw([b"<html>Bad gateway</html>"], content_type="text/html"),
    "an error object mid-stream": Raw(sse(TEXT, {"error": {"message": "overloaded"}})),
    "a line that is not JSON": Raw([*sse(TEXT), b"data: {not json\n\n"]),
    "no choices": Raw([*sse({"choices": []}), b"data: [DONE]\n\n"]),
    "an error with status 200": Raw(
        [b'{"error": {"message": "overloaded"}}'], content_type="application/json"
    ),
    "a token a second, forever": Raw(sse(TEXT) * 60, part_delay=0.5),
}  # fmt: skip


@pytest.mark.parametrize("name", list(UNREADABLE))
async def test_a_reply_that_cannot_be_read_counts_against_the_llm_attempts(
    name: str, harness: Harness, llm: ScriptedLLM, model_name: str
):
    """Each is the model failing: `llm_max_attempts` billed calls, then `llm_error`. They were
    retried as outages, up to 22 calls over 8.5 minutes (the trickle: past the activity's
    timeout, the transport's being per read, with two calls at once)."""
    llm.script(model_name, [UNREADABLE[name]], repeat_last=True)
    result = await asyncio.wait_for(
        harness.run(
            model_name, "What is 6*7?", llm_max_attempts=2, llm_timeout_seconds=4, memory=False
        ),
        timeout=60,
    )
    assert result.terminated_by == "llm_error", result
    assert len(llm.requests[model_name]) == 2


async def test_a_reply_whose_usage_is_in_another_shape_is_kept(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """A whole, good reply whose usage lacks `completion_tokens`: it was thrown away (and
    bought again, up to 22 times); now its answer stands, its usage counts what it says and
    the side it left out is estimated from the reply."""
    done = {
        "choices": [{"index": 0, "delta": {"content": "FINAL ANSWER: 42"}, "finish_reason": "stop"}]
    }
    usage = {"choices": [], "usage": {"prompt_tokens": 12, "total_tokens": 12}}
    llm.script(model_name, [Raw([*sse(done, usage), b"data: [DONE]\n\n"])])
    result = await asyncio.wait_for(harness.run(model_name, "What is 6*7?", memory=False), 60)
    assert (result.terminated_by, result.output) == ("final_answer", "42")
    assert result.metadata.prompt_tokens == 12 and result.metadata.completion_tokens > 0
    assert len(llm.requests[model_name]) == 1


OPENAI_OVERFLOW = {
    "error": {
        "message": "This model's maximum context length is 300 tokens. However, your "
        "messages resulted in 900 tokens.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
TGI_OVERFLOW = {  # Text Generation Inference: the error is a string
    "error": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. "
    "Given: 4000 `inputs` tokens and 200 `max_new_tokens`",
    "error_type": "validation",
}


@pytest.mark.parametrize(
    ("status", "body", "window"), [(413, OPENAI_OVERFLOW, 300), (422, TGI_OVERFLOW, 4096)]
)
async def test_a_413_or_422_naming_the_context_window_is_an_overflow(
    status: int,
    body: dict[str, object],
    window: int,
    settings: Settings,
    llm: ScriptedLLM,
    model_name: str,
):
    """Some endpoints refuse a request too long for the model with 413 or (TGI) 422, not
    400: the step compacts and goes again, where the run ended `llm_error`."""
    llm.script(model_name, [HttpError(status, body=body)])
    endpoint = LlmEndpoint(llm_client(settings, llm.base_url))
    request = chat_request(model_name, [{"role": "user", "content": "hi"}])
    try:
        with pytest.raises(ContextWindowExceeded) as refused:
            await attempt(1).run(endpoint.complete, request, max_attempts=2)
    finally:
        await endpoint.close()
    assert refused.value.limit == window
    assert endpoint.capabilities(model_name).context_tokens == window  # learned, as from a 400


async def test_a_reply_without_usage_counts_its_estimate_against_the_budget(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """An endpoint that never sends usage (many ignore `stream_options`): its replies
    counted zero tokens, and a token budget was never reached. Now each is estimated."""
    done = {
        "choices": [{"index": 0, "delta": {"content": "FINAL ANSWER: 42"}, "finish_reason": "stop"}]
    }
    llm.script(model_name, [Raw([*sse(done), b"data: [DONE]\n\n"])], repeat_last=True)
    spent = await asyncio.wait_for(harness.run(model_name, "What is 6*7?", memory=False), 60)
    assert spent.output == "42" and spent.metadata.prompt_tokens > 20
    assert spent.metadata.completion_tokens == 6  # "FINAL ANSWER: 42", 3 characters a token
    calc = {
        "index": 0,
        "id": "c1",
        "function": {"name": "calculator", "arguments": '{"expression": "6*7"}'},
    }
    step = {
        "choices": [{"index": 0, "delta": {"tool_calls": [calc]}, "finish_reason": "tool_calls"}]
    }
    llm.script(model_name, [Raw([*sse(step), b"data: [DONE]\n\n"])], repeat_last=True)
    capped = await asyncio.wait_for(
        harness.run(model_name, "What is 6*7?", memory=False, token_budget=10), 50
    )
    assert capped.terminated_by == "budget_exceeded", capped


async def test_a_compressed_reply_is_refused_unread(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """The client is asked for no compression; a reply compressed anyway is refused before
    its body is read (64 MB of spaces in 64 KB of gzip inflated whole in the worker)."""
    bomb = gzip.compress(b" " * 64 * 1024 * 1024, 9)
    sent = Raw([bomb], content_type="application/json", headers={"content-encoding": "gzip"})
    llm.script(model_name, [sent], repeat_last=True)
    result = await asyncio.wait_for(
        harness.run(model_name, "What is 6*7?", llm_max_attempts=2, memory=False), 50
    )
    assert result.terminated_by == "llm_error" and "gzip-encoded reply" in (result.error or "")
    assert len(llm.requests[model_name]) == 2


ENDLESS_CHUNK = json.dumps({"choices": [{"index": 0, "delta": {"content": "w" * 60_000}}]})


@pytest.mark.parametrize(
    ("reply", "said", "live"),
    [
        pytest.param(
            Reply("FINAL ANSWER: " + "w" * 2_000_000), "refused unread", False, id="declared"
        ),
        pytest.param(
            Raw(
                [b'{"choices": [{"index": 0, "message": {"content": "', b"w" * 2_000_000],
                content_type="application/json",
            ),
            "the rest was not read",
            False,
            id="chunked",
        ),
        pytest.param(
            Raw([f"data: {ENDLESS_CHUNK}\n\n".encode()] * 1_000, part_delay=0.001),
            "the rest was not read",
            True,
            id="streamed",
        ),
    ],
)
async def test_a_reply_past_the_size_limit_is_not_read_whole(
    harness: Harness,
    llm: ScriptedLLM,
    model_name: str,
    monkeypatch: pytest.MonkeyPatch,
    reply: Step,
    said: str,
    live: bool,
):
    """A broken or hostile endpoint's reply was read whole into the worker's memory, however
    large (an endless stream, for as long as the call's deadline): every run on the worker
    would go with it. Past the limit (64 MiB; 1 MB here) it is refused unread when its size
    is declared, and no more of it is read otherwise; the model failed, as for a reply that
    cannot be read."""
    monkeypatch.setattr(worker_factory, "LLM_REPLY_MAX_BYTES", 1_000_000)
    llm.script(model_name, [reply], repeat_last=True)
    result = await asyncio.wait_for(
        harness.run(model_name, "Talk", llm_max_attempts=2, memory=False, live_output=live), 50
    )
    assert result.terminated_by == "llm_error", result.error
    assert "1,000,000" in (result.error or "") and said in (result.error or "")
    assert len(llm.requests[model_name]) == 2


async def test_replies_with_no_choices_are_counted_in_the_run_s_usage_and_cost(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """Two replies billed (usage: 1,000 + 100 tokens each) with no choices, then an answer:
    the run counts all three calls' tokens and cost (it counted the answer's only: money
    spent and shown nowhere but the metrics, budgets overrun)."""
    register_price(model_name, input_per_mtok=1000.0, output_per_mtok=1000.0)  # $1.10 a call
    usage = {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}
    empty = Raw([*sse({"choices": [], "usage": usage}), b"data: [DONE]\n\n"])
    answer = {"choices": [{"index": 0, "delta": {"content": "FINAL ANSWER: 4"}}]}
    done = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage}
    whole = Raw([*sse(answer, done), b"data: [DONE]\n\n"])
    llm.script(model_name, [empty, empty, whole])
    result = await asyncio.wait_for(harness.run(model_name, "2+2?", memory=False), 60)
    assert result.output == "4" and len(llm.requests[model_name]) == 3
    assert (result.metadata.prompt_tokens, result.metadata.completion_tokens) == (3000, 300)
    assert result.metadata.cost == pytest.approx(3.3)


async def test_a_run_that_fails_on_billed_replies_counts_them(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """Every attempt billed (usage: 1,000 + 100 tokens each) and answered with no choices: the
    run ends as `llm_error` counting both calls' tokens and cost (it counted none: the bill
    went with the step's failure, and the run read only its message)."""
    register_price(model_name, input_per_mtok=1000.0, output_per_mtok=1000.0)  # $1.10 a call
    usage = {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}
    empty = Raw([*sse({"choices": [], "usage": usage}), b"data: [DONE]\n\n"])
    llm.script(model_name, [empty], repeat_last=True)
    result = await asyncio.wait_for(
        harness.run(model_name, "2+2?", llm_max_attempts=2, memory=False), 60
    )
    assert result.terminated_by == "llm_error" and len(llm.requests[model_name]) == 2
    assert (result.metadata.prompt_tokens, result.metadata.completion_tokens) == (2000, 200)
    assert result.metadata.cost == pytest.approx(2.2)


async def test_a_rate_limit_is_waited_out_for_its_patience_then_the_run_ends_saying_so(
    harness: Harness, llm: ScriptedLLM, model_name: str, monkeypatch: pytest.MonkeyPatch
):
    """A provider that rate-limits for longer than RATE_LIMIT_PATIENCE_SECONDS (1.5 s here,
    ten minutes by default) ends the run as llm_error, saying for how long; each wait was at
    least the backoff's, whatever `retry-after: 0` asked."""
    monkeypatch.setattr(llm_errors, "RATE_LIMIT_PATIENCE_SECONDS", 1.5)
    limited = HttpError(429, "Rate limit reached for requests", headers={"retry-after": "0"})
    llm.script(model_name, [limited], repeat_last=True)
    result = await asyncio.wait_for(
        harness.run(model_name, "What is 6*7?", llm_max_attempts=20, memory=False), timeout=60
    )
    assert result.terminated_by == "llm_error", result
    assert "HTTP 429: Rate limit reached for requests (rate limited for " in (result.error or "")
    assert 3 <= len(llm.requests[model_name]) <= 4  # at 0 s, ~0.6 s, ~1.9 s (and maybe one more)
