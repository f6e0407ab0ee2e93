"""A run that stalls with nothing failing where its own code can see it says so: its workflow
task failing at every attempt (a worker whose code cannot replay it, an exception the SDK
retries), or no worker polling its task queue. `progress` (Python and CLI) and `runs` say
which, even though the run cannot answer its progress query; and a run whose model is merely
slow is not said to wait for a worker."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker

from reactive_temporal.api import approval_listing, worker_waits
from reactive_temporal.api.agents import Agent
from reactive_temporal.api.approval_listing import (
    ApprovalsUnavailable,
    pending_calls,
    waiting_approvals,
)
from reactive_temporal.api.progress import ProgressUnavailable
from reactive_temporal.api.runs import list_runs, runs_query
from reactive_temporal.config import Settings
from reactive_temporal.contracts import names
from reactive_temporal.contracts.run import AgentConfig, FinalAnswerCapture
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from reactive_temporal.hosting.runtime import Runtime
from tests import processes
from tests.conftest import wait_for
from tests.fixtures.incompatible_workflow import AgentRunWorkflowBeforeTheChangeStillRunning
from tests.processes import starter_async
from tests.support.raising_workflows import TasksFail, failing_queues
from tests.workflow.conftest import running_worker

pytestmark = [pytest.mark.faults, pytest.mark.workflow]


def agent_on(client: Client, settings: Settings, task_queue: str, agent_id: str) -> Agent:
    """An agent whose runs go to `task_queue`, whoever polls it (or no one)."""
    config = AgentConfig.model_validate({"agent_id": agent_id, "model": "never-called"})
    runtime = Runtime(client, task_queue, offline_model=False, database_url=settings.database_url)
    return Agent(config, runtime)


async def unavailable(agent: Agent, run_id: str) -> ProgressUnavailable:
    """The run's progress, which no worker can answer."""
    with pytest.raises(ProgressUnavailable) as caught:
        await agent.progress(run_id)
    return caught.value


async def test_a_run_whose_workflow_task_fails_to_replay_says_so(
    client: Client,
    settings: Settings,
    llm: ScriptedLLM,
    temporal_address: str,
    database_url: str,
    tmp_path: Path,
):
    """A run started by an older release, taken over after a deploy by today's code, which
    cannot replay it: a nondeterminism error at every attempt, the run held until rollback."""
    queue = f"deploy-{uuid.uuid4().hex[:8]}"
    agent_id = f"replays-{uuid.uuid4().hex[:6]}"
    agent = agent_on(client, settings, queue, agent_id)
    async with Worker(
        client,
        task_queue=queue,
        workflows=[AgentRunWorkflowBeforeTheChangeStillRunning],
        max_cached_workflows=0,
    ):
        handle = await agent.start("Say hello")
        await wait_for(lambda: recorded(handle, EventType.EVENT_TYPE_TIMER_STARTED), seconds=60)

    async with running_worker(client, settings, task_queue=queue):
        began = datetime.now(UTC)
        # a new event for today's code to replay the old history on
        await handle.signal(names.FINAL_ANSWER_SIGNAL, FinalAnswerCapture(output="done"))

        await wait_for(lambda: tried_again(handle), seconds=60, interval=0.2)
        # said from what the server shows, no query waited out: that would have said "no
        # worker answered … within 10 s" instead (a time bound here was the machine's speed)
        error = await unavailable(agent, handle.id)
        step = error.retrying
        assert step is not None
        assert (step.step, step.cause) == ("workflow_task", "non_deterministic_error")
        assert step.attempt >= 2
        assert step.last_failure is not None
        assert step.last_failure.startswith("nondeterminism: [TMPRL1100] Nondeterminism error: ")
        assert step.since is not None
        assert began - timedelta(seconds=1) <= step.since <= datetime.now(UTC)
        assert "its workflow task keeps failing" in str(error)
        assert error.waiting_for_worker is None  # a worker takes the task, and fails it

        listed = await list_runs(client, runs_query(agent=agent_id))
        assert [r.run_id for r in listed] == [handle.id]
        assert listed[0].retrying is not None and listed[0].retrying.step == "workflow_task"

        env = processes.worker_env(temporal_address, database_url, llm.base_url, queue, tmp_path)
        as_json = await starter_async("progress", handle.id, "--json", env=env, cwd=tmp_path)
        assert as_json.code == 1, as_json.describe()
        shown = json.loads(as_json.stdout)
        assert shown["retrying"]["step"] == "workflow_task" and shown["retrying"]["attempt"] >= 2
        assert shown["retrying"]["last_failure"].startswith("nondeterminism: [TMPRL1100] ")
        assert shown["retrying"]["cause"] == "non_deterministic_error"
        for_people = await starter_async("progress", handle.id, env=env, cwd=tmp_path)
        assert for_people.code == 1, for_people.describe()
        line = for_people.stderr.strip().splitlines()[-1]
        assert line.startswith("workflow task failing (attempt "), line
        assert " since " in line and "— nondeterminism: [TMPRL1100] " in line
        listing = await starter_async("runs", "--agent", agent_id, env=env, cwd=tmp_path)
        assert listing.code == 0, listing.describe()
        assert "workflow task failing (attempt " in listing.stdout
        await handle.terminate()


async def test_a_run_whose_workflow_task_raises_says_so(client: Client, settings: Settings):
    queue = f"raises-{uuid.uuid4().hex[:8]}"
    failing_queues.add(queue)
    agent = agent_on(client, settings, queue, f"raises-{uuid.uuid4().hex[:6]}")
    config = client.config()
    config["interceptors"] = [TasksFail()]  # a client's worker interceptors reach its workers
    async with running_worker(Client(**config), settings, task_queue=queue):
        handle = await agent.start("Say hello")

        await wait_for(lambda: tried_again(handle), seconds=60, interval=0.2)
        step = (await unavailable(agent, handle.id)).retrying
        assert step is not None
        assert (step.step, step.cause) == ("workflow_task", "workflow_worker_unhandled_failure")
        assert step.last_failure == (
            "unhandled failure: RuntimeError: the database of regions is missing"
        )
        await handle.terminate()


async def test_a_run_no_worker_polls_for_says_it_waits_for_a_worker(
    client: Client,
    settings: Settings,
    llm: ScriptedLLM,
    temporal_address: str,
    database_url: str,
    tmp_path: Path,
):
    """Started for a task queue no worker polls (a worker started for another, or all down)."""
    queue = f"nobody-{uuid.uuid4().hex[:8]}"
    agent_id = f"unserved-{uuid.uuid4().hex[:6]}"
    agent = agent_on(client, settings, queue, agent_id)
    began = datetime.now(UTC)
    handle = await agent.start("Say hello")
    await waited(handle, worker_waits.WAITING_AFTER)

    error = await unavailable(agent, handle.id)  # no query waited out: see the words below
    waiting = error.waiting_for_worker
    assert waiting is not None
    assert (waiting.task_queue, waiting.step, waiting.last_poll) == (queue, "workflow_task", None)
    assert began - timedelta(seconds=1) <= waiting.since <= began + timedelta(seconds=5)
    assert f"no worker polls its task queue {queue!r}" in str(error)
    assert error.retrying is None

    listed = await list_runs(client, runs_query(agent=agent_id))
    assert listed[0].waiting_for_worker == waiting

    env = processes.worker_env(temporal_address, database_url, llm.base_url, queue, tmp_path)
    as_json = await starter_async("progress", handle.id, "--json", env=env, cwd=tmp_path)
    assert as_json.code == 1, as_json.describe()
    shown = json.loads(as_json.stdout)["waiting_for_worker"]
    assert (shown["task_queue"], shown["step"]) == (queue, "workflow_task")
    for_people = await starter_async("progress", handle.id, env=env, cwd=tmp_path)
    assert for_people.code == 1, for_people.describe()
    line = for_people.stderr.strip().splitlines()[-1]
    assert line.startswith(f"waiting for a worker: no worker polls task queue {queue!r} "), line
    assert "(workflow task ready since " in line
    listing = await starter_async("runs", "--agent", agent_id, env=env, cwd=tmp_path)
    assert listing.code == 0, listing.describe()
    assert "waiting for a worker: no worker polls task queue" in listing.stdout
    await handle.terminate()


async def test_a_run_whose_model_is_slow_does_not_wait_for_a_worker(
    client: Client, settings: Settings, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
):
    """Its LLM step has been scheduled longer than a step may wait, and (with the thresholds
    shortened here) its worker's last poll is older than a silent queue's: an idle worker's
    poll waits up to a minute for work. Only the step having started tells it runs.

    The model answers once the test has looked (not after 8 s, which a loaded machine could
    spend before the looking was done: the worker polls again once the step ends)."""
    monkeypatch.setattr(worker_waits, "WAITING_AFTER", timedelta(seconds=1))
    monkeypatch.setattr(worker_waits, "POLL_SILENCE", timedelta(seconds=2))
    looked = threading.Event()

    def answer_once_looked(request: dict[str, Any]) -> Reply:
        looked.wait(90)  # a hang guard
        return Reply("FINAL ANSWER: done")

    model = llm.script(f"slow-{uuid.uuid4().hex[:6]}", answer_once_looked)
    async with running_worker(client, settings) as running:
        agent = running.agent(model, agent_id=f"slow-{uuid.uuid4().hex[:6]}")
        handle = await agent.start("Say hello")

        async def thinking_long() -> bool:
            raw = (await handle.describe()).raw_description
            started = [
                a.last_started_time.ToDatetime(tzinfo=UTC)
                for a in raw.pending_activities
                if a.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
            ]
            return bool(started) and datetime.now(UTC) - started[0] > timedelta(seconds=4)

        try:
            await wait_for(thinking_long, seconds=60, interval=0.2)
            assert await worker_waits.TaskQueuePollers(client).silent(
                running.task_queue, worker_waits.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY
            ), "the worker polled for activities lately: this test would pass for nothing"
            progress = await agent.progress(handle.id)
            assert progress.waiting_for_worker is None and progress.retrying is None
            listed = await list_runs(client, runs_query(agent=agent.config.agent_id))
            assert listed[0].waiting_for_worker is None
        finally:
            looked.set()
        result = await agent.result(handle)
        assert result.success and result.output == "done"


class Asking:
    """How the approvals listing asks runs for their progress (`approval_listing.run_progress`): how
    many times, and the most at once."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.asked = self.in_flight = self.most_at_once = 0
        ask = approval_listing.run_progress

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.asked += 1
            self.in_flight += 1
            self.most_at_once = max(self.most_at_once, self.in_flight)
            try:
                return await ask(*args, **kwargs)
            finally:
                self.in_flight -= 1

        monkeypatch.setattr(approval_listing, "run_progress", counted)


async def recorded(handle: WorkflowHandle, kind: EventType.ValueType) -> bool:
    return any([e.event_type == kind async for e in handle.fetch_history_events()])


async def tried_again(handle: WorkflowHandle) -> bool:
    """The run's workflow task failed, and is tried again: asked earlier, its progress query
    waits for the attempt under way, which the worker holds until it times out (10 s)."""
    return (await handle.describe()).raw_description.pending_workflow_task.attempt >= 2


async def waited(handle: WorkflowHandle, long: timedelta) -> None:
    """Until the run's workflow task has been scheduled `long` ago."""
    task = (await handle.describe()).raw_description.pending_workflow_task
    scheduled = task.scheduled_time.ToDatetime(tzinfo=UTC)
    await asyncio.sleep(max((scheduled + long - datetime.now(UTC)).total_seconds(), 0) + 0.5)


async def test_approvals_name_the_parked_runs_no_worker_answers_for(
    client: Client,
    settings: Settings,
    llm: ScriptedLLM,
    temporal_address: str,
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
):
    """Runs parked on approvals while every worker is down. Asked one by one, each query
    waited 29 s and was then skipped: `approvals` said, minutes later, that nothing waited.
    Now the runs are asked at once and those that cannot answer are named, with why; the
    listing fails (exit 1) rather than look empty; once a worker is back, every call is
    listed and can be approved."""
    queue = f"parked-{uuid.uuid4().hex[:8]}"
    agent_id = f"parked-{uuid.uuid4().hex[:6]}"

    def compute_then_answer(request: dict[str, Any]) -> Reply:  # each run, whatever the order
        if any(m.get("role") == "tool" for m in request["messages"]):
            return Reply("FINAL ANSWER: 42")
        return Reply("Let me compute.", [call("calculator", expression="6*7")])

    model = llm.script(f"parked-{uuid.uuid4().hex[:6]}", compute_then_answer)
    async with running_worker(client, settings, task_queue=queue) as running:
        agent = running.agent(model, agent_id=agent_id, approve_tools=["calculator"])
        runs = {(await agent.start(f"What is 6*7? ({i})")).id for i in range(3)}

        async def all_parked() -> bool:
            return len(await pending_calls(client, agent_id)) == len(runs)

        await wait_for(all_parked, seconds=60, interval=0.3)
        some = await waiting_approvals(client, agent_id, limit=2)  # it says more wait
        assert (len(some.pending), some.runs_asked, some.runs_waiting) == (2, 2, 3)

    asking = Asking(monkeypatch)  # the worker is gone: every query waits out its patience
    with pytest.raises(ApprovalsUnavailable) as caught:
        await pending_calls(client, agent_id)
    assert asking.most_at_once == len(runs)  # asked at once, not one after another
    assert caught.value.pending == []
    assert {(u.run_id, u.agent) for u in caught.value.unanswered} == {(r, agent_id) for r in runs}
    assert all("no worker answered" in u.why and queue in u.why for u in caught.value.unanswered)

    env = processes.worker_env(temporal_address, database_url, llm.base_url, queue, tmp_path)
    listing = await starter_async("approvals", "--agent", agent_id, "--json", env=env, cwd=tmp_path)
    assert listing.code == 1, listing.describe()
    shown = json.loads(listing.stdout)
    assert shown["pending"] == [] and {u["run_id"] for u in shown["unanswered"]} == runs
    assert "3 runs waiting for approval could not say which calls wait" in listing.stderr

    # once the workers the server remembers have been silent long enough (shortened here),
    # no query is sent: the listing says so at once
    monkeypatch.setattr(worker_waits, "POLL_SILENCE", timedelta(seconds=2))
    await asyncio.sleep(2)  # at least: only older for a loaded machine
    asking = Asking(monkeypatch)
    with pytest.raises(ApprovalsUnavailable) as caught:
        await pending_calls(client, agent_id)
    assert asking.asked == 0  # none asked: the server's poller list said it first
    assert all(
        f"no worker polls its task queue {queue!r}" in u.why for u in caught.value.unanswered
    )
    # a live worker's poll waits up to a minute: 2 s would take the new one for none
    monkeypatch.undo()  # (and the runs are asked as before)

    async with running_worker(client, settings, task_queue=queue) as running:
        waiting = await pending_calls(client, agent_id)
        assert {p.run_id for p in waiting} == runs
        agent = running.agent(model, agent_id=agent_id, approve_tools=["calculator"])
        for run_id in runs:
            await agent.approve(run_id, by="on-call")
        for run_id in runs:
            assert (await agent.result(run_id)).output == "42"
