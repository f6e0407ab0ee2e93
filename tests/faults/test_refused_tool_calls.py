"""Groq's 400 `tool_use_failed` over real HTTP: the call its parser refused is taken from
what the model wrote (`failed_generation`) when it reads unambiguously, where the step was
asked again (billed again, against the agent's attempts); asked again when it does not."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from reactive_temporal.embedded.scripted_llm import HttpError, Reply, ScriptedLLM
from tests.workflow.conftest import Harness

pytestmark = [pytest.mark.faults, pytest.mark.workflow]


def tool_use_failed(written: str, **extra: Any) -> HttpError:
    """Groq's refusal of a call its parser could not read, what the model wrote beside it."""
    return HttpError(
        400,
        body={
            "error": {
                "message": "Failed to call a function. Please adjust your prompt. See "
                "'failed_generation' for more details.",
                "type": "invalid_request_error",
                "code": "tool_use_failed",
                "failed_generation": written,
            },
            **extra,
        },
    )


LLAMA_FORMS = {
    "Llama's tag": '<function=calculator>{"expression": "6*7"}</function>',
    "Llama's tag, comma": '<function=calculator,{"expression":"6*7"}></function>',
}


@pytest.mark.parametrize("name", list(LLAMA_FORMS))
async def test_a_refused_call_that_reads_is_made(
    name: str, harness: Harness, llm: ScriptedLLM, model_name: str
):
    """An agent with one LLM attempt ended `llm_error` on Groq's refusal of a call that was
    whole; with more, the model was asked (and billed) again. The call is made, marked as a
    call read from text (its id), and the refused call's usage is billed."""
    usage = {"prompt_tokens": 700, "completion_tokens": 20, "total_tokens": 720}
    llm.script(
        model_name,
        [
            tool_use_failed(LLAMA_FORMS[name], usage=usage),
            Reply("FINAL ANSWER: 42", usage=(10, 5)),
        ],
    )
    result = await asyncio.wait_for(
        harness.run(model_name, "6*7?", llm_max_attempts=1, memory=False), 60
    )
    assert (result.terminated_by, result.output) == ("final_answer", "42"), result.error
    sent = llm.requests[model_name]
    assert len(sent) == 2
    calls = [c for m in sent[1]["messages"] for c in m.get("tool_calls") or []]
    results = [m for m in sent[1]["messages"] if m["role"] == "tool"]
    assert [c["function"]["name"] for c in calls] == ["calculator"], calls
    assert calls[0]["id"].startswith("text_"), calls
    assert results and "42" in results[0]["content"], results
    assert result.metadata.prompt_tokens == 710, result.metadata


async def test_a_refused_call_that_does_not_read_is_asked_again(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """Arguments that are no JSON (`6*7` unquoted) leave the call to guess: asked again,
    as before, nothing run."""
    llm.script(
        model_name,
        [
            tool_use_failed('<function=calculator>{"expression": 6*7}</function>'),
            Reply("FINAL ANSWER: 42"),
        ],
    )
    result = await asyncio.wait_for(
        harness.run(model_name, "6*7?", llm_max_attempts=2, memory=False), 60
    )
    assert (result.terminated_by, result.output) == ("final_answer", "42"), result.error
    sent = llm.requests[model_name]
    assert len(sent) == 2 and sent[0]["messages"] == sent[1]["messages"]
