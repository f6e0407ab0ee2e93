"""Data Postgres will never take ends what wrote it, at once and saying why; an outage or a
missing table is still waited out. Real Postgres, real Temporal, scripted models.

Store activities are retried until they land, so that an outage delays a run and never loses
it. A value Postgres refuses for good (here: a CHECK constraint added to a table for the
test, `NOT VALID` so that no existing row is checked, dropped afterwards) was retried the
same way, forever: the run stayed "running" and nobody was told. Each test below waits at
most RESULT_WITHIN seconds for an ending that, before the fix, never came.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from typing import Any

import psycopg
import pytest
from psycopg import sql
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from reactive_temporal.api.chat_refusals import ChatError
from reactive_temporal.contracts import names
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from tests.adversarial.conftest import assert_no_failed_tasks
from tests.conftest import wait_for
from tests.support.refusing_tables import refusing
from tests.workflow.conftest import Harness
from workflows.store_refusals import store_refusal

pytestmark = pytest.mark.workflow

RESULT_WITHIN = 60.0
"""Seconds a refused run, child or chat turn may take to end (it takes a few)."""


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:10]}"


async def rows(database_url: str, query: str, *params: object) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cur = await conn.execute(query, params)  # type: ignore[arg-type]
        return await cur.fetchall()


async def failure_of(client: Client, workflow_id: str) -> ApplicationError:
    """The ApplicationError the workflow failed with, within RESULT_WITHIN seconds."""
    handle = client.get_workflow_handle(workflow_id)
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(handle.result(), timeout=RESULT_WITHIN)
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError), cause
    return cause


async def terminate_if_running(client: Client, workflow_id: str) -> None:
    """A run the test gave up on (before the fix: retrying forever) does not outlive it."""
    handle = client.get_workflow_handle(workflow_id)
    with contextlib.suppress(Exception):
        if (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
            await handle.terminate("test over")


# -- a run ----------------------------------------------------------------------------------


@pytest.mark.parametrize("refused", ["record_messages", "llm_step"])
async def test_a_run_whose_transcript_postgres_refuses_ends_failed_at_once_saying_why(
    harness: Harness, llm: ScriptedLLM, model_name: str, database_url: str, refused: str
):
    """Refused where the workflow records an observation (a local STORE activity, retried
    forever before) or where the LLM step records the model's reply (retried up to the LLM's
    attempts and 20 more, calling the model again each time): the run ends as `error` with its
    debrief, and its workflow fails with a StoreDataError naming the table, the constraint and
    the SQLSTATE, having called the model once."""
    marker = unique("zq")
    if refused == "record_messages":  # the unknown tool's observation names it
        reply = Reply(None, [call(f"{marker}_tool", x=1)])
    else:  # the model's reply holds it
        reply = Reply(
            f"Let me think about {marker}.",
            [call("calculator", expression="1+1")],
            usage=(1_000, 100),
        )
    llm.script(model_name, [reply], repeat_last=True)
    debrief_model = llm.script(
        f"{model_name}-debrief",
        [Reply(json.dumps({"summary": "Refused.", "lessons_learned": ["Keep data valid"]}))],
        repeat_last=True,
    )
    agent_id = unique("refused-")
    async with refusing(database_url, "run_messages", "content", marker) as constraint:
        handle = await harness.start(
            model_name, "Add 1 and 1", agent_id=agent_id, debrief_model=debrief_model
        )
        try:
            failure = await failure_of(harness.client, handle.id)
        finally:
            await terminate_if_running(harness.client, handle.id)

    assert failure.type == names.STORE_DATA_ERROR and failure.non_retryable
    message = failure.message
    assert message.startswith("the database refused the run's data"), message
    assert f"Postgres refused the data of {refused} (table run_messages, constraint " in message
    assert constraint in message and "[SQLSTATE 23514]" in message
    assert marker not in message  # Postgres's failing row (the data itself) is not quoted
    assert len(llm.requests[model_name]) == 1  # not asked again and again

    async def debriefed() -> bool:
        found = await rows(
            database_url,
            "SELECT terminated_by, outcome, debrief_json FROM agent_debriefs WHERE run_id = %s",
            handle.id,
        )
        return bool(found) and found[0][:2] == ("error", "failed")

    await wait_for(debriefed, seconds=RESULT_WITHIN)
    [(_, _, debrief)] = await rows(
        database_url, "SELECT 1, 2, debrief_json FROM agent_debriefs WHERE run_id = %s", handle.id
    )
    assert any("the database refused the run's data" in e for e in debrief["errors_encountered"])
    if refused == "llm_step":  # the reply was billed, though Postgres refused it: counted
        assert debrief["metrics"]["tokens"] == 1_100
    await assert_no_failed_tasks(harness.client, handle.id)


async def test_a_refused_wrap_up_still_returns_the_answer_and_its_debrief_child_fails_saying_why(
    harness: Harness, llm: ScriptedLLM, model_name: str, database_url: str
):
    """The run answered, but Postgres refuses its debrief (here: the task it quotes): the
    wrap-up's `notify_agent` (retried forever before) fails at once, the run still returns
    its answer to whoever waits for it, and the debrief goes to a child for a try of its
    own, which fails too, saying why."""
    marker = unique("zq")
    llm.script(model_name, [Reply("FINAL ANSWER: hi")], repeat_last=True)
    agent_id = unique("refused-")
    async with refusing(database_url, "agent_debriefs", "task_prompt", marker) as constraint:
        handle = await harness.start(model_name, f"Say hi to {marker}", agent_id=agent_id)
        debrief_id = names.debrief_workflow_id(handle.id)
        try:
            result = await asyncio.wait_for(handle.result(), timeout=RESULT_WITHIN)
            child_failure = await failure_of(harness.client, debrief_id)
        finally:
            await terminate_if_running(harness.client, handle.id)
            await terminate_if_running(harness.client, debrief_id)

    assert (result.terminated_by, result.output, result.success) == ("final_answer", "hi", True)
    assert child_failure.type == names.STORE_DATA_ERROR
    assert child_failure.message.startswith(f"the debrief of run {handle.id} was not kept: ")
    assert "Postgres refused the data of persist_debrief (table agent_debriefs" in (
        child_failure.message
    )
    assert constraint in child_failure.message and "[SQLSTATE 23514]" in child_failure.message
    await assert_no_failed_tasks(harness.client, handle.id, debrief_id)


# -- chat -----------------------------------------------------------------------------------


async def test_a_chat_turn_postgres_refuses_fails_saying_why_and_the_agent_goes_on(
    harness: Harness, llm: ScriptedLLM, model_name: str, database_url: str
):
    """The turn's save (a STORE activity, retried forever before, with the session's lock
    held) fails the chat update with Postgres's reason; the session keeps only what was
    saved, and the agent answers the next turn."""
    marker = unique("zq")
    llm.script(model_name, [Reply("Hello back."), Reply("Fine, thanks.")])
    agent = harness.agent(model_name, agent_id=unique("chat-refused-"))
    async with refusing(database_url, "chat_messages", "content", marker):
        with pytest.raises(ChatError) as refused:
            await asyncio.wait_for(
                agent.chat(f"Hello {marker}", use_tools=False), timeout=RESULT_WITHIN
            )
        reply = await asyncio.wait_for(
            agent.chat("How are you?", use_tools=False), timeout=RESULT_WITHIN
        )
    said = str(refused.value)
    assert "Postgres refused the data of save_session (table chat_messages" in said, said
    assert "[SQLSTATE 23514]" in said
    assert reply.message == "Fine, thanks."
    saved = await rows(
        database_url,
        "SELECT role, content FROM chat_messages WHERE agent_id = %s ORDER BY position",
        agent.name,
    )
    assert saved == [("user", "How are you?"), ("assistant", "Fine, thanks.")]
    entity = names.agent_workflow_id(agent.name)
    assert (
        await harness.client.get_workflow_handle(entity).describe()
    ).status == WorkflowExecutionStatus.RUNNING
    await assert_no_failed_tasks(harness.client, entity)


# -- a missing table is waited out --------------------------------------------------------------


async def test_a_missing_table_is_retried_said_once_and_the_run_goes_on_once_it_is_there(
    harness: Harness,
    llm: ScriptedLLM,
    model_name: str,
    database_url: str,
    caplog: pytest.LogCaptureFixture,
):
    """A write that finds part of the schema missing (a rolling deploy before `migrate` ran;
    here a trigger raising `undefined_table` for the run's rows, counting its calls in a
    sequence, which a rollback does not undo) is retried, not failed: the worker's log says
    so once, and the run finishes once the table is "there"."""
    marker = unique("zq")
    llm.script(model_name, [Reply(None, [call(f"{marker}_tool")]), Reply("FINAL ANSWER: done")])
    trigger, counter = unique("missing_"), unique("tries_")
    ident = sql.Identifier
    parts = {"fn": ident(trigger), "counter": ident(counter), "marker": sql.Literal(marker)}
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(sql.SQL("CREATE SEQUENCE {counter}").format(**parts))
        await conn.execute(
            sql.SQL(
                "CREATE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                " IF position({marker} in coalesce(NEW.content, '')) > 0 THEN"
                "  PERFORM nextval({counter_text});"
                "  RAISE EXCEPTION 'relation \"{missing}\" does not exist'"
                "   USING ERRCODE = 'undefined_table';"
                " END IF; RETURN NEW; END $$"
            ).format(
                fn=ident(trigger),
                marker=sql.Literal(marker),
                counter_text=sql.Literal(counter),
                missing=sql.SQL(marker),
            )  # fmt: skip
        )
        await conn.execute(
            sql.SQL(
                "CREATE TRIGGER {fn} BEFORE INSERT OR UPDATE ON run_messages"
                " FOR EACH ROW EXECUTE FUNCTION {fn}()"
            ).format(**parts)
        )
        try:
            with caplog.at_level(logging.WARNING, logger="activities.pg_refusals"):
                handle = await harness.start(model_name, "Do it", agent_id=unique("schema-"))

                async def tried_three_times() -> bool:
                    cur = await conn.execute(
                        sql.SQL("SELECT last_value FROM {counter}").format(**parts)
                    )
                    row = await cur.fetchone()
                    return row is not None and row[0] >= 3

                await wait_for(tried_three_times, seconds=RESULT_WITHIN)
                assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
        finally:
            await conn.execute(sql.SQL("DROP TRIGGER {fn} ON run_messages").format(**parts))
            await conn.execute(sql.SQL("DROP FUNCTION {fn}()").format(**parts))
            await conn.execute(sql.SQL("DROP SEQUENCE {counter}").format(**parts))
        result = await asyncio.wait_for(handle.result(), timeout=RESULT_WITHIN)
    assert result.output == "done" and result.success
    said = [r.getMessage() for r in caplog.records if marker in r.getMessage()]
    assert len(said) == 1, said
    assert "lacks part of the schema" in said[0] and "starter.py migrate" in said[0]
    assert "[SQLSTATE 42P01]" in said[0]


# -- what workflows see ----------------------------------------------------------------------


def test_a_workflow_finds_the_refusal_in_an_activity_failure_and_nothing_else():
    refusal = ApplicationError("Postgres refused …", type=names.STORE_DATA_ERROR)
    outer = ApplicationError("activity failed")
    outer.__cause__ = refusal
    assert store_refusal(outer) == "Postgres refused …"
    assert store_refusal(ApplicationError("x", type="StoreUnavailable")) is None
    assert store_refusal(RuntimeError("x")) is None
