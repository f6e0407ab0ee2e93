"""The operator's `final_answer` signal: a malformed answer is ignored with a logged reason.

Rows: `input` is the signal's payload (a FinalAnswerCapture's fields); `expect` is "ignored"
(the run goes on and ends with its own model's answer) or "accepted" (it ends with the
operator's output). The signal arrives while the run's first LLM call is in flight. Either
way no workflow task fails (one used to fail on every replay), and nothing stored changes
but the run's own rows.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.client import Client

from reactive_temporal.contracts import names
from reactive_temporal.contracts.run import FinalAnswerCapture
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM
from tests.adversarial.cases import Hostile, params, table
from tests.adversarial.conftest import StoreSnapshot, assert_no_failed_tasks, owned_by, unique
from tests.workflow.conftest import Harness

OWN_ANSWER = "the model's own answer"
WEDGED = "the workflow task raised on every replay: the run was wedged for good"

SIGNALS = table("operator-signal", [
    Hostile("signal-well-formed", {"output": "42", "format": "text", "summary": "ok"},
            "accepted", "the control row: an operator can end a run"),
    Hostile("signal-deep-json", {"output": "[" * 100_000, "format": "json"}, "ignored", WEDGED),
    Hostile("signal-deep-closed-json", {"output": "[" * 3_000 + "]" * 3_000, "format": "json"},
            "ignored", WEDGED),
    Hostile("signal-csv-field-over-limit", {"output": "a\n" + "x" * 140_000, "format": "csv"},
            "ignored", WEDGED),
    Hostile("signal-invalid-json", {"output": "{not json", "format": "json"}, "ignored",
            "an answer that does not parse as its own format"),
])  # fmt: skip


@pytest.fixture(scope="module")
async def signalled(
    adv: Harness, llm: ScriptedLLM, client: Client, database_url: str
) -> dict[str, Any]:
    async def one(row: Hostile) -> Any:
        model = llm.script(unique("sig"), [Reply(f"FINAL ANSWER: {OWN_ANSWER}", delay=1.5)],
                           repeat_last=True)  # fmt: skip
        agent = adv.agent(model, agent_id=unique("sig"), memory=False)
        handle = await agent.start("Answer slowly")
        await handle.signal(names.FINAL_ANSWER_SIGNAL, FinalAnswerCapture(**row.input))
        return await asyncio.wait_for(agent.result(handle), 60)

    before = await StoreSnapshot.take(database_url)
    results = await asyncio.gather(*(one(row) for row in SIGNALS))
    after = await StoreSnapshot.take(database_url)
    return {
        "by_id": dict(zip([r.id for r in SIGNALS], results, strict=True)),
        "changes": after.changes_since(before, own=owned_by(*(r.run_id for r in results))),
    }


@pytest.mark.parametrize("row", params(SIGNALS))
async def test_operator_signals_are_accepted_or_ignored_never_fatal(
    row: Hostile, signalled: dict[str, Any], client: Client
):
    result = signalled["by_id"][row.id]
    if row.expect == "accepted":
        assert result.output == row.input["output"]
        assert result.terminated_by == "final_answer_tool"
    else:
        assert result.output == OWN_ANSWER and result.terminated_by == "final_answer"
    await assert_no_failed_tasks(client, result.run_id)


def test_signals_changed_nothing_stored_but_their_runs(signalled: dict[str, Any]):
    assert signalled["changes"] == []
