"""The operator's `final_answer` signal: a malformed answer is ignored with a logged reason.

Rows: `input` is the signal's payload as JSON data (a FinalAnswerCapture's fields, or
something that is not one); `expect` is "ignored" (the run goes on and ends with its own
model's answer) or "accepted" (it ends with the operator's output); `options["logged"]` is
the reason the worker logs for an ignored signal, under the run's workflow id;
`options["memory"]` runs the agent with memory (the answer then travels in the debrief too),
`options["summary_clipped"]` expects the summary and confidence clipped to their limits. The signal
arrives while the run's first LLM call is in flight. Either way no workflow task fails (one
used to fail on every replay), and nothing stored changes but the run's own rows.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from temporalio.client import Client

from reactive_temporal.contracts import names
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM
from reactive_temporal.limits import (
    ANSWER_MAX_CHARS,
    ANSWER_SUMMARY_MAX_CHARS,
    CONFIDENCE_MAX_CHARS,
)
from tests.adversarial.cases import Hostile, params, table
from tests.adversarial.conftest import StoreSnapshot, assert_no_failed_tasks, owned_by, unique
from tests.workflow.conftest import Harness

OWN_ANSWER = "the model's own answer"
WEDGED = "the workflow task raised on every replay: the run was wedged for good"
DROPPED = "dropping the signal"
"""What the SDK logs when a signal's payload is not a FinalAnswerCapture at all."""

SIGNALS = table("operator-signal", [
    Hostile("signal-well-formed", {"output": "42", "format": "text", "summary": "ok"},
            "accepted", "the control row: an operator can end a run"),
    Hostile("signal-deep-json", {"output": "[" * 100_000, "format": "json"}, "ignored", WEDGED,
            {"logged": "nested too deeply"}),
    Hostile("signal-deep-closed-json", {"output": "[" * 3_000 + "]" * 3_000, "format": "json"},
            "ignored", WEDGED, {"logged": "nested too deeply"}),
    Hostile("signal-csv-field-over-limit", {"output": "a\n" + "x" * 140_000, "format": "csv"},
            "ignored", WEDGED, {"logged": "the limit is 100,000"}),
    Hostile("signal-invalid-json", {"output": "{not json", "format": "json"}, "ignored",
            "an answer that does not parse as its own format",
            {"logged": "output contains invalid JSON"}),
    Hostile("signal-blank-output", {"output": " \n\t ", "format": "text"}, "ignored",
            "a run ended with an empty answer", {"logged": "the output is empty"}),
    Hostile("signal-unknown-format", {"output": "a: 1", "format": "yaml"}, "ignored",
            "an answer in a format nothing downstream knows", {"logged": "unknown format 'yaml'"}),
    Hostile("signal-ragged-csv", {"output": "a,b\n1,2,3", "format": "csv"}, "ignored",
            "a CSV answer that is not a table", {"logged": "row 2 has 3 columns"}),
    Hostile("signal-answer-over-limit", {"output": "y" * (ANSWER_MAX_CHARS + 1)}, "ignored",
            "a 100 KB answer carried twice in the result, the debrief and the agent's state",
            {"logged": "the limit is 100,000"}),
    Hostile("signal-answer-over-bytes", {"output": "\x01" * 60_000}, "ignored",
            "60,000 control characters, six bytes each in JSON: an answer within the characters "
            "that made a result over 2 MB", {"logged": "the limit is 310,000"}),
    Hostile("signal-summary-over-limit",
            {"output": "42", "summary": "s" * 900_000, "confidence": "c" * 300_000},
            "accepted", "a result over 2 MB with the summary in it three times: the run's last "
            "workflow task failed forever", {"memory": True, "summary_clipped": True}),
    Hostile("signal-output-not-a-string", {"output": {"nested": [1, 2]}, "format": "json"},
            "ignored", "a payload that is not a FinalAnswerCapture", {"logged": DROPPED}),
    Hostile("signal-not-an-object", "42", "ignored", "a payload that is not even an object",
            {"logged": DROPPED}),
])  # fmt: skip


class Captured(logging.Handler):
    """Every log record the worker writes about a workflow, by workflow id."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.by_workflow: dict[str, list[str]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        details = getattr(record, "temporal_workflow", None)
        if isinstance(details, dict) and isinstance(details.get("workflow_id"), str):
            self.by_workflow.setdefault(details["workflow_id"], []).append(record.getMessage())


@pytest.fixture(scope="module")
def worker_log() -> Iterator[Captured]:
    captured = Captured()
    logger = logging.getLogger("temporalio")
    logger.addHandler(captured)
    try:
        yield captured
    finally:
        logger.removeHandler(captured)


@pytest.fixture(scope="module")
async def signalled(
    adv: Harness, llm: ScriptedLLM, client: Client, database_url: str, worker_log: Captured
) -> dict[str, Any]:
    async def one(row: Hostile) -> Any:
        model = llm.script(unique("sig"), [Reply(f"FINAL ANSWER: {OWN_ANSWER}", delay=1.5)],
                           repeat_last=True)  # fmt: skip
        agent = adv.agent(model, agent_id=unique("sig"), memory=row.options.get("memory", False))
        handle = await agent.start("Answer slowly")
        await handle.signal(names.FINAL_ANSWER_SIGNAL, row.input)
        return await asyncio.wait_for(agent.result(handle), 60)

    before = await StoreSnapshot.take(database_url)
    results = await asyncio.gather(*(one(row) for row in SIGNALS))
    after = await StoreSnapshot.take(database_url)
    return {
        "by_id": dict(zip([r.id for r in SIGNALS], results, strict=True)),
        "changes": after.changes_since(
            before, own=owned_by(*(r.run_id for r in results), *(r.agent_id for r in results))
        ),
        "log": worker_log.by_workflow,
    }


@pytest.mark.parametrize("row", params(SIGNALS))
async def test_operator_signals_are_accepted_or_ignored_never_fatal(
    row: Hostile, signalled: dict[str, Any], client: Client
):
    result = signalled["by_id"][row.id]
    logged = signalled["log"].get(result.run_id, [])
    if row.expect == "accepted":
        assert result.output == row.input["output"]
        assert result.terminated_by == "final_answer_tool"
        if row.options.get("summary_clipped"):
            answer = result.final_answer
            assert len(answer.summary) == ANSWER_SUMMARY_MAX_CHARS
            assert len(answer.confidence) == CONFIDENCE_MAX_CHARS
            assert answer.summary.startswith("sss") and "characters cut" in answer.summary
        assert not [m for m in logged if "signal" in m], logged
    else:
        assert result.output == OWN_ANSWER and result.terminated_by == "final_answer"
        assert [m for m in logged if row.options["logged"] in m], logged
    await assert_no_failed_tasks(client, result.run_id)


def test_signals_changed_nothing_stored_but_their_runs(signalled: dict[str, Any]):
    assert signalled["changes"] == []
