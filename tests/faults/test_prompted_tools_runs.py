"""A model whose server takes no tools (`ModelCapabilities.tools_in_prompt`: Ollama for a model
whose template has none, llama.cpp without `--jinja`), over real HTTP through the real
workflows: chat on both paths, and a run whose offered tools change from step to step."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from temporalio.client import Client

from reactive_temporal.config import Settings
from reactive_temporal.embedded.scripted_llm import Endpoint, Reply, ScriptedLLM, Step
from reactive_temporal.prompts import SYNTHESIS_SYSTEM_PROMPT, UNREAD_CALLS_NUDGE
from reactive_temporal.tools import tool
from tests.support.live_text import adaptations, seen_by_step
from tests.workflow.conftest import Harness, running_worker

pytestmark = [pytest.mark.faults, pytest.mark.workflow]

SYNTHESIS = {
    "summary": "The agent multiplied with the calculator.",
    "key_findings": ["6 * 7 = 42"],
    "errors_encountered": [],
    "lessons_learned": [],
    "caveats": "",
}
OFFERED_NOW = "Offered at this step too"
"""How a request says which tools it offers besides the system message's
(`prompted_tools.offered_now`)."""


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def written(name: str, **arguments: Any) -> str:
    """A call as the prompt asks the model to write it."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def system_of(request: dict[str, Any]) -> str:
    first = request["messages"][0]
    return str(first.get("content") or "") if first["role"] == "system" else ""


def served(llm: ScriptedLLM, model: str) -> list[dict[str, Any]]:
    """The requests the endpoint answered (a refused one carried `tools`)."""
    return [r for r in llm.requests[model] if "tools" not in r]


async def test_chat_on_both_paths_with_a_model_whose_server_takes_no_tools(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """A direct turn, then a turn on the tool path (a capped child run): the run's first
    request learns that the server takes no tools, the calculator's call is read from the
    text and runs, and the turn's reply is the run's answer. Every step of the tool path's
    run sends the same system message, `final-answer` offered or not."""
    model = llm.endpoint(f"gemma3-{model_name}", Endpoint(no_tools=True))

    def respond(request: dict[str, Any]) -> Step:
        system = system_of(request)
        if system == SYNTHESIS_SYSTEM_PROMPT:
            return Reply(json.dumps(SYNTHESIS))
        if "<tools>" not in system:
            return Reply("Hello! I multiply numbers with my calculator.")
        turns = json.dumps(request["messages"][1:])
        if "<tool_response" not in turns:
            return Reply(f"I will multiply.\n{written('calculator', expression='6*7')}")
        if OFFERED_NOW in turns:
            return Reply(written("final-answer", output="42", format="text", summary="6*7."))
        return Reply("FINAL ANSWER: 42")  # the gate may be shut: the answer as a line

    llm.script(model, respond)
    session = harness.agent(model, agent_id=unique("chat")).session()
    direct = await asyncio.wait_for(session.chat("Hi!", use_tools=False), 60)
    tools = await asyncio.wait_for(session.chat("calculate 6*7", use_tools=True), 60)
    assert (direct.routed_via, direct.message) == (
        "direct-llm",
        "Hello! I multiply numbers with my calculator.",
    )
    assert (tools.routed_via, tools.message, tools.tools_used) == (
        "react-loop",
        "42",
        ["calculator"],
    )
    [refused] = llm.rejected[model]  # the tool path's first request: learned once
    assert "does not support tools" in refused["error"]["message"]
    requests = served(llm, model)
    assert not any(
        m["role"] == "tool" or "tool_calls" in m for r in requests for m in r["messages"]
    )
    run_steps = [r for r in requests if "<tools>" in system_of(r)]
    assert len(run_steps) == 2
    assert system_of(run_steps[0]) == system_of(run_steps[1])  # byte for byte
    assert OFFERED_NOW in run_steps[1]["messages"][-1]["content"]
    call_turn = run_steps[1]["messages"][-2]
    assert call_turn == {
        "role": "assistant",
        "content": f"I will multiply.\n{written('calculator', expression='6*7')}",
    }


async def test_a_run_whose_offered_tools_change_keeps_its_system_message(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """`final-answer` is offered once its gate opens (a required tool called, no error
    pending: errors are forgiven from iteration 4): written into the system message, it
    rewrote it at that step, and the provider's prompt cache was lost for the rest of the
    run. Every request of the run now sends the same system message, which never lists
    `final-answer`; the step that offers it says so after its latest message. A call to a
    tool the step does not offer is refused as before: `final-answer` before the required
    tool ran is judged and turned down, a tool the run has not is unknown."""
    model = llm.endpoint(f"gemma3-{model_name}", Endpoint(no_tools=True))
    multiply = Reply(written("calculator", expression="6*7"))
    llm.script(
        model,
        [
            Reply(
                written("final-answer", output="42", format="text", summary="Guessed.")
                + "\n"
                + written("rm_rf", path="/")
            ),
            multiply,  # iteration 1: an error is pending, the gate stays shut until 4
            multiply,
            multiply,
            Reply(written("final-answer", output="42", format="text", summary="6*7.")),
        ],
    )
    agent = harness.agent(
        model, agent_id=unique("gate"), memory=False, required_tools=["calculator"]
    )
    result = await asyncio.wait_for(agent.run("What is 6*7?"), 60)
    assert (result.terminated_by, result.output) == ("final_answer_tool", "42"), result
    requests = served(llm, model)
    assert len(requests) == 5
    systems = {system_of(r) for r in requests}
    assert len(systems) == 1  # byte for byte, final-answer offered or not
    [system] = systems
    assert '"name": "calculator"' in system and '"final-answer"' not in system
    offered = [OFFERED_NOW in json.dumps(r["messages"]) for r in requests]
    assert offered == [False, False, False, False, True]
    assert '"name": "final-answer"' in requests[-1]["messages"][-1]["content"]
    refusals = requests[1]["messages"][-1]["content"]
    assert 'name="final-answer">\n⚠️ Cannot finalize yet. Still need to call: calculator' in (
        refusals
    )
    assert "unknown tool 'rm_rf'" in refusals


multiplied: list[str] = []


@tool
async def multiply(expression: str) -> str:
    """Multiply the numbers in an expression such as 6*7."""
    multiplied.append(expression)
    left, right = expression.split("*")
    return str(int(left) * int(right))


async def test_a_call_block_that_does_not_read_is_never_the_run_s_answer(
    client: Client, settings: Settings, llm: ScriptedLLM, model_name: str
):
    """The model's first block names no tool (unquoted keys, as small models write them): it
    stayed in the text, and the run ended at once as a success whose output was the markup,
    the model never told. Taken out of the words, the model is told its call could not be
    read and how to write one; it writes it again, the tool runs, and it answers."""
    model = llm.endpoint(f"gemma3-{model_name}", Endpoint(no_tools=True))
    llm.script(
        model,
        [
            Reply('Let me multiply.\n<tool_call>\n{name: "multiply", arguments: {expression: '
                  '"6*7"}}\n</tool_call>'),
            Reply(f"Again.\n{written('multiply', expression='6*7')}"),
            Reply("FINAL ANSWER: 42"),
        ],
    )  # fmt: skip
    multiplied.clear()
    async with running_worker(client, settings, extra_tools=[multiply]) as harness:
        result = await asyncio.wait_for(
            harness.run(model, "What is 6*7?", agent_id=unique("unread"), memory=False,
                        tools=["multiply"]),
            60,
        )  # fmt: skip
    assert (result.terminated_by, result.output) == ("final_answer", "42"), result
    assert multiplied == ["6*7"]  # once: the block that did not read never ran
    assert adaptations(model, "unread_text_calls") == 1  # counted, and said once in the log
    requests = served(llm, model)
    assert len(requests) == 3
    turn, told = requests[1]["messages"][-2:]
    assert turn == {"role": "assistant", "content": "Let me multiply."}
    assert told["role"] == "user" and told["content"].endswith(UNREAD_CALLS_NUDGE)
    assert "{name:" not in json.dumps(requests[2]["messages"])  # never sent back
    assert requests[2]["messages"][-1]["content"].endswith(
        '<tool_response call="text_4_0" name="multiply">\n42\n</tool_response>'
    )


async def test_a_call_block_whose_arguments_do_not_read_is_refused_by_its_tool(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """A block cut short (`{"expression": "6*7"` with no closing braces) names its tool: it is
    made with its arguments as written, the calculator refuses them by name, and the model,
    reading why, writes the call again. It was the run's answer, markup and all."""
    model = llm.endpoint(f"gemma3-{model_name}", Endpoint(no_tools=True))
    broken = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "6*7"\n</tool_call>'
    llm.script(
        model,
        [
            Reply(broken),
            Reply(written("calculator", expression="6*7")),
            Reply("FINAL ANSWER: 42"),
        ],
    )
    agent = harness.agent(model, agent_id=unique("args"), memory=False)
    result = await asyncio.wait_for(agent.run("What is 6*7?"), 60)
    assert (result.terminated_by, result.output) == ("final_answer", "42"), result
    requests = served(llm, model)
    refused = requests[1]["messages"][-1]["content"]
    assert '<tool_response call="text_2_0" name="calculator">' in refused
    assert "[Tool error: invalid arguments for calculator: arguments are not valid JSON" in refused
    turn = requests[1]["messages"][-2]  # the call as it went to the tool
    assert turn["role"] == "assistant"
    assert '"invalid_arguments": "{\\"expression\\": ' in turn["content"]
    assert requests[2]["messages"][-1]["content"].endswith(
        '<tool_response call="text_4_0" name="calculator">\n42\n</tool_response>'
    )


async def test_a_chat_reply_that_is_only_a_call_block_is_not_that_markup(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """A direct turn has no tools: a block the model wrote, read or not, was the chat's
    reply, markup and all; the words before one are the reply."""
    model = llm.endpoint(f"gemma3-{model_name}", Endpoint(no_tools=True))
    llm.script(
        model,
        [
            Reply('<tool_call>\n{"name": "calculator", "arguments": {"expression": "2+'),
            Reply('Hello!\n<tool_call>\n{"nam'),
        ],
    )
    session = harness.agent(model, agent_id=unique("chat")).session()
    first = await asyncio.wait_for(session.chat("What is 2+2?", use_tools=False), 60)
    second = await asyncio.wait_for(session.chat("Hi!", use_tools=False), 60)
    assert (first.message, second.message) == ("(no answer)", "Hello!")


async def test_a_call_block_streams_as_the_tool_step_it_becomes_not_as_the_answer(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """The model's call, streamed in small chunks, was shown live as its answer, JSON and
    all: the words before it stream as the answer, the call as its tool step."""
    model = llm.endpoint(f"gemma3-{model_name}", Endpoint(no_tools=True))
    call = f"I will multiply.\n{written('calculator', expression='6*7')}"
    llm.script(
        model,
        [Reply(call, chunks=len(call) // 3, chunk_delay=0.01), Reply("FINAL ANSWER: 42")],
    )
    agent = harness.agent(model, agent_id=unique("live"), memory=False)
    async with asyncio.timeout(90):  # a hang guard
        events = [e async for e in agent.run_stream("What is 6*7?")]
    result = events[-1].result
    assert result is not None and (result.terminated_by, result.output) == ("final_answer", "42")
    assert [(e.type, e.tool) for e in events if e.type.startswith("tool")] == [
        ("tool_start", "calculator"),
        ("tool_end", "calculator"),
    ]
    assert [(t, a.rstrip()) for t, a in seen_by_step(events).values()] == [
        ("", "I will multiply."),
        ("", "FINAL ANSWER: 42"),
    ]
    texts = "".join(e.delta or "" for e in events if e.type == "text")
    assert "<tool" not in texts and "calculator" not in texts and "6*7" not in texts
