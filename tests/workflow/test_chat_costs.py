"""`costs` counts chat: each direct chat turn's tokens and dollars, which the chat activity
records in Postgres (`chat_usage`) once per turn however often Temporal retried it, beside
the runs and their rich debriefs' synthesis. Before, chat was billed and counted nowhere,
and the synthesis's dollars were in no total (its tokens, read as a number from an object,
were always 0). Real Temporal, real Postgres, scripted models over HTTP."""

from __future__ import annotations

import json
import logging
import os
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql
from temporalio import activity
from temporalio.client import Client
from temporalio.client import Interceptor as ClientInterceptor
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from activities.spend_report import spend_by_agent
from activities.store import Store
from reactive_temporal.config import Settings
from reactive_temporal.contracts import names
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from tests.processes import starter
from tests.support.refusing_tables import refusing
from tests.workflow.conftest import Harness, running_worker

pytestmark = pytest.mark.workflow

LONG_ANSWER = "Forty-two, which is six times seven, as the calculator confirmed. " * 3
"""Long enough that the run is not trivial: its debrief is synthesized."""
SYNTHESIS = {
    "summary": "Multiplied six by seven.",
    "key_findings": [],
    "errors_encountered": [],
    "lessons_learned": [],
    "caveats": "",
}
INPUT_PER_MTOK, OUTPUT_PER_MTOK = 0.15, 0.60
"""gpt-4o-mini's price, which `…/gpt-4o-mini` models are priced at (reactive_temporal.pricing)."""


def dollars(prompt: int, completion: int) -> float:
    return (prompt * INPUT_PER_MTOK + completion * OUTPUT_PER_MTOK) / 1e6


loses_its_first_answer: set[str] = set()
"""Agent workflows whose next `chat_direct` has its first attempt's result lost."""


class ChatAnswerLost(ClientInterceptor, Interceptor):
    """The first attempt of an armed `chat_direct` does all its work (the model's call, the
    usage row), then fails as if the worker died before the server heard of it: Temporal
    runs the activity again, the model answers again."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _LosesFirstAnswer(next)


class _LosesFirstAnswer(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        result = await super().execute_activity(input)
        info = activity.info()
        if (
            info.activity_type == names.CHAT_DIRECT
            and info.attempt == 1
            and info.workflow_id in loses_its_first_answer
        ):
            loses_its_first_answer.discard(info.workflow_id)
            raise RuntimeError("the worker lost the chat turn's answer")
        return result


async def usage_rows(database_url: str, agent_id: str) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT session_id, model, input_tokens, output_tokens, reasoning_tokens, cost_usd"
            " FROM chat_usage WHERE agent_id = %s ORDER BY created_at",
            (agent_id,),
        )
        return await cur.fetchall()


async def test_chat_turns_are_counted_once_beside_runs_and_synthesis(
    client: Client,
    settings: Settings,
    llm: ScriptedLLM,
    database_url: str,
    tmp_path: Path,
):
    tag = uuid.uuid4().hex[:6]
    model = llm.script(
        f"c{tag}/gpt-4o-mini",
        [
            Reply("Computing.", [call("calculator", expression="6 * 7")], usage=(1000, 100)),
            Reply(
                "Done.",
                [call("final-answer", output=LONG_ANSWER, format="text", summary="ok")],
                usage=(1200, 50),
            ),
            Reply("I multiplied six by seven.", usage=(1000, 150), reasoning_tokens=50),
            Reply("It was 42.", usage=(3000, 500)),  # the second turn: its answer is lost
            Reply("It was 42.", usage=(3000, 500)),  # and it is asked again
        ],
    )
    synth = llm.script(f"s{tag}/gpt-4o-mini", [Reply(json.dumps(SYNTHESIS), usage=(500, 100))])
    agent_id = f"chatcost-{tag}"
    config = client.config()
    config["interceptors"] = [ChatAnswerLost()]  # a client's worker interceptors reach its workers
    async with running_worker(Client(**config), settings) as harness:
        agent = harness.agent(model, agent_id=agent_id, debrief_model=synth)
        result = await agent.run("What is 6 * 7?")
        rich = await result.debrief_rich()
        first = await agent.chat("What did you do?", use_tools=False)
        loses_its_first_answer.add(names.agent_workflow_id(agent_id))
        session = agent.session()
        second = await session.chat("What was the answer?", use_tools=False)
        store = harness.store

        assert rich is not None and rich.synthesized
        assert not loses_its_first_answer  # the second turn's first attempt did fail
        assert len(llm.requests[model]) == 5  # 2 run steps, 1 + 2 chat calls
        assert (first.tokens, second.tokens) == (1200, 3500)
        assert first.cost == pytest.approx(dollars(1000, 200))
        assert second.cost == pytest.approx(dollars(3000, 500))
        assert await usage_rows(database_url, agent_id) == [
            ("default", model, 1000, 200, 50, pytest.approx(dollars(1000, 200))),
            (session.id, model, 3000, 500, 0, pytest.approx(dollars(3000, 500))),
        ]  # one row for the retried turn

        [spent] = await spend_by_agent(store, days=1, agent_id=agent_id)
    run_cost = dollars(2200, 150)
    assert result.metadata.tokens_used == 2350
    assert result.metadata.cost == pytest.approx(run_cost)
    assert (spent.runs, spent.tokens, spent.cost_usd) == (1, 2350, pytest.approx(run_cost))
    assert (spent.syntheses, spent.synthesis_tokens) == (1, 600)
    assert spent.synthesis_cost_usd == pytest.approx(dollars(500, 100))
    assert (spent.chat_turns, spent.chat_tokens) == (2, 4700)
    assert spent.chat_cost_usd == pytest.approx(dollars(4000, 700))
    assert spent.total_tokens == 2350 + 600 + 4700
    total = run_cost + dollars(500, 100) + dollars(4000, 700)
    assert spent.total_cost_usd == pytest.approx(total)

    env = {**os.environ, "DATABASE_URL": database_url, "REACTIVE_TEMPORAL_DATA_DIR": str(tmp_path)}
    report = starter("costs", "--agent", agent_id, "--json", env=env, cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    said = json.loads(report.stdout)
    [line] = said["agents"]
    assert line["agent_id"] == agent_id and line["runs"] == 1 and line["tokens"] == 2350
    assert (line["chat_turns"], line["chat_tokens"]) == (2, 4700)
    assert line["chat_cost_usd"] == pytest.approx(0.00102)  # $0.00027 + $0.00075
    assert line["synthesis_tokens"] == 600 and line["total_tokens"] == 7650
    assert line["total_cost_usd"] == pytest.approx(total)
    assert said["total"]["chat_turns"] == 2 and said["total"]["chat_cost_usd"] == 0.00102
    assert said["total"]["total_cost_usd"] == round(total, 6)
    assert said["total"]["cost_usd"] == round(run_cost, 6)  # the runs' alone, as it was

    table = starter("costs", "--agent", agent_id, env={**env, "COLUMNS": "80"}, cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert max(map(len, table.stdout.splitlines())) <= 80
    assert "  chat " in table.stdout and "4,700" in table.stdout and "$0.0010" in table.stdout


async def test_a_turn_whose_usage_is_refused_is_answered_and_the_loss_logged(
    harness: Harness, llm: ScriptedLLM, database_url: str, caplog: pytest.LogCaptureFixture
):
    """Spend accounting never takes chat down: the row refused, the person still gets the
    answer, and the log says what `costs` will not count."""
    tag = uuid.uuid4().hex[:6]
    model = llm.script(f"r{tag}/gpt-4o-mini", [Reply("Hello there.", usage=(1000, 200))])
    agent_id = f"unrecorded-{tag}"
    async with refusing(database_url, "chat_usage", "agent_id", agent_id):
        with caplog.at_level(logging.WARNING):
            reply = await harness.agent(model, agent_id=agent_id).chat("Hi!", use_tools=False)
    assert reply.message == "Hello there." and reply.tokens == 1200
    assert await usage_rows(database_url, agent_id) == []
    [lost] = [r.getMessage() for r in caplog.records if "usage was not recorded" in r.getMessage()]
    assert f"agent {agent_id!r}" in lost and "1000 input" in lost and "200 output" in lost
    assert "$0.000270" in lost and "CheckViolation" in lost


async def test_a_database_migrated_before_chat_usage_is_told_to_migrate_and_loses_nothing(
    database_url: str, tmp_path: Path
):
    """`costs` on a database a release before this one migrated (its runs' debriefs, no
    `chat_usage`) says to run `migrate`, not a traceback; `migrate` adds the table and the
    runs are all still counted."""
    old = f"before_chat_usage_{uuid.uuid4().hex[:8]}"
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(old)))
    url = urlunsplit(urlsplit(database_url)._replace(path=f"/{old}"))
    try:
        store = await Store.open(url)
        try:
            async with store.pool.connection() as conn:
                await conn.execute("DROP TABLE chat_usage")  # as migration 15 left it
                await conn.execute("DELETE FROM schema_migrations WHERE version = 16")
                await conn.execute(
                    "INSERT INTO agent_debriefs (run_id, agent_id, task_prompt, terminated_by,"
                    " output, output_format, outcome, synthesized, debrief_json,"
                    " debrief_markdown, tokens_used) VALUES ('run-1', 'old-agent', 'task',"
                    " 'final_answer', '42', 'text', 'success', false,"
                    ' \'{"metrics": {"tokens": 300, "cost": 0.5}}\', \'\', 300)'
                )
        finally:
            await store.close()
        env = {**os.environ, "DATABASE_URL": url, "REACTIVE_TEMPORAL_DATA_DIR": str(tmp_path)}
        refused = starter("costs", "--json", env=env, cwd=tmp_path)
        assert refused.returncode == 2, refused.stderr
        assert refused.stderr.startswith("error: the database lacks schema migrations 16 (")
        assert "run `python starter.py migrate` first" in refused.stderr
        assert "Traceback" not in refused.stderr
        migrated = starter("migrate", "--json", env=env, cwd=tmp_path)
        assert migrated.returncode == 0 and json.loads(migrated.stdout) == {"applied": [16]}
        report = starter("costs", "--json", env=env, cwd=tmp_path)
        assert report.returncode == 0, report.stderr
        [line] = json.loads(report.stdout)["agents"]
        assert (line["agent_id"], line["runs"], line["tokens"], line["cost_usd"]) == (
            "old-agent", 1, 300, 0.5
        )  # fmt: skip
        assert line["chat_turns"] == 0 and line["total_cost_usd"] == 0.5
    finally:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            await conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(old)))
