"""Chat, sessions and approvals on a self-hosted cluster that refuses what they are made of.

Every chat turn, session open and end, `last_debrief` and approval decision is a workflow
update, and an agent's entity is started by its first (update-with-start): switches of a
namespace's dynamic config (`reactive_temporal/cluster_switches.py`). A dev server of its own
runs with `frontend.enableUpdateWorkflowExecution=false`. Update-with-start's switch
(`frontend.enableExecuteMultiOperation`) is gone from the dev server here (Server 1.32; it was
removed in 1.30.0 and is ignored when given), so a front that answers ExecuteMultiOperation as
a 1.24–1.29 frontend with it off (or as a server before 1.24) stands before the shared dev
server and passes every other call (`tests/support/refusing_frontend.py`).

Refused updates are a typed error naming the setting, for good (never waited out as a busy
server), from the Python API and as one line and a non-zero status from the CLI; refused
update-with-start starts the entity first and each turn still runs once; `check` finds either.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from reactive_temporal.api.agents import Agent
from reactive_temporal.api.chat_refusals import ChatError, ClusterRefusal
from reactive_temporal.codec import build_data_converter
from reactive_temporal.config import Settings
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.embedded.dev_server import DevServer
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from reactive_temporal.hosting.runtime import Runtime
from tests.conftest import wait_for
from tests.processes import clean_env, starter_async
from tests.support.dev_servers import dev_server_with
from tests.support.refusing_frontend import (
    MULTI_OPERATION,
    MULTI_OPERATION_OFF,
    MULTI_OPERATION_UNKNOWN,
    RefusingFrontend,
)
from tests.workflow.conftest import Harness, running_worker
from workflows.agent_run import AgentRunWorkflow

pytestmark = [pytest.mark.workflow, pytest.mark.e2e]

UPDATES_KEY = "frontend.enableUpdateWorkflowExecution"
UPDATE_WITH_START_KEY = "frontend.enableExecuteMultiOperation"
HANG_GUARD = 60


@pytest.fixture(scope="module")
async def no_updates(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevServer]:
    """A dev server of its own whose namespace refuses workflow updates (as before 1.25)."""
    async with dev_server_with(tmp_path_factory.mktemp("no-updates"), f"{UPDATES_KEY}=false") as s:
        yield s


@pytest.fixture(params=[MULTI_OPERATION_OFF, MULTI_OPERATION_UNKNOWN], ids=["off", "unknown"])
def no_update_with_start(
    request: pytest.FixtureRequest, temporal_address: str
) -> Iterator[RefusingFrontend]:
    """The shared dev server behind a front refusing update-with-start, switched off or
    unknown; everything else goes through."""
    with RefusingFrontend(temporal_address, {MULTI_OPERATION: request.param}) as front:
        yield front


async def project_client(address: str) -> Client:
    return await Client.connect(address, data_converter=build_data_converter(None))


def agent_on(client: Client, harness: Harness, model: str, **config: object) -> Agent:
    """An agent of its own (a fresh entity) reached through `client`, served by `harness`."""
    agent_config = AgentConfig.model_validate(
        {"agent_id": f"locked-{uuid.uuid4().hex[:8]}", "model": model, **config}
    )
    return Agent(agent_config, Runtime(client, harness.task_queue, offline_model=False))


async def parked_run(agent: Agent) -> str:
    """A run of `agent` (which approves `calculator`) waiting for its call's approval."""
    handle = await agent.start("What is 2+2?")

    async def waiting() -> bool:
        progress = await handle.query(AgentRunWorkflow.progress)
        return bool(progress.pending_approvals)

    await wait_for(waiting, seconds=HANG_GUARD)
    return handle.id


def approving_model(llm: ScriptedLLM) -> str:
    return llm.script(
        f"approving-{uuid.uuid4().hex[:6]}",
        [Reply("Computing.", [call("calculator", expression="2+2")]), Reply("FINAL ANSWER: 4")],
    )


def said_once(stderr: str) -> str:
    """The one `error:` line a CLI command printed (it prints nothing else on failure)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


async def test_the_api_refuses_for_good_naming_the_setting_when_updates_are_off(
    no_updates: DevServer,
    settings: Settings,
    llm: ScriptedLLM,
    caplog: pytest.LogCaptureFixture,
):
    client = await project_client(no_updates.address)
    model = llm.script(f"never-{uuid.uuid4().hex[:6]}", [Reply("hello")], repeat_last=True)
    async with running_worker(client, settings) as harness:
        agent = agent_on(client, harness, model)
        for asked in (
            lambda: agent.chat("hello", use_tools=False),
            lambda: agent.session().chat("hello"),
            agent.get_last_debrief,
        ):
            with pytest.raises(ClusterRefusal) as refused:
                await asyncio.wait_for(asked(), HANG_GUARD)  # a hang guard: it fails at once
            assert isinstance(refused.value, ChatError)  # caught where chat's refusals are
            assert refused.value.setting == UPDATES_KEY
            said = str(refused.value)
            assert f"set the dynamic config {UPDATES_KEY} to true" in said, said
            assert "Temporal Server 1.25.0" in said
            assert "UpdateWorkflowExecution operation is disabled on this namespace" in said
        with pytest.raises(RPCError) as missing:  # the refused turns started nothing
            await agent.entity.handle().describe()
        assert missing.value.status == RPCStatusCode.NOT_FOUND

        approver = agent_on(client, harness, approving_model(llm), approve_tools=["calculator"])
        run_id = await parked_run(approver)
        for decide in (
            lambda: approver.approve(run_id),
            lambda: approver.deny(run_id, reason="no"),
        ):
            with pytest.raises(ClusterRefusal, match=UPDATES_KEY):
                await asyncio.wait_for(decide(), HANG_GUARD)
        await approver.cancel(run_id)
    assert llm.requests[model] == []
    assert "waiting on" not in caplog.text  # never taken for a busy server and sent again


async def test_the_cli_says_what_to_enable_and_exits_non_zero_when_updates_are_off(
    no_updates: DevServer, settings: Settings, llm: ScriptedLLM, tmp_path: Path
):
    client = await project_client(no_updates.address)
    async with running_worker(client, settings) as harness:
        env = clean_env(
            TEMPORAL_ADDRESS=no_updates.address,
            TEMPORAL_TASK_QUEUE=harness.task_queue,
            DATABASE_URL=settings.database_url or "",
            OPENAI_BASE_URL=llm.base_url,
            OPENAI_API_KEY="test",
            REACTIVE_TEMPORAL_DATA_DIR=str(tmp_path / "data"),
        )
        approver = agent_on(client, harness, approving_model(llm), approve_tools=["calculator"])
        run_id = await parked_run(approver)
        for command in (
            ("chat", "hello", "--json"),
            ("session", "end", "s-1", "--json"),
            ("approve", run_id, "--json"),
            ("deny", run_id, "--reason", "no", "--json"),
        ):
            done = await starter_async(*command, env=env, cwd=tmp_path, seconds=HANG_GUARD)
            assert done.code not in (0, None), done.describe()
            error = json.loads(done.stdout)["error"]
            assert f"set the dynamic config {UPDATES_KEY} to true" in error, done.describe()
            assert "Temporal Server 1.25.0" in error
            assert said_once(done.stderr) == f"error: {error}"
        plain = await starter_async("chat", "hello", env=env, cwd=tmp_path, seconds=HANG_GUARD)
        assert plain.code not in (0, None) and plain.stdout == "", plain.describe()
        assert UPDATES_KEY in said_once(plain.stderr)
        await approver.cancel(run_id)


async def test_without_update_with_start_the_entity_is_started_first_and_each_turn_runs_once(
    no_update_with_start: RefusingFrontend,
    client: Client,
    settings: Settings,
    llm: ScriptedLLM,
    caplog: pytest.LogCaptureFixture,
):
    """Three turns to two agents never started, through a cluster refusing update-with-start:
    refused once, remembered for the client, each agent's entity started first; the model
    answers each turn once."""
    model = llm.script(
        f"fallback-{uuid.uuid4().hex[:6]}",
        [Reply("first"), Reply("second"), Reply("third")],
    )
    through_front = await project_client(no_update_with_start.address)
    async with running_worker(client, settings) as harness:  # the worker needs no front
        agent = agent_on(through_front, harness, model)
        other = agent_on(through_front, harness, model)
        replies = [
            await asyncio.wait_for(agent.chat("one", use_tools=False), HANG_GUARD),
            await asyncio.wait_for(agent.session().chat("two", use_tools=False), HANG_GUARD),
            await asyncio.wait_for(other.chat("three", use_tools=False), HANG_GUARD),
        ]
    assert [r.message for r in replies] == ["first", "second", "third"]
    assert len(llm.requests[model]) == 3  # each turn answered once
    assert no_update_with_start.refused_calls() == [MULTI_OPERATION]  # asked once, remembered
    assert caplog.text.count("refuses update-with-start") == 1
    assert UPDATE_WITH_START_KEY in caplog.text


async def check_rows(address: str, settings: Settings, llm: ScriptedLLM, cwd: Path):
    """`starter.py check --json` against `address`: its exit status and rows by name."""
    env = clean_env(
        TEMPORAL_ADDRESS=address,
        DATABASE_URL=settings.database_url or "",
        OPENAI_BASE_URL=llm.base_url,
        OPENAI_API_KEY="test",
        REACTIVE_TEMPORAL_DATA_DIR=str(cwd / "data"),
    )
    migrated = await starter_async("migrate", env=env, cwd=cwd, seconds=HANG_GUARD)
    assert migrated.code == 0, migrated.describe()
    done = await starter_async("check", "--json", env=env, cwd=cwd, seconds=HANG_GUARD)
    assert done.code is not None, done.describe()
    return done.code, {row["name"]: row for row in json.loads(done.stdout)["checks"]}


async def test_check_fails_updates_switched_off_and_warns_update_with_start_refused(
    no_updates: DevServer,
    no_update_with_start: RefusingFrontend,
    settings: Settings,
    llm: ScriptedLLM,
    tmp_path: Path,
):
    code, rows = await check_rows(no_updates.address, settings, llm, tmp_path)
    row = rows["workflow updates"]
    assert code == 1 and row["status"] == "fail", rows
    assert f"set the dynamic config {UPDATES_KEY} to true" in row["detail"]
    assert [name for name, r in rows.items() if r["status"] == "fail"] == ["workflow updates"]

    code, rows = await check_rows(no_update_with_start.address, settings, llm, tmp_path)
    row = rows["workflow updates"]
    assert code == 0 and row["status"] == "warn", rows
    assert "refuses update-with-start" in row["detail"] or "not implement" in row["detail"]
    assert "chat starts the entity first (one more call" in row["detail"]
    if "unknown method" in row["detail"]:  # a server before 1.24: no switch to name
        assert "upgrade the server to Temporal Server 1.26.2" in row["detail"]
    else:
        assert f"set the dynamic config {UPDATE_WITH_START_KEY} to true" in row["detail"]
    assert no_update_with_start.refused_calls() == [MULTI_OPERATION]  # probed once, no more
