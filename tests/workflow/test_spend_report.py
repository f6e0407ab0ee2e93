"""`starter.py costs`: each agent's runs that ended, what they spent and how they ended, read
from their debriefs in Postgres."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from activities.spend_report import spend_by_agent
from reactive_temporal.embedded.scripted_llm import HttpError, Reply, ScriptedLLM, call
from tests.processes import starter
from tests.workflow.conftest import Harness

pytestmark = pytest.mark.workflow


async def test_each_agent_s_runs_are_added_up_with_how_they_ended(
    harness: Harness, llm: ScriptedLLM, database_url: str, tmp_path: Path
):
    tag = uuid.uuid4().hex[:6]
    priced = llm.script(  # priced as gpt-4o-mini: a provider prefix is not part of the name
        f"p{tag}/gpt-4o-mini",
        [Reply(None, [call("calculator", expression="6*7")]), Reply("FINAL ANSWER: 42")] * 2,
    )
    # the failed run's debrief is written by its debrief workflow, after a synthesis
    broken = llm.script(f"b{tag}/gpt-4o-mini", [HttpError(400, "bad request"), Reply("{}")])
    spender, other = f"spender-{tag}", f"other-{tag}"

    results = [
        await harness.run(priced, "What is 6*7?", agent_id=spender),
        await harness.run(priced, "And again?", agent_id=spender),
        await harness.run(broken, "This one fails", agent_id=spender),
    ]
    assert [r.terminated_by for r in results] == ["final_answer", "final_answer", "llm_error"]
    assert await results[2].debrief_rich() is not None
    await harness.run(llm.script(f"o{tag}", [Reply("FINAL ANSWER: hi")]), "Hi", agent_id=other)

    [spent] = await spend_by_agent(harness.store, days=1, agent_id=spender)
    assert (spent.agent_id, spent.runs, spent.succeeded, spent.partial, spent.failed) == (
        spender, 3, 2, 0, 1
    )  # fmt: skip
    assert spent.tokens == sum(r.metadata.tokens_used for r in results) > 0
    assert spent.cost_usd == pytest.approx(sum(r.metadata.cost for r in results))
    assert spent.cost_usd > 0
    both = await spend_by_agent(harness.store, days=1)
    assert {spender, other} <= {s.agent_id for s in both}

    env = {**os.environ, "DATABASE_URL": database_url, "REACTIVE_TEMPORAL_DATA_DIR": str(tmp_path)}
    report = starter("costs", "--agent", spender, "--json", env=env, cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    said = json.loads(report.stdout)
    assert said["days"] == 7 and [a["agent_id"] for a in said["agents"]] == [spender]
    assert said["total"]["runs"] == 3 and said["agents"][0]["failed"] == 1
    table = starter("costs", "--agent", spender, env={**env, "COLUMNS": "200"}, cwd=tmp_path)
    assert table.returncode == 0 and spender in table.stdout and "2/0/1" in table.stdout
    nobody = starter("costs", "--agent", f"nobody-{tag}", env=env, cwd=tmp_path)
    assert nobody.returncode == 0 and "no runs of agent" in nobody.stderr
    wrong = starter("costs", "--days", "0", env=env, cwd=tmp_path)
    assert wrong.returncode == 2 and "--days" in wrong.stderr


async def test_a_database_never_migrated_is_said_so_not_a_traceback(
    database_url: str, tmp_path: Path
):
    """`costs` and `lessons` on a database without the agents' tables printed a traceback
    (UndefinedTable); now one line saying to run `migrate`."""
    empty = f"never_migrated_{uuid.uuid4().hex[:8]}"
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(empty)))
    try:
        parts = urlsplit(database_url)
        url = urlunsplit(parts._replace(path=f"/{empty}"))
        env = {**os.environ, "DATABASE_URL": url, "REACTIVE_TEMPORAL_DATA_DIR": str(tmp_path)}
        for command in (["costs"], ["lessons"]):
            said = starter(*command, env=env, cwd=tmp_path)
            assert said.returncode == 2, said.stderr
            assert said.stderr.startswith("error: the database has none of the agents' tables")
            assert "run `python starter.py migrate` first" in said.stderr
            assert "Traceback" not in said.stderr
    finally:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            await conn.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(empty)))
