"""What a model replies, over real HTTP: text nothing downstream can encode, text that looks
like markers, payloads past every limit.

Rows: `input` is the list of scripted replies (a `Reply` or `HttpError` each; the last one
repeats); `expect` is the run's output, or with `options["observation"]` a distinctive part of
the first tool observation. Each run must end in one attempt per LLM step (no retried step:
a retry is a step billed twice), store nothing outside its own rows, and fail no workflow task.
More options: `config` (agent configuration), `debrief` (the stored debrief row holds
`expect` exactly), `terminated_by` (the expected ending), `error` (a distinctive part of the
run's error), `observations` (a distinctive part of every observation, in order),
`output_chars` (the output's length instead of `expect`).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from temporalio.client import Client

from reactive_temporal.builtin_tools import FILE_WRITE_MAX_CHARS
from reactive_temporal.contracts import names
from reactive_temporal.contracts.run import FINAL_ANSWER_TOOL
from reactive_temporal.embedded.scripted_llm import HttpError, Reply, ScriptedLLM, call
from reactive_temporal.limits import (
    REPLY_CONTENT_MAX_CHARS,
    SYNTHESIS_ITEMS_MAX,
    SYNTHESIS_TEXT_MAX_CHARS,
    SYNTHESIS_TOTAL_MAX_CHARS,
)
from tests.adversarial.cases import Hostile, params, table
from tests.adversarial.conftest import (
    StoreSnapshot,
    assert_no_failed_tasks,
    fetch,
    largest_event_bytes,
    observations,
    owned_by,
    started_attempts,
    unique,
)
from tests.workflow.conftest import Harness

WEDGED_TASK = "workflow code raised (RecursionError, csv.Error): the task failed on every replay"
PAYLOAD_BUDGET = 1_600_000
"""No event of any run here may come near Temporal's 2 MB payload limit."""
LITERAL_NUL_ESCAPE = "C:\\u0000\\temp"  # the six characters backslash-u-0-0-0-0: text, not NUL

LLM_REPLIES = table("llm-replies", [
    Hostile("llm-lone-surrogate-answer", [Reply("FINAL ANSWER: caf\ud800e")], "caf\ufffde",
            "the step failed to serialize and was retried, billed up to 25 times"),
    Hostile("llm-lone-surrogate-tool-arguments",
            [Reply(None, [call("calculator", raw_arguments='{"expression": "1+1\ud800"}')]),
             Reply("FINAL ANSWER: done")],
            "not an arithmetic expression: '1+1\ufffd'",
            "the tool call could not be stored", {"observation": True}),
    Hostile("llm-lone-surrogate-low-half", [Reply("FINAL ANSWER: \udfff then text")],
            "\ufffd then text", "the same, with the other half of a pair"),
    Hostile("llm-literal-nul-escape", [Reply(f"FINAL ANSWER: {LITERAL_NUL_ESCAPE}")],
            LITERAL_NUL_ESCAPE, "rewritten to \\ufffd in the stored debrief", {"debrief": True}),
    Hostile("llm-final-answer-in-prose",
            [Reply("I don't have the final answer yet; I need more data.")],
            "I don't have the final answer yet; I need more data.",
            "ended the run as final_answer with output 'yet; I need more data.' (now it is a "
            "plain reply: end_turn, its whole text)", {"terminated_by": "end_turn"}),
    Hostile("llm-final-answer-mid-line", [Reply("The FINAL ANSWER: is not here")],
            "The FINAL ANSWER: is not here", "the same, mid-line",
            {"terminated_by": "end_turn"}),
    Hostile("llm-final-answer-bold", [Reply("Checked twice.\n**Final Answer:** 42")], "42",
            "the control row: a real marker still ends the run", {"terminated_by": "final_answer"}),
    Hostile("llm-final-answer-call-deep-json",
            [Reply(None, [call(FINAL_ANSWER_TOOL, output="[" * 5_000 + "]" * 5_000,
                               format="json")]), Reply("FINAL ANSWER: flat")],
            "the JSON is nested too deeply to parse", WEDGED_TASK, {"observation": True}),
    Hostile("llm-final-answer-call-csv-field-over-limit",
            [Reply(None, [call(FINAL_ANSWER_TOOL, output="a\n" + "x" * 140_000,
                               format="csv")]), Reply("FINAL ANSWER: short")],
            "final-answer was not run: its arguments are 140,", WEDGED_TASK,
            {"observation": True}),
    Hostile("llm-final-answer-call-deep-arguments",
            [Reply(None, [call(FINAL_ANSWER_TOOL, raw_arguments='{"output": "x", "summary": '
                               + "[" * 50_000)]), Reply("FINAL ANSWER: flat")],
            "final-answer arguments are nested too deeply", WEDGED_TASK, {"observation": True}),
    Hostile("llm-final-answer-call-unknown-format",
            [Reply(None, [call(FINAL_ANSWER_TOOL, output="a: 1", format="yaml")]),
             Reply("FINAL ANSWER: a is 1")],
            "Unknown format 'yaml'", "an answer in a format nothing downstream knows",
            {"observation": True}),
    Hostile("llm-final-answer-call-blank-output",
            [Reply(None, [call(FINAL_ANSWER_TOOL, output=" \n ", summary="done")]),
             Reply("FINAL ANSWER: the answer")],
            "needs a non-empty 'output'", "a run ended as a success with no answer",
            {"observation": True}),
    Hostile("llm-huge-tool-names-and-ids",
            [Reply(None, [call(f"{t}{i}" + "n" * 90_000, call_id=f"{t}{i}" + "i" * 60_000, x=1)
                          for i in range(16)]) for t in "abc"]
            + [Reply("FINAL ANSWER: named")], "named",
            "names and ids no tool has, 90 KB each, carried in the run's state: its "
            "continue-as-new input was 4.4 MB, a workflow task that failed on every attempt",
            {"observations": ["unknown tool"] * 48}),
    Hostile("llm-tool-arguments-nested-deep",
            [Reply(None, [call("calculator", raw_arguments='{"expression": ' + "[" * 50_000)]),
             Reply("FINAL ANSWER: flat")],
            "[Tool error: invalid arguments for calculator: arguments are nested too deeply",
            "a RecursionError reported as the calculator's own failure", {"observation": True}),
    Hostile("llm-tool-arguments-huge-integer",
            [Reply(None, [call("calculator", raw_arguments='{"expression": ' + "9" * 6_000 + "}")]),
             Reply("FINAL ANSWER: flat")],
            "arguments are not valid JSON (Exceeds the limit (4300 digits)",
            "a 6,000-digit number parsed in the worker", {"observation": True}),
    Hostile("llm-megabytes-error-body", [HttpError(400, "e" * 3_000_000)], "",
            "a 3 MB provider error body: the failure was past Temporal's size limit, and the "
            "run's error said only 'Failure exceeds size limit'",
            {"terminated_by": "llm_error", "error": "LLM endpoint answered HTTP 400: eeee"}),
    Hostile("llm-forty-tool-calls",
            [Reply(None, [call("calculator", expression=f"{i}+1") for i in range(40)]),
             Reply("FINAL ANSWER: done")], "done",
            "40 activities at once from one turn (no cap on calls per turn)",
            {"observations": [str(i + 1) for i in range(16)]
             + ["was not run: this turn made 40 tool calls"] * 24}),
    Hostile("llm-megabyte-tool-arguments",
            [Reply(None, [call("file_write", path="adv-big.txt", content="x" * 1_000_000)]),
             Reply("FINAL ANSWER: refused")], "refused",
            "a 1 MB activity input, and a 2 MB activity result from file_write",
            {"observations": ["arguments are 1,000,038 characters"]}),
    Hostile("llm-max-size-file-write",
            [Reply(None, [call("file_write", path="adv-max.txt",
                               content="m" * FILE_WRITE_MAX_CHARS)]),
             Reply("FINAL ANSWER: written")], "written",
            "a maximum-size file_write made a 2 MB activity result",
            {"observations": [f"wrote {FILE_WRITE_MAX_CHARS} bytes"],
             "largest_event_bytes": 200_000}),
    Hostile("llm-megabytes-of-text", [Reply("FINAL ANSWER: " + "w" * 3_000_000)], "",
            "a 3 MB reply as the step's result, the run's result and the debrief's input",
            {"output_chars": REPLY_CONTENT_MAX_CHARS - len("FINAL ANSWER: ")}),
])  # fmt: skip


@pytest.fixture(scope="module")
async def replied(
    adv: Harness, llm: ScriptedLLM, client: Client, database_url: str
) -> dict[str, Any]:
    """Every row as its own run, all at once; what each ended with."""

    async def one(row: Hostile) -> dict[str, Any]:
        model = llm.script(unique("llm"), row.input, repeat_last=True)
        memory = bool(row.options.get("debrief"))
        agent = adv.agent(model, agent_id=unique("llm"), memory=memory,
                          **row.options.get("config", {}))  # fmt: skip
        result = await asyncio.wait_for(agent.run("Reply"), 120)
        if memory:
            await result.debrief_rich()
        return {"result": result, "agent": agent.name}

    before = await StoreSnapshot.take(database_url)
    outcomes = await asyncio.gather(*(one(row) for row in LLM_REPLIES))
    after = await StoreSnapshot.take(database_url)
    own = owned_by(*(o["result"].run_id for o in outcomes), *(o["agent"] for o in outcomes))
    return {
        "by_id": dict(zip([r.id for r in LLM_REPLIES], outcomes, strict=True)),
        "changes": after.changes_since(before, own=own),
    }


@pytest.mark.parametrize("row", params(LLM_REPLIES))
async def test_hostile_model_replies_get_clear_outcomes(
    row: Hostile, replied: dict[str, Any], client: Client, database_url: str
):
    result = replied["by_id"][row.id]["result"]
    found = [content for _, content in await observations(database_url, result.run_id)]
    if row.options.get("observation"):
        assert row.expect in found[0], found[0]
    elif "output_chars" in row.options:
        assert len(result.output) == row.options["output_chars"], len(result.output)
        assert "characters cut" in result.output
    else:
        assert result.output == row.expect
    if "terminated_by" in row.options:
        assert result.terminated_by == row.options["terminated_by"]
    if "error" in row.options:
        assert row.options["error"] in (result.error or ""), (result.error or "")[:300]
        assert len(result.error or "") < 2_000
    if "observations" in row.options:
        assert len(found) == len(row.options["observations"])
        for expected, content in zip(row.options["observations"], found, strict=True):
            assert expected in content, (expected, content[:300])
    if row.options.get("debrief"):
        [(output, debrief_json)] = await fetch(
            database_url, "SELECT output, debrief_json FROM agent_debriefs WHERE run_id = %s",
            (result.run_id,),
        )  # fmt: skip
        assert output == row.expect and row.expect in debrief_json["summary"]
    attempts = await started_attempts(client, result.run_id, names.LLM_STEP)
    assert attempts and set(attempts) == {1}, f"LLM steps retried: {attempts}"
    await assert_no_failed_tasks(client, result.run_id)
    limit = row.options.get("largest_event_bytes", PAYLOAD_BUDGET)
    assert await largest_event_bytes(client, result.run_id) <= limit


def test_model_replies_changed_nothing_stored_but_their_own(replied: dict[str, Any]):
    assert replied["changes"] == []


async def test_a_hostile_debrief_synthesis_is_bounded(
    adv: Harness, llm: ScriptedLLM, client: Client, database_url: str
):
    """The debrief model answers with 500 findings of 20,000 characters (10 MB): the debrief
    keeps what fits SYNTHESIS_TOTAL_MAX_CHARS, each clipped, and every payload stays small."""
    finding = "f" * 20_000
    synthesis = json.dumps({
        "summary": "s" * 50_000, "key_findings": [finding] * 500,
        "lessons_learned": ["l" * 9_000] * 100, "caveats": "c" * 30_000,
    })  # fmt: skip
    answer = "The long answer, " + "explained at length. " * 20
    model = llm.script(unique("synth"), [Reply(f"FINAL ANSWER: {answer}"), Reply(synthesis)],
                       repeat_last=True)  # fmt: skip
    result = await adv.agent(model, agent_id=unique("synth")).run("Explain")
    rich = await result.debrief_rich()
    assert rich is not None and rich.synthesized
    kept = [rich.summary, rich.caveats or "", *rich.key_findings, *rich.lessons_learned]
    assert 1 <= len(rich.key_findings) <= SYNTHESIS_ITEMS_MAX
    assert sum(map(len, kept)) <= SYNTHESIS_TOTAL_MAX_CHARS
    assert all(len(f) <= SYNTHESIS_TEXT_MAX_CHARS for f in rich.key_findings)
    assert len(rich.summary) <= SYNTHESIS_TEXT_MAX_CHARS and "characters cut" in rich.summary
    [(stored,)] = await fetch(
        database_url, "SELECT debrief_json FROM agent_debriefs WHERE run_id = %s",
        (result.run_id,),
    )  # fmt: skip
    assert stored["key_findings"] == rich.key_findings
    debrief_id = names.debrief_workflow_id(result.run_id)
    assert await largest_event_bytes(client, debrief_id) < 400_000
    await assert_no_failed_tasks(client, result.run_id, debrief_id)
