"""`replay --recent N` checks a batch of live runs against the current code before a deploy.

A run recorded by an older, incompatible AgentRunWorkflow (tests/fixtures) fails; runs of the
current code, with their debrief and agent workflows, pass.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.worker import Worker

from reactive_temporal.contracts import names
from reactive_temporal.embedded.scripted_llm import ScriptedLLM
from reactive_temporal.search_attributes import AGENT_NAME
from tests.fixtures.incompatible_workflow import AgentRunWorkflowBeforeTheChange
from tests.processes import start_worker, starter, stop, worker_env

pytestmark = pytest.mark.e2e

# An answer long enough that the run's debrief is synthesized in a child workflow (a short one
# is kept in the run).
LONG_SUM = "What is " + " + ".join(str(i) for i in range(1, 41)) + "?"


async def test_replay_recent_reports_a_run_recorded_before_an_incompatible_change(
    client: Client, temporal_address: str, database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    agent = f"replayed-{uuid.uuid4().hex[:6]}"
    queue = f"replay-{uuid.uuid4().hex[:8]}"
    env = worker_env(temporal_address, database_url, llm.base_url, queue, tmp_path)

    # 1. A run recorded by the old code.
    old_id = names.run_workflow_id(agent, uuid.uuid4())
    async with Worker(
        client, task_queue=f"{queue}-old", workflows=[AgentRunWorkflowBeforeTheChange]
    ):
        await client.execute_workflow(
            names.AGENT_RUN_WORKFLOW,
            {"task": "old"},
            id=old_id,
            task_queue=f"{queue}-old",
            search_attributes=TypedSearchAttributes([SearchAttributePair(AGENT_NAME, agent)]),
        )

    # 2. Then a run of today's code, with its debrief, and a chat turn about it (which starts
    # the agent's entity workflow: runs do not).
    worker = start_worker(env, tmp_path / "worker.log")
    try:
        proc = starter("run", LONG_SUM, "--json", "--agent", agent, env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        new_id = json.loads(proc.stdout)["run_id"]
        done = starter("debrief", new_id, "--rich", "--json", env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        chat = starter("chat", "What did you add up?", "--agent", agent, env=env, cwd=tmp_path)
        assert chat.returncode == 0, chat.stderr
        talker = f"talker-{uuid.uuid4().hex[:6]}"  # chats, never runs
        talked = starter("chat", "Hello there", "--agent", talker, env=env, cwd=tmp_path)
        assert talked.returncode == 0, talked.stderr
    finally:
        stop(worker)

    # An agent that only chats has an entity and no run: it was never replayed (found through
    # runs only), and a rollback that broke it passed the check.
    alone = starter("replay", "--recent", "1", "--agent", talker, "--json", env=env, cwd=tmp_path)
    assert alone.returncode == 0, alone.stdout + alone.stderr
    replayed = {r["workflow_id"]: r["ok"] for r in json.loads(alone.stdout)["replays"]}
    assert replayed == {names.agent_workflow_id(talker): True}
    everyone = starter("replay", "--recent", "50", "--json", env=env, cwd=tmp_path)
    assert names.agent_workflow_id(talker) in everyone.stdout, everyone.stderr

    both = starter("replay", "--recent", "5", "--agent", agent, "--json", env=env, cwd=tmp_path)
    assert both.returncode == 1, both.stderr
    report = json.loads(both.stdout)
    outcome = {r["workflow_id"]: r["ok"] for r in report["replays"]}
    assert outcome[old_id] is False
    assert outcome[new_id] is True
    assert outcome[names.debrief_workflow_id(new_id)] is True
    assert outcome[names.agent_workflow_id(agent)] is True
    assert report["failed"] == [old_id]

    # The most recent run alone is today's: it passes.
    latest = starter("replay", "--recent", "1", "--agent", agent, env=env, cwd=tmp_path)
    assert latest.returncode == 0, latest.stdout + latest.stderr
    assert new_id in latest.stdout and old_id not in latest.stdout

    # The same selection by visibility query; the human output names the failing run.
    query = f"AgentName = '{agent}'"
    human = starter("replay", "--recent", "5", "--query", query, env=env, cwd=tmp_path)
    assert human.returncode == 1
    assert old_id in human.stdout and "fail" in human.stdout.lower()
