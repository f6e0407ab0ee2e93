"""A rerun's stored debrief row is the rerun's: every column, not only the debrief text."""

from __future__ import annotations

import psycopg
from psycopg.rows import dict_row
from temporalio.client import Client

from reactive_temporal.api.rerun import rerun_from_failure
from reactive_temporal.contracts.result import AgentResult
from reactive_temporal.embedded.scripted_llm import HttpError, Reply, ScriptedLLM, call
from tests.conftest import wait_for
from tests.workflow.conftest import Harness


async def debrief_row(database_url: str, run_id: str) -> dict | None:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute("SELECT * FROM agent_debriefs WHERE run_id = %s", (run_id,))
        return await cur.fetchone()


async def test_a_rerun_rewrites_every_column_of_its_debrief_row(
    harness: Harness, client: Client, llm: ScriptedLLM, model_name: str, database_url: str
):
    llm.script(
        model_name,
        [Reply(None, [call("calculator", expression="5*5")]), HttpError(400, "model not found")],
    )
    failed = await harness.run(model_name, "5*5 then answer")
    assert failed.terminated_by == "llm_error"
    await failed.debrief_rich()
    first = await debrief_row(database_url, failed.run_id)
    assert first is not None and first["terminated_by"] == "llm_error"

    llm.script(model_name, [Reply("FINAL ANSWER: the answer is 25")], repeat_last=True)
    new_run = await rerun_from_failure(client, failed.run_id)
    rerun = client.get_workflow_handle(failed.run_id, run_id=new_run, result_type=AgentResult)
    result = await rerun.result()
    assert result.terminated_by == "final_answer" and result.output == "the answer is 25"

    async def rewritten() -> bool:
        row = await debrief_row(database_url, failed.run_id)
        return row is not None and row["terminated_by"] == "final_answer"

    await wait_for(rewritten, seconds=60)
    row = await debrief_row(database_url, failed.run_id)
    assert row is not None
    m = result.metadata
    assert {k: row[k] for k in ("terminated_by", "output", "output_format", "outcome",
                                "tokens_used", "iterations", "duration_ms")} == {
        "terminated_by": "final_answer", "output": "the answer is 25", "output_format": "text",
        "outcome": "success", "tokens_used": m.tokens_used, "iterations": m.iterations,
        "duration_ms": m.duration_ms,
    }  # fmt: skip
    assert row["debrief_json"]["outcome"] == "success"
    assert "the answer is 25" in row["debrief_markdown"]
    assert (row["task_prompt"], row["agent_id"], row["created_at"]) == (
        first["task_prompt"], first["agent_id"], first["created_at"],
    )  # fmt: skip
    assert row["updated_at"] > first["updated_at"]
