"""Endings that tell the truth: no finish before the required tools ran, and a run that
fails still teaches (a synthesized debrief naming the cause, lessons stored)."""

from __future__ import annotations

import json

import pytest

from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from tests.workflow.conftest import Harness

pytestmark = pytest.mark.workflow

LESSON = "Call current_time before answering a question about the time."


async def test_a_plain_text_ending_before_a_required_tool_is_refused(
    harness: Harness, llm: ScriptedLLM, model_name: str
) -> None:
    llm.script(
        model_name,
        [
            Reply("It is probably noon."),  # a plain reply: used to end the run as a success
            Reply("FINAL ANSWER: noon"),  # the text marker: refused too
            Reply(None, [call("current_time")]),
            Reply("FINAL ANSWER: It is the time the clock said."),
        ],
    )
    result = await harness.run(model_name, "What time is it?", required_tools=["current_time"])
    assert result.success and result.terminated_by == "final_answer"
    assert result.output == "It is the time the clock said."
    assert result.tools_used == ["current_time"]
    requests = llm.requests[model_name]
    for refused in (requests[1], requests[2]):
        nudge = refused["messages"][-1]
        assert nudge["role"] == "user" and "requires calling current_time" in nudge["content"]


async def test_a_run_refused_to_its_cap_ends_max_iterations_and_is_not_a_success(
    harness: Harness, llm: ScriptedLLM, model_name: str
) -> None:
    llm.script(model_name, [Reply("The answer is 4.")], repeat_last=True)
    result = await harness.run(
        model_name, "What is 2+2?", required_tools=["calculator"], max_iterations=3, memory=False
    )
    assert result.terminated_by == "max_iterations" and result.success is False
    assert result.metadata.iterations == 3


async def test_a_max_iterations_run_gets_a_synthesized_debrief_naming_the_cap(
    harness: Harness, llm: ScriptedLLM, model_name: str
) -> None:
    llm.script(model_name, [Reply(None, [call("calculator", expression="1+1")])], repeat_last=True)
    synthesis = {
        "summary": "The agent kept adding and never checked the clock.",
        "key_findings": [],
        "errors_encountered": [],
        "lessons_learned": [LESSON],
        "caveats": "",
    }
    synth = llm.script(f"{model_name}-debrief", [Reply(json.dumps(synthesis))])
    agent = harness.agent(
        model_name, agent_id=f"capped-{model_name}", debrief_model=synth, max_iterations=2,
        required_tools=["current_time"],
    )  # fmt: skip
    result = await agent.run("Add, then tell the time")
    assert result.terminated_by == "max_iterations" and not result.success
    instant = result.debrief
    assert instant is not None
    cap = (
        "Stopped at the iteration cap (2 iterations) before finishing; "
        "required tools never called: current_time"
    )
    assert cap in instant.errors_encountered and instant.confidence == "medium"

    rich = await result.debrief_rich()
    assert rich is not None and rich.synthesized  # a failed run is never trivial
    assert cap in rich.errors_encountered and rich.lessons_learned == [LESSON]
    assert rich.confidence == "medium"
    prompt = llm.requests[synth][0]["messages"][-1]["content"]
    assert "Terminated by: max_iterations" in prompt and cap in prompt
    async with harness.store.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT lesson FROM agent_lessons WHERE run_id = %s", (result.run_id,)
        )
        assert [r[0] for r in await cur.fetchall()] == [LESSON]
