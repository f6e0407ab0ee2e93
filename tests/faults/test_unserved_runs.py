"""Commands on a run no worker can serve answer at once, say why, and lose nothing.

No worker polls the run's task queue (all down), or its workflow task fails at every attempt
(a bad deploy): `approve`, `deny`, `cancel`, `watch`, `debrief`, `chat` and `session history`
waited for minutes or for good (a decision sent then is delivered whenever a worker comes
back), or printed the server's words. They now ask the server first (`api/unserved.py`).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHandle

from reactive_temporal.api.agents import Agent
from reactive_temporal.api.unserved import RunUnserved
from reactive_temporal.api.worker_waits import POLL_SILENCE
from reactive_temporal.config import Settings
from reactive_temporal.contracts import names
from reactive_temporal.contracts.run import FinalAnswerCapture
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from tests import processes
from tests.conftest import wait_for
from tests.processes import CliResult, starter_async
from tests.support.raising_workflows import TasksFail, failing_queues
from tests.workflow.conftest import Harness, running_worker

pytestmark = [pytest.mark.faults, pytest.mark.workflow]

ANSWERS_WITHIN = 30.0
"""A command's time, its process's start included (the machine is shared): it waited 37 s
(`approve` with no call id), or for good."""


async def park(running: Harness, llm: ScriptedLLM, agent_id: str) -> tuple[WorkflowHandle, str]:
    """A run parked on a calculator call waiting for approval, and that call's id."""
    model = llm.script(
        f"park-{uuid.uuid4().hex[:8]}",
        [Reply("Adding.", [call("calculator", expression="2+2")]), Reply("FINAL ANSWER: 4")],
    )
    agent = running.agent(model, agent_id=agent_id, approve_tools=["calculator"])
    handle = await agent.start("Add 2 and 2")

    async def waiting() -> list:
        return (await agent.progress(handle.id)).pending_approvals

    await wait_for(waiting, seconds=60, interval=0.3)
    return handle, (await waiting())[0].call_id


def said(result: CliResult) -> str:
    return " ".join(result.stderr.split())


async def test_commands_on_runs_no_worker_polls_for_answer_at_once_and_lose_nothing(
    client: Client,
    settings: Settings,
    llm: ScriptedLLM,
    temporal_address: str,
    database_url: str,
    tmp_path: Path,
):
    queue = f"gone-{uuid.uuid4().hex[:8]}"
    agent_id = f"gone-{uuid.uuid4().hex[:6]}"
    env = processes.worker_env(temporal_address, database_url, llm.base_url, queue, tmp_path)
    async with running_worker(client, settings, task_queue=queue) as running:
        (approved, call_id), (denied, _), (cancelled, _) = [
            await park(running, llm, agent_id) for _ in range(3)
        ]
    await asyncio.sleep(POLL_SILENCE.total_seconds() + 2)  # the last worker's polls are old

    def cli(*args: str) -> asyncio.Future[CliResult]:
        return asyncio.ensure_future(starter_async(*args, env=env, cwd=tmp_path, seconds=90))

    commands = {
        "approve": cli("approve", approved.id),
        "approve call": cli("approve", approved.id, call_id, "--json"),
        "deny": cli("deny", denied.id, "--reason", "frozen"),
        "cancel": cli("cancel", cancelled.id),
        "watch": cli("watch", approved.id, "--json"),
        "debrief": cli("debrief", approved.id),
        "chat": cli("chat", "what did you do?", "--agent", agent_id),
        "history": cli("session", "history", "sess_1", "--agent", agent_id),
    }
    shown = {name: await command for name, command in commands.items()}
    no_worker = f"no worker polls its task queue {queue!r}"
    for name, result in shown.items():
        assert result.code in (1, 2), f"{name}: {result.describe()}"
        assert result.seconds < ANSWERS_WITHIN, f"{name}: {result.describe()}"
        assert no_worker in said(result), f"{name}: {result.describe()}"
        assert "Traceback" not in result.stderr, f"{name}: {result.describe()}"
    for name in ("approve", "approve call", "deny"):
        assert "cannot take a decision now" in said(shown[name]) and "Nothing was sent" in said(
            shown[name]
        ), shown[name].describe()
    assert "waiting for a worker" not in said(shown["approve"])  # nothing was sent to wait on
    assert json.loads(shown["approve call"].stdout)["error"].startswith(f"run {approved.id!r}")
    assert f"the cancel of run {cancelled.id!r} is recorded" in said(shown["cancel"])
    assert "still running, and has no debrief until it ends" in said(shown["debrief"])
    events = [json.loads(line) for line in shown["watch"].stdout.splitlines()[:-1]]
    assert [e["status"] for e in events if e["type"] == "approval"] == ["pending"]
    assert "Watch it again once a worker runs it, from offset" in said(shown["watch"])
    for name in ("chat", "history"):
        assert "It was not sent" in said(shown[name]), shown[name].describe()
        assert shown[name].code == 1, shown[name].describe()  # the agent's state, not the input

    async with running_worker(client, settings, task_queue=queue) as running:
        agent = running.agent("unused", agent_id=agent_id)
        ended = await agent.result(cancelled)  # the cancel was kept
        assert ended.terminated_by == "cancelled"
        # no decision was sent: the calls still wait, and are decided once
        assert [p.call_id for p in (await agent.progress(approved.id)).pending_approvals] == [
            call_id
        ]
        outcome = await agent.approve(approved.id)
        assert [d.call_id for d in outcome.decided] == [call_id]
        assert (await agent.result(approved)).output == "4"
        await denied.terminate()


async def test_python_api_on_runs_whose_workflow_task_keeps_failing(
    client: Client, settings: Settings, llm: ScriptedLLM
):
    """A deploy whose code fails the run's workflow task: `approve` with the run parked (no
    task pending: its update is what fails) and once its task keeps failing, `cancel`,
    `events` and the entity's `chat` say so in moments, with what to do."""
    queue = f"broken-{uuid.uuid4().hex[:8]}"
    agent_id = f"broken-{uuid.uuid4().hex[:6]}"
    async with running_worker(client, settings, task_queue=queue) as running:
        (parked, call_id), (failing, _), (cancelled, _) = [
            await park(running, llm, agent_id) for _ in range(3)
        ]
    failing_queues.add(queue)
    config = client.config()
    config["interceptors"] = [TasksFail()]  # a client's worker interceptors reach its workers
    async with running_worker(Client(**config), settings, task_queue=queue) as broken:
        agent: Agent = broken.agent("unused", agent_id=agent_id)
        # sent (nothing showed the task failing yet), its task failed: the server may hold it
        with pytest.raises(RunUnserved, match="may still be delivered") as refused:
            await asyncio.wait_for(agent.approve(parked.id, call_id), ANSWERS_WITHIN)
        assert "its workflow task keeps failing" in str(refused.value)

        await failing.signal(names.FINAL_ANSWER_SIGNAL, FinalAnswerCapture(output="x"))

        async def tried_again() -> bool:
            return (await failing.describe()).raw_description.pending_workflow_task.attempt >= 2

        await wait_for(tried_again, seconds=60, interval=0.2)
        with pytest.raises(RunUnserved, match="Nothing was sent") as refused:
            await asyncio.wait_for(agent.deny(failing.id, reason="no"), ANSWERS_WITHIN)
        assert f"starter.py replay {failing.id}" in str(refused.value)
        assert refused.value.retrying is not None
        assert refused.value.retrying.step == "workflow_task"

        with pytest.raises(RunUnserved, match="is recorded") as kept:
            await asyncio.wait_for(agent.cancel(cancelled.id), ANSWERS_WITHIN)
        assert "its workflow task keeps failing" in str(kept.value)
    failing_queues.discard(queue)
    async with running_worker(client, settings, task_queue=queue) as running:
        agent = running.agent("unused", agent_id=agent_id)
        assert (await agent.result(cancelled)).terminated_by == "cancelled"

        # the decision it gave up on was delivered with the next good task (seen here), or
        # still waits: decided once either way
        try:
            ended = await asyncio.wait_for(agent.result(parked), 60)
        except TimeoutError:
            waiting = (await agent.progress(parked.id)).pending_approvals
            assert [p.call_id for p in waiting] == [call_id]
            await parked.terminate()
        else:
            assert ended.debrief is not None
            decided = [(a.call_id, a.decision) for a in ended.debrief.approvals]
            assert decided == [(call_id, "approved")]
        # the signalled one ends on its final answer now
        assert (await agent.result(failing)).output == "x"
