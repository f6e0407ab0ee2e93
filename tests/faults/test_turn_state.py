"""Endpoints that attach state of their own to a model's turn and want it back on that turn,
as received, in every later request: OpenRouter's `reasoning_details`, a LiteLLM proxy's
`thinking_blocks`. Over real HTTP, streamed and not (`test_provider_quirks` style)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from reactive_temporal.embedded.scripted_llm import Endpoint, Reply, ScriptedLLM, call
from tests.workflow.conftest import Harness

pytestmark = [pytest.mark.faults, pytest.mark.workflow]

ADDED = [
    {
        "type": "reasoning.text",
        "text": "Add 40 and 2 with the calculator.",
        "signature": "EqcDCkgICBACGAIqQDV0Mem0naIq1Zn2w==",
        "format": "anthropic-claude-v1",
        "index": 0,
    }
]
DOUBLED = [  # Gemini 3 through OpenRouter: its thought signature rides with the call's id
    {
        "type": "reasoning.text",
        "text": "**Doubling**\n\nNow double it: 42*2.",
        "format": "google-gemini-v1",
        "index": 0,
    },
    {
        "type": "reasoning.encrypted",
        "data": "CiUBjz1rX+QNZZDaA519jWkmEHkL1bakA2T4Xvum2KvF9e8Ip0JZ",
        "format": "google-gemini-v1",
        "id": "tool_calculator_wJMhKbJOiIeW",
        "index": 0,
    },
]
THOUGHT = [{"type": "thinking", "thinking": "Add 40 and 2 with the tool.", "signature": "EqQB-1"}]
REDACTED_AND_THOUGHT = [
    {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"},
    {"type": "thinking", "thinking": "Now double it.", "signature": "EqQB-2"},
]


def state_sent(request: dict[str, Any], field: str) -> list[Any]:
    """What each of a request's model turns carried back in `field`."""
    return [m.get(field) for m in request["messages"] if m["role"] == "assistant"]


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "unstreamed"])
async def test_openrouter_gets_each_turn_back_with_its_reasoning_details(
    streamed: bool, harness: Harness, llm: ScriptedLLM, model_name: str
):
    """OpenRouter's models that think (Anthropic's with thinking and tools, Gemini 3) attach
    `reasoning_details` to each turn and refuse a request whose turn that called tools comes
    back without them, or changed: every such run failed at its second step
    (`LlmRequestRejected`). Each later request carries each turn's array exactly as it came,
    put together from its fragments when streamed."""
    model = llm.endpoint(model_name, Endpoint(state_back="reasoning_details"))
    llm.script(
        model,
        [
            Reply(None, [call("calculator", expression="40+2")], reasoning_details=ADDED),
            Reply(None, [call("calculator", expression="42*2")], reasoning_details=DOUBLED),
            Reply("FINAL ANSWER: 84"),
        ],
    )
    result = await asyncio.wait_for(
        harness.run(model, "What is (40+2)*2?", memory=False, live_output=streamed), 60
    )
    assert (result.terminated_by, result.output) == ("final_answer", "84"), result.error
    assert llm.rejected[model] == []
    requests = llm.requests[model]
    assert [bool(r.get("stream")) for r in requests] == [streamed] * 3
    assert [state_sent(r, "reasoning_details") for r in requests] == [
        [],
        [ADDED],
        [ADDED, DOUBLED],
    ]


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "unstreamed"])
async def test_a_litellm_proxy_gets_each_turn_back_with_its_thinking_blocks(
    streamed: bool, harness: Harness, llm: ScriptedLLM, model_name: str
):
    """A LiteLLM proxy in front of Anthropic with thinking returns the turn's `thinking_blocks`
    (with their signatures; a redacted block's data) and makes Anthropic's blocks of them when
    they come back; without them, Anthropic refuses the request ("Expected `thinking` or
    `redacted_thinking`, but found `tool_use`"). Each later request carries each turn's blocks
    exactly as they came, put together from LiteLLM's deltas when streamed."""
    model = llm.endpoint(model_name, Endpoint(state_back="thinking_blocks"))
    llm.script(
        model,
        [
            Reply(
                None,
                [call("calculator", expression="40+2")],
                reasoning="Add 40 and 2 with the tool.",
                thinking_blocks=THOUGHT,
            ),
            Reply(
                None, [call("calculator", expression="42*2")], thinking_blocks=REDACTED_AND_THOUGHT
            ),
            Reply("FINAL ANSWER: 84"),
        ],
    )
    result = await asyncio.wait_for(
        harness.run(model, "What is (40+2)*2?", memory=False, live_output=streamed), 60
    )
    assert (result.terminated_by, result.output) == ("final_answer", "84"), result.error
    assert llm.rejected[model] == []
    assert [state_sent(r, "thinking_blocks") for r in llm.requests[model]] == [
        [],
        [THOUGHT],
        [THOUGHT, REDACTED_AND_THOUGHT],
    ]
