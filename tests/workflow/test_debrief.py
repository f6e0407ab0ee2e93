"""The debrief on a real dev server and Postgres: instant, then rich, durable and persisted once."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError

from reactive_temporal.contracts import names
from reactive_temporal.embedded.scripted_llm import HttpError, Reply, ScriptedLLM, call
from reactive_temporal.embedded.scripted_replies import Responder
from tests.conftest import wait_for
from tests.workflow.conftest import Harness

pytestmark = pytest.mark.workflow

LONG_ANSWER = "The three latest PRs add retries, fix the CSV export and document the API. " * 3
SYNTHESIS = {
    "summary": "The agent computed the figures and summarized three PRs.",
    "key_findings": ["PR 12 changed the most files"],
    "errors_encountered": [],
    "lessons_learned": ["Always double-check units"],
    "caveats": "",
}


def held(reply: Reply, release: threading.Event) -> Responder:
    """A synthesis that answers `reply` once the test sets `release` (after 90 s at most: a
    hang guard), so what happens before it is done does not race a delay a loaded machine
    can outrun."""

    def respond(request: dict) -> Reply:
        release.wait(90)
        return reply

    return respond


def non_trivial_run(llm: ScriptedLLM, model: str) -> str:
    return llm.script(
        model,
        [
            Reply(None, [call("calculator", expression="12*3")]),
            Reply(
                None, [call("final-answer", output=LONG_ANSWER, format="text", summary="Did it.")]
            ),
        ],
    )


async def debrief_rows(harness: Harness, run_id: str) -> list[dict]:
    async with harness.store.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT synthesized, debrief_json FROM agent_debriefs WHERE run_id = %s", (run_id,)
        )
        return [{"synthesized": r[0], "debrief": r[1]} for r in await cur.fetchall()]


async def test_run_returns_before_a_slow_synthesis(harness: Harness, llm: ScriptedLLM, model_name):
    non_trivial_run(llm, model_name)
    release = threading.Event()
    synth = llm.script(f"{model_name}-debrief", held(Reply(json.dumps(SYNTHESIS)), release))
    agent = harness.agent(model_name, debrief_model=synth)

    try:  # the synthesis is held: run() returns without it, off its critical path
        result = await agent.run("Summarize the 3 latest PRs")
        child = harness.client.get_workflow_handle(names.debrief_workflow_id(result.run_id))
        assert (await child.describe()).status == WorkflowExecutionStatus.RUNNING
    finally:
        release.set()
    assert result.debrief is not None and result.debrief.synthesized is False  # the instant one
    assert result.debrief.outcome == "success"
    assert [t.name for t in result.debrief.tools_used] == ["calculator"]  # no final-answer entry

    rich = await result.debrief_rich()
    assert rich is not None and rich.synthesized
    assert rich.summary == SYNTHESIS["summary"]
    assert rich.lessons_learned == ["Always double-check units"]
    assert rich.metrics.synthesis_tokens is not None and rich.metrics.synthesis_tokens.total > 0
    assert rich.metrics.tokens == result.metadata.tokens_used  # synthesis not counted in the run
    rows = await debrief_rows(harness, result.run_id)
    assert len(rows) == 1 and rows[0]["synthesized"] is True
    assert rows[0]["debrief"]["summary"] == SYNTHESIS["summary"]


async def test_trivial_run_makes_no_synthesis_call(harness: Harness, llm: ScriptedLLM, model_name):
    llm.script(model_name, [Reply("FINAL ANSWER: 4")])
    synth = llm.script(f"{model_name}-debrief", [Reply(json.dumps(SYNTHESIS))])
    result = await harness.agent(model_name, debrief_model=synth).run("2+2?")
    rich = await result.debrief_rich()
    assert rich == result.debrief and rich is not None and not rich.synthesized
    assert llm.requests[synth] == []
    rows = await debrief_rows(harness, result.run_id)
    assert len(rows) == 1 and rows[0]["synthesized"] is False


async def test_no_memory_means_no_debrief_and_no_row(harness: Harness, llm, model_name):
    non_trivial_run(llm, model_name)
    result = await harness.agent(model_name, memory=False).run("Summarize")
    assert result.debrief is None
    assert await result.debrief_rich() is None
    with pytest.raises(RPCError):
        await harness.client.get_workflow_handle(
            names.debrief_workflow_id(result.run_id)
        ).describe()
    assert await debrief_rows(harness, result.run_id) == []


async def test_unusable_synthesis_answer_keeps_the_fallback(harness: Harness, llm, model_name):
    non_trivial_run(llm, model_name)
    synth = llm.script(f"{model_name}-debrief", [Reply("I think it went well, overall!")])
    result = await harness.agent(model_name, debrief_model=synth).run("Summarize")
    rich = await result.debrief_rich()
    assert rich is not None and not rich.synthesized and rich.summary == "Did it."
    assert len(await debrief_rows(harness, result.run_id)) == 1


async def test_failing_synthesis_endpoint_keeps_the_fallback(harness: Harness, llm, model_name):
    non_trivial_run(llm, model_name)
    synth = llm.script(f"{model_name}-debrief", [HttpError(500, "down")], repeat_last=True)
    result = await harness.agent(model_name, debrief_model=synth).run("Summarize")
    rich = await result.debrief_rich()
    assert rich is not None and not rich.synthesized
    assert len(llm.requests[synth]) == 3  # attempts are capped
    assert len(await debrief_rows(harness, result.run_id)) == 1


async def test_second_run_sees_the_first_runs_lessons(harness: Harness, llm, model_name):
    agent_id = f"learner-{model_name}"
    non_trivial_run(llm, model_name)
    synth = llm.script(f"{model_name}-debrief", [Reply(json.dumps(SYNTHESIS))])
    first = await harness.agent(model_name, agent_id=agent_id, debrief_model=synth).run("Run 1")
    await first.debrief_rich()

    second_model = llm.script(f"{model_name}-2", [Reply("FINAL ANSWER: ok")])
    second = await harness.agent(second_model, agent_id=agent_id).run("Run 2: mind the units")
    system, turn = llm.requests[second_model][0]["messages"]
    # memory is quoted data after the task (in its user turn), never system instructions
    assert turn["role"] == "user" and turn["content"].startswith("Run 2: mind the units\n\n")
    notes = {"content": turn["content"].removeprefix("Run 2: mind the units\n\n")}
    assert notes["content"].startswith("Notes from earlier runs.")
    assert f"> Last run (0h ago, {first.run_id}): success" in notes["content"]
    assert f"> {SYNTHESIS['summary']}" in notes["content"]
    assert f"> Lesson from {first.run_id} (" in notes["content"]
    assert "Always double-check units" in notes["content"]
    assert "double-check" not in system["content"] and SYNTHESIS["summary"] not in system["content"]
    assert second.success


async def test_rejected_final_answer_does_not_make_the_run_partial(
    harness: Harness, llm, model_name
):
    llm.script(
        model_name,
        [
            Reply(None, [call("calculator", expression="6*7")]),
            Reply(None, [call("final-answer", output="{bad", format="json", summary="s")]),
            Reply(None, [call("final-answer", output='{"a": 42}', format="json", summary="s")]),
        ],
    )
    result = await harness.run(model_name, "JSON please")
    assert result.debrief is not None
    assert result.debrief.outcome == "success"  # upstream says "partial"
    assert result.debrief.errors_encountered == []
    assert [t.name for t in result.debrief.tools_used] == ["calculator"]


async def test_audit_rationale_lands_in_the_debrief_and_leaves_the_transcript(
    harness: Harness, llm: ScriptedLLM, model_name
):
    llm.script(
        model_name,
        [
            Reply(
                'I will compute.\n<rationale call="1">{"why": "Arithmetic needs the '
                'calculator", "confidence": 0.9}</rationale>',
                [call("calculator", expression="7*6")],
            ),
            Reply("FINAL ANSWER: 42"),
        ],
    )
    result = await harness.run(model_name, "7*6?", audit_rationale=True)
    first_request, second_request = llm.requests[model_name]
    assert "Decision Rationale (MANDATORY" in first_request["messages"][0]["content"]
    assistant = next(m for m in second_request["messages"] if m["role"] == "assistant")
    assert assistant["role"] == "assistant" and assistant["content"] == "I will compute."
    assert result.debrief is not None
    (entry,) = result.debrief.rationale
    assert (entry.iteration, entry.decision, entry.tool_name) == (1, "tool-selection", "calculator")
    assert entry.rationale.why == "Arithmetic needs the calculator"
    assert "## Decision Rationale" in result.debrief.markdown


async def test_rationale_prompt_is_off_by_default(harness: Harness, llm, model_name):
    llm.script(model_name, [Reply("FINAL ANSWER: ok")])
    await harness.run(model_name, "hi")
    assert "Decision Rationale" not in llm.requests[model_name][0]["messages"][0]["content"]


async def test_dispose_waits_for_rich_debriefs_within_a_bound(harness: Harness, llm, model_name):
    non_trivial_run(llm, model_name)
    release = threading.Event()
    synth = llm.script(f"{model_name}-debrief", held(Reply(json.dumps(SYNTHESIS)), release))
    agent = harness.agent(model_name, debrief_model=synth)
    result = await agent.run("Summarize, then leave")
    waiting = asyncio.create_task(agent.wait_for_debriefs(30))  # what dispose() does first
    try:
        await wait_for(lambda: len(llm.requests[synth]) == 1, seconds=60)
        done, _ = await asyncio.wait({waiting}, timeout=1.0)
        assert not done  # it waits while the synthesis is held
    finally:
        release.set()
    assert await waiting == []  # and returns once it is done
    rows = await debrief_rows(harness, result.run_id)
    assert len(rows) == 1 and rows[0]["synthesized"] is True

    late_release = threading.Event()
    slow = llm.script(f"{model_name}-slow", held(Reply(json.dumps(SYNTHESIS)), late_release))
    llm.script(
        model_name,
        [
            Reply(None, [call("calculator", expression="1+2")]),
            Reply(None, [call("final-answer", output=LONG_ANSWER, format="text", summary="S.")]),
        ],
    )
    late_agent = harness.agent(model_name, debrief_model=slow)
    late = await late_agent.run("Again")
    try:  # reported as not done: the wait ended at its bound, the synthesis still held
        assert await asyncio.wait_for(late_agent.wait_for_debriefs(0.5), 60) == [late.run_id]
    finally:
        late_release.set()
    late_rich = await late.debrief_rich()
    assert late_rich is not None and late_rich.synthesized  # it still finishes, durably


async def test_the_child_builds_the_deterministic_debrief_the_run_returned(
    harness: Harness, llm, model_name
):
    """A run's history holds its deterministic debrief once, in its result: the debrief
    child's input carries none, and the child builds the same one from what it is given."""
    non_trivial_run(llm, model_name)
    synth = llm.script(f"{model_name}-debrief", [Reply("Not JSON, so the fallback stands.")])
    result = await harness.agent(model_name, debrief_model=synth).run("Summarize")
    rich = await result.debrief_rich()
    assert rich is not None and not rich.synthesized and result.debrief is not None
    billed = {"metrics": {"synthesis_tokens"}}  # the prose answer's bill (synthesis-bill-kept)
    assert rich.model_dump(exclude=billed) == result.debrief.model_dump(exclude=billed)
    assert (
        rich.metrics.synthesis_tokens is not None
        and result.debrief.metrics.synthesis_tokens is None
    )
    child = harness.client.get_workflow_handle(names.debrief_workflow_id(result.run_id))
    started = (await child.fetch_history()).events[0].workflow_execution_started_event_attributes
    child_input = json.loads(started.input.payloads[0].data)
    assert child_input["synthesize"] is True and "fallback" not in child_input
