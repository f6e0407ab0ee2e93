"""A run stuck retrying a step says so where operators look: `progress` (CLI and Python), and
`runs`, name the step, its attempt, since when, and its last failure on one line; for the
LLM step Temporal's server knows it, for the run's Postgres writes (local activities) only
its worker does."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.client import Client

from reactive_temporal.api.runs import list_runs, runs_query
from reactive_temporal.config import Settings
from reactive_temporal.embedded.scripted_llm import HttpError, Reply, ScriptedLLM, call
from tests import processes
from tests.conftest import wait_for
from tests.processes import starter_async
from tests.support.pg_proxy import CountingProxy
from tests.workflow.conftest import running_worker

pytestmark = [pytest.mark.faults, pytest.mark.workflow]

FAILURE = "LLM endpoint answered HTTP 503: upstream overloaded try again later"
"""The endpoint's two-line error as a retrying step shows it: on one line."""


async def test_a_run_whose_llm_endpoint_fails_says_it_retries_the_llm_step(
    client: Client,
    settings: Settings,
    llm: ScriptedLLM,
    temporal_address: str,
    database_url: str,
    tmp_path: Path,
):
    model = llm.script(
        f"down-{uuid.uuid4().hex[:6]}",
        [HttpError(503, "upstream overloaded\n  try again later")],
        repeat_last=True,
    )
    agent_id = f"stuck-{uuid.uuid4().hex[:6]}"
    async with running_worker(client, settings) as running:
        agent = running.agent(model, agent_id=agent_id, llm_max_attempts=10)
        began = datetime.now(UTC)
        handle = await agent.start("Say hello")

        async def retried() -> bool:
            retrying = (await agent.progress(handle.id)).retrying
            return retrying is not None and retrying.attempt >= 2

        await wait_for(retried, seconds=60, interval=0.5)
        step = (await agent.progress(handle.id)).retrying
        assert step is not None
        assert (step.step, step.local) == ("llm_step", False)
        assert step.last_failure == FAILURE
        assert step.summary is not None and step.summary.startswith("llm · iteration 1 ")
        assert step.since is not None
        assert began - timedelta(seconds=1) <= step.since <= datetime.now(UTC)

        listed = await list_runs(client, runs_query(agent=agent_id))
        assert [r.run_id for r in listed] == [handle.id]
        assert listed[0].retrying is not None and listed[0].retrying.step == "llm_step"

        env = processes.worker_env(
            temporal_address, database_url, llm.base_url, running.task_queue, tmp_path
        )
        as_json = await starter_async("progress", handle.id, "--json", env=env, cwd=tmp_path)
        assert as_json.code == 0, as_json.describe()
        shown = json.loads(as_json.stdout)["retrying"]
        assert shown["step"] == "llm_step" and shown["attempt"] >= 2
        assert shown["last_failure"].startswith("LLM endpoint answered HTTP 503: upstream")
        for_people = await starter_async("progress", handle.id, env=env, cwd=tmp_path)
        assert for_people.code == 0, for_people.describe()
        line = for_people.stdout.splitlines()[-1]
        assert line.startswith("retrying llm_step (llm · iteration 1 "), line
        assert " attempt " in line and " since " in line
        assert line.endswith(f"— {FAILURE}")
        await handle.terminate()


async def test_a_run_whose_postgres_write_fails_says_it_retries_that_write(
    client: Client, settings: Settings, llm: ScriptedLLM, database_url: str
):
    """Postgres goes away as the run records an observation (a local activity, retried inside
    the worker, never seen by the server): `progress` says so, then the run goes on."""
    missing = f"nosuch_{uuid.uuid4().hex[:8]}"
    model = llm.script(
        f"pg-{uuid.uuid4().hex[:6]}",
        [Reply(None, [call(missing, x="1")]), Reply("FINAL ANSWER: done")],
    )
    proxy = await CountingProxy(database_url).start()
    proxy.cut_off_at(f"unknown tool '{missing}'".encode())  # only that observation says it
    try:
        async with running_worker(
            client, settings, database_url=proxy.url, max_cached_workflows=10
        ) as running:
            try:
                agent = running.agent(model, agent_id="pg-stuck", memory=False)
                began = datetime.now(UTC)
                handle = await agent.start("Use the tool")
                await wait_for(lambda: proxy.is_cut, seconds=60)

                async def retried() -> bool:
                    retrying = (await agent.progress(handle.id)).retrying
                    return retrying is not None and retrying.attempt >= 2

                await wait_for(retried, seconds=60, interval=0.5)
                step = (await agent.progress(handle.id)).retrying
                assert step is not None
                assert (step.step, step.local) == ("record_messages", True)
                assert step.last_failure is not None  # the connection cut, or waiting for one
                assert re.match(
                    r"(OperationalError|PoolTimeout|timed out after 10 s)", step.last_failure
                )
                assert step.since is not None
                assert began - timedelta(seconds=1) <= step.since <= datetime.now(UTC)

                listed = await list_runs(client, runs_query(agent="pg-stuck", status="running"))
                mine = [r for r in listed if r.run_id == handle.id]
                assert mine and mine[0].retrying is not None
                assert mine[0].retrying.step == "record_messages"

                proxy.restore()
                result = await agent.result(handle)
                assert result.success and result.output == "done"
                assert (await agent.progress(handle.id)).retrying is None
            finally:  # Postgres back for the worker's shutdown, whatever happened
                proxy.restore()
    finally:
        await proxy.stop()
