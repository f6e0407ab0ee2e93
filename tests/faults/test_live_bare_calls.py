"""A tool call a model writes into its text with no marker (Llama's bare JSON object), and a
step that learns mid-way that its model's calls are read from its text, in the live output of
a run over real HTTP through the real workflows: the call never shows as the model's answer,
and a JSON answer (one that is no call) still does."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from reactive_temporal.contracts.events import RunEvent
from reactive_temporal.embedded.scripted_llm import Endpoint, Reply, ScriptedLLM
from tests.support.live_text import seen_by_step
from tests.workflow.conftest import Harness

pytestmark = [pytest.mark.faults, pytest.mark.workflow]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def streamed(text: str) -> Reply:
    """`text` in chunks of about three characters, as a model streams its tokens."""
    return Reply(text, chunks=max(len(text) // 3, 1), chunk_delay=0.01)


async def events_of(harness: Harness, model: str, task: str) -> list[RunEvent]:
    agent = harness.agent(model, agent_id=unique("live"), memory=False)
    async with asyncio.timeout(90):  # a hang guard
        return [e async for e in agent.run_stream(task)]


def texts(events: list[RunEvent]) -> str:
    return "".join(e.delta or "" for e in events if e.type == "text")


async def test_a_bare_json_call_streams_as_its_tool_step_never_as_the_answer(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """Llama's JSON tool format under a server that does not parse it (vLLM without its
    `llama3_json` parser): the reply is the call object alone, no marker to say so. It
    streamed to the watcher as the model's answer, JSON and all, and stayed there."""
    model = llm.endpoint(f"llama3.2-{model_name}", Endpoint())
    call = json.dumps({"name": "calculator", "parameters": {"expression": "6*7"}})
    llm.script(model, [streamed(call), streamed("FINAL ANSWER: 42")])
    events = await events_of(harness, model, "What is 6*7?")
    result = events[-1].result
    assert result is not None and (result.terminated_by, result.output) == ("final_answer", "42")
    assert [(e.type, e.tool) for e in events if e.type.startswith("tool")] == [
        ("tool_start", "calculator"),
        ("tool_end", "calculator"),
    ]
    assert [answer.strip() for _, answer in seen_by_step(events).values()] == ["FINAL ANSWER: 42"]
    assert "{" not in texts(events) and "calculator" not in texts(events)


@pytest.mark.parametrize(
    "answer",
    [
        {"result": 42, "explanation": "6 times 7"},  # a JSON answer: known no call at once
        {"name": "rm_rf", "parameters": {"path": "/"}},  # a call's shape, no tool offered
    ],
    ids=["json-answer", "unoffered-tool"],
)
async def test_a_json_answer_is_still_shown_as_the_answer(
    harness: Harness, llm: ScriptedLLM, model_name: str, answer: dict[str, object]
):
    """JSON that is no call (other keys, or a tool the step does not offer: the record keeps
    it as the model's words) is the run's answer, and shows as it, once, whole."""
    model = llm.endpoint(f"llama3.2-{model_name}", Endpoint())
    written = json.dumps(answer)
    llm.script(model, [streamed(written)])
    events = await events_of(harness, model, "Answer in JSON")
    result = events[-1].result
    assert result is not None and result.output == written, result
    assert not any(e.type.startswith("tool") for e in events)
    assert [a for _, a in seen_by_step(events).values()] == [written]
    assert not any(e.restart for e in events if e.type == "text")


async def test_a_step_that_learns_its_calls_are_read_from_its_text_holds_them_back(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """A hosted model's name (its endpoint parses calls: none is read from its text) behind
    a proxy that takes no tools: the first step learns it from the refusal and asks again
    with the tools in the prompt, within the same step. The call the model then wrote into
    its text streamed as its answer at that step, though not at later ones."""
    model = llm.endpoint(f"gpt-4o-{model_name}", Endpoint(no_tools=True))
    block = json.dumps({"name": "calculator", "arguments": {"expression": "6*7"}})
    call = f"I will multiply.\n<tool_call>\n{block}\n</tool_call>"
    llm.script(model, [streamed(call), streamed("FINAL ANSWER: 42")])
    events = await events_of(harness, model, "What is 6*7?")
    result = events[-1].result
    assert result is not None and (result.terminated_by, result.output) == ("final_answer", "42")
    assert len(llm.rejected[model]) == 1  # the first step learned it, mid-step
    assert [(e.type, e.tool) for e in events if e.type.startswith("tool")] == [
        ("tool_start", "calculator"),
        ("tool_end", "calculator"),
    ]
    assert [answer.rstrip() for _, answer in seen_by_step(events).values()] == [
        "I will multiply.",
        "FINAL ANSWER: 42",
    ]
    assert "<tool" not in texts(events) and "6*7" not in texts(events)
