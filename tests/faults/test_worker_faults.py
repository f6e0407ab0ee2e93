"""Workers die and come back; workers share the load. Runs finish as if nothing happened."""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from pathlib import Path

import psycopg
import pytest
from temporalio.client import Client

from reactive_temporal.api.agents import Agent
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.embedded.scripted_llm import ScriptedLLM
from reactive_temporal.hosting.runtime import Runtime
from reactive_temporal.prompts import NOTES_LABEL
from tests.conftest import wait_for
from tests.faults.conftest import slow_demo
from tests.processes import start_worker, stop, worker_env

pytestmark = pytest.mark.faults


def agent(client: Client, queue: str, model: str, name: str) -> Agent:
    config = AgentConfig(agent_id=name, model=model)
    return Agent(config, Runtime(client, queue, offline_model=False))


def transcript_shapes(database_url: str, run_ids: list[str]) -> dict[str, list[tuple[int, str]]]:
    """Each run's transcript as (seq, role), less the memory notes a run may start with.

    A run whose first workflow task died with its worker runs that task again on the next
    worker, later: it remembers the runs of this test that ended meanwhile, as a user-role
    note after the task (seq 2), and the rest of its transcript moves one place along. Those
    notes must name another run of this test; the shape is compared without them."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT run_id, seq, role, content FROM run_messages"
            " WHERE run_id = ANY(%s) ORDER BY run_id, seq",
            (run_ids,),
        ).fetchall()
    shapes: dict[str, list[tuple[int, str]]] = {r: [] for r in run_ids}
    notes: set[str] = set()
    for run_id, seq, role, content in rows:
        if seq == 2 and role == "user" and content.startswith(NOTES_LABEL):
            assert any(other in content for other in run_ids if other != run_id), content
            notes.add(run_id)
            continue
        shapes[run_id].append((seq - 1 if run_id in notes else seq, role))
    return shapes


def debrief_rows(database_url: str, run_ids: list[str]) -> dict[str, int]:
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT run_id, count(*) FROM agent_debriefs WHERE run_id = ANY(%s) GROUP BY run_id",
            (run_ids,),
        ).fetchall()
    return dict(rows)


EXPECTED_SHAPE = [
    (0, "system"),
    (1, "user"),
    (2, "assistant"),
    (3, "tool"),  # calculator
    (4, "assistant"),
    (5, "tool"),  # ✓ final-answer accepted
]


async def test_ten_runs_survive_two_worker_kills(
    client: Client, temporal_address: str, database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    queue = f"kill-{uuid.uuid4().hex[:8]}"
    model = llm.script(f"kill-{uuid.uuid4().hex[:6]}", slow_demo(0.7))
    env = worker_env(temporal_address, database_url, llm.base_url, queue, tmp_path)
    log = tmp_path / "workers.log"
    workers = [start_worker(env, log)]
    try:
        started = time.monotonic()
        runner = agent(client, queue, model, f"crash-test-{uuid.uuid4().hex[:6]}")
        tasks = [asyncio.ensure_future(runner.run(f"What is {i} * 7 + 1?")) for i in range(10)]

        for threshold in (6, 16):  # kill mid-flight, twice
            await wait_for(lambda t=threshold: len(llm.requests[model]) >= t, seconds=60)
            workers[-1].send_signal(signal.SIGKILL)
            workers[-1].wait(10)
            workers.append(start_worker(env, log))

        results = await asyncio.wait_for(asyncio.gather(*tasks), timeout=150)
        elapsed = time.monotonic() - started
        rich = [r.debrief_rich() for r in results]  # the debriefs need a live worker too
        await asyncio.wait_for(asyncio.gather(*rich), timeout=60)
    finally:
        stop(*workers)

    assert [r.output for r in results] == [f"{i} * 7 + 1 = {i * 7 + 1}" for i in range(10)]
    assert all(r.success and r.terminated_by == "final_answer_tool" for r in results)
    run_ids = [r.run_id for r in results]
    shapes = transcript_shapes(database_url, run_ids)
    odd = {run_id: shape for run_id, shape in shapes.items() if shape != EXPECTED_SHAPE}
    assert not odd, odd
    assert debrief_rows(database_url, run_ids) == {run_id: 1 for run_id in run_ids}
    print(f"10 runs, 2 worker kills: {elapsed:.1f}s")


async def test_two_workers_share_runs_and_one_finishes_after_the_other_dies(
    client: Client, temporal_address: str, database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    queue = f"scale-{uuid.uuid4().hex[:8]}"
    model = llm.script(f"scale-{uuid.uuid4().hex[:6]}", slow_demo(0.3))
    env = worker_env(temporal_address, database_url, llm.base_url, queue, tmp_path)
    first = start_worker(env, tmp_path / "first.log")
    second = start_worker(env, tmp_path / "second.log")
    try:
        runner = agent(client, queue, model, "scale-test")
        handles = [await runner.start(f"What is {i} + 100?") for i in range(20)]
        await wait_for(lambda: len(llm.requests[model]) >= 12, seconds=60)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        results = await asyncio.wait_for(
            asyncio.gather(*(runner.result(h) for h in handles)), timeout=150
        )
        identities = set()
        for handle in handles:
            history = await handle.fetch_history()
            for event in history.events:
                if event.HasField("workflow_task_completed_event_attributes"):
                    identities.add(event.workflow_task_completed_event_attributes.identity)
    finally:
        stop(first, second)

    assert [r.output for r in results] == [f"{i} + 100 = {i + 100}" for i in range(20)]
    pids = {identity.split("@", 1)[0] for identity in identities}
    assert {str(first.pid), str(second.pid)} <= pids, identities  # both did work
