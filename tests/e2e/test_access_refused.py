"""The Python API on a cluster whose authorizer refuses the caller.

A Temporal Cloud API key (or an mTLS identity) without the namespace permission a call needs
is answered PERMISSION_DENIED "Request unauthorized."; a key that is invalid, expired or
revoked, UNAUTHENTICATED. The dev server has no authorizer: a front answers as one does,
deciding by the API key each call carries (`tests/support/authorizer.py`), and passes what it
allows to the shared dev server. The worker serving the runs reaches the dev server directly.

The API raises a TemporalPermissionDenied / TemporalCredentialsRejected (still RPCErrors) that
names the call, the namespace, where the key came from (never the key) and what to grant or
renew; a key renewed in TEMPORAL_API_KEY_FILE is taken without a restart.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from reactive_temporal import (
    ReactiveAgents,
    TemporalAccessDenied,
    TemporalCredentialsRejected,
    TemporalPermissionDenied,
)
from reactive_temporal.api.agents import Agent
from reactive_temporal.api.builder import AgentBuilder
from reactive_temporal.config import Settings
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from reactive_temporal.hosting.runtime import open_runtime
from tests.conftest import wait_for
from tests.support.refusing_frontend import RefusingFrontend
from tests.workflow.conftest import Harness, running_worker

pytestmark = [pytest.mark.workflow, pytest.mark.e2e]

HANG_GUARD = 60
CLOUD_REASON = "caller has insufficient permissions for namespace 'default'"


@pytest.fixture
async def harness(client: Client, settings: Settings) -> AsyncIterator[Harness]:
    async with running_worker(client, settings) as running:
        yield running


@pytest.fixture
def key_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """TEMPORAL_API_KEY_FILE, plain gRPC (the front speaks no TLS), no other credentials."""
    path = tmp_path / "temporal-api-key"
    for name in ("TEMPORAL_API_KEY", "TEMPORAL_PROFILE", "TEMPORAL_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TEMPORAL_API_KEY_FILE", str(path))
    monkeypatch.setenv("TEMPORAL_TLS", "false")
    return path


def builder_through(
    front: RefusingFrontend, settings: Settings, harness: Harness, model: str
) -> AgentBuilder:
    """The public builder of an agent of its own, on the front, with the key file."""
    ours = settings.model_copy(
        update={
            "temporal_address": front.address,
            "temporal_task_queue": harness.task_queue,
            "credentials_poll_seconds": 0.2,
        }
    )
    return (
        ReactiveAgents.create()
        .with_settings(ours)
        .with_name(f"locked-{uuid.uuid4().hex[:8]}")
        .with_provider("openai", model=model)
    )


async def agent_through(
    front: RefusingFrontend, settings: Settings, harness: Harness, model: str
) -> Agent:
    """An agent on the front as the CLI opens one (`open_agent`): `build()` starts the agent's
    entity with its configuration, which a key that may not write is refused."""
    builder = builder_through(front, settings, harness, model)
    assert builder.settings is not None
    return Agent(builder.config(), await open_runtime(builder.settings), configured=False)


async def parked_run(harness: Harness, llm: ScriptedLLM, agent: Agent) -> str:
    """A run of `agent`'s name, started with full rights, waiting for a call's approval."""
    model = llm.script(
        f"approving-{uuid.uuid4().hex[:6]}",
        [Reply("Computing.", [call("calculator", expression="2+2")]), Reply("FINAL ANSWER: 4")],
    )
    handle = await harness.agent(
        model, agent_id=agent.config.agent_id, approve_tools=["calculator"]
    ).start("What is 2+2?")

    async def waiting() -> bool:
        return bool(await harness.agent(model, agent_id=agent.config.agent_id).approvals())

    await wait_for(waiting, seconds=HANG_GUARD)
    return handle.id


async def put(key_file: Path, key: str) -> None:
    """Write the key file (off the loop: the worker in this process shares it)."""
    await asyncio.to_thread(key_file.write_text, key)


def says_what_to_grant(err: TemporalAccessDenied, key_file: Path, action: str, access: str) -> None:
    said = str(err)
    assert isinstance(err, RPCError) and err.message == said  # still an RPCError
    assert action in said and "in namespace 'default'" in said, said
    assert f"the API key in TEMPORAL_API_KEY_FILE ({key_file})" in said, said
    assert f"This needs {access} access" in said, said
    permission = {"write": "Write", "read": "Read"}[access]
    assert f"the {permission} permission on namespace 'default'" in said, said
    assert f"default:{access}" in said, said  # a self-hosted authorizer's claim
    assert key_file.read_text().strip() not in said  # never the secret
    assert "\n" not in said


async def test_a_read_only_key_is_refused_what_writes_saying_the_permission_it_needs(
    authorizer: RefusingFrontend, harness: Harness, settings: Settings, llm: ScriptedLLM,
    key_file: Path,
):  # fmt: skip
    await put(key_file, "k-read\n")
    model = llm.script(f"never-{uuid.uuid4().hex[:6]}", [Reply("hello")], repeat_last=True)
    with pytest.raises(TemporalPermissionDenied) as denied:  # build() configures the entity
        await builder_through(authorizer, settings, harness, model).build()
    action = "start the agent's entity (chat and approvals) with the signal 'configure'"
    says_what_to_grant(denied.value, key_file, action, "write")

    agent = await agent_through(authorizer, settings, harness, model)
    try:
        with pytest.raises(TemporalPermissionDenied) as denied:
            await asyncio.wait_for(agent.run("What is 2+2?"), HANG_GUARD)
        says_what_to_grant(denied.value, key_file, "start a run (StartWorkflowExecution)", "write")
        assert denied.value.status == RPCStatusCode.PERMISSION_DENIED
        assert f"'Request unauthorized.' ({CLOUD_REASON})" in str(denied.value)

        with pytest.raises(TemporalPermissionDenied) as denied:
            await asyncio.wait_for(agent.chat("hello", use_tools=False), HANG_GUARD)
        says_what_to_grant(denied.value, key_file, "with start (ExecuteMultiOperation)", "write")

        run_id = await parked_run(harness, llm, agent)
        assert await agent.approvals()  # reading is allowed: listed, and queried
        assert (await agent.progress(run_id)).pending_approvals
        for decide, action in (
            (lambda: agent.approve(run_id), "send the update"),
            (lambda: agent.cancel(run_id), "cancel a workflow (RequestCancelWorkflowExecution)"),
        ):
            with pytest.raises(TemporalPermissionDenied) as denied:
                await asyncio.wait_for(decide(), HANG_GUARD)
            says_what_to_grant(denied.value, key_file, action, "write")
        await harness.agent(model).cancel(run_id)
    finally:
        await agent.dispose()
    assert llm.requests[model] == []


async def test_a_key_of_another_namespace_is_refused_reading_too(
    authorizer: RefusingFrontend, harness: Harness, settings: Settings, llm: ScriptedLLM,
    key_file: Path,
):  # fmt: skip
    await put(key_file, "k-other-namespace")
    model = llm.script(f"never-{uuid.uuid4().hex[:6]}", [Reply("hello")], repeat_last=True)
    agent = await agent_through(authorizer, settings, harness, model)  # connects: allowed
    try:
        run_id = await parked_run(harness, llm, agent)
        for read, action in (
            (lambda: agent.progress(run_id), "read a workflow's state (DescribeWorkflowExecution)"),
            (lambda: agent.result(run_id), "read a workflow's state (DescribeWorkflowExecution)"),
            (agent.approvals, "list workflows (ListWorkflowExecutions)"),
            (agent.get_last_debrief, "send the update 'read_last_run' with start"),
        ):
            with pytest.raises(TemporalPermissionDenied) as denied:
                await asyncio.wait_for(read(), HANG_GUARD)
            access = "write" if "update" in action else "read"
            says_what_to_grant(denied.value, key_file, action, access)
        await harness.agent(model).cancel(run_id)
    finally:
        await agent.dispose()


async def test_a_revoked_key_is_rejected_until_its_file_holds_a_valid_one(
    authorizer: RefusingFrontend, harness: Harness, settings: Settings, llm: ScriptedLLM,
    key_file: Path,
):  # fmt: skip
    """The key of a long-lived process revoked, then renewed in its file: no restart."""
    await put(key_file, "k-write")
    model = llm.script(
        f"answers-{uuid.uuid4().hex[:6]}", [Reply("FINAL ANSWER: 4")], repeat_last=True
    )
    agent = await builder_through(authorizer, settings, harness, model).build()
    try:
        assert (await asyncio.wait_for(agent.run("What is 2+2?"), HANG_GUARD)).output == "4"
        await put(key_file, "k-revoked")
        rejected: list[TemporalCredentialsRejected] = []

        async def refused() -> bool:  # once the process has read the file again
            try:
                await agent.approvals()
            except TemporalCredentialsRejected as err:
                rejected.append(err)
                return True
            return False

        await wait_for(refused, seconds=HANG_GUARD)
        said = str(rejected[0])
        assert rejected[0].status == RPCStatusCode.UNAUTHENTICATED, said
        assert "Temporal did not accept the API key in TEMPORAL_API_KEY_FILE" in said, said
        assert "'Jwt verification fails'" in said and "list workflows" in said, said
        assert f"write a valid one into {key_file}" in said and "without a restart" in said
        assert "k-revoked" not in said

        await put(key_file, "k-write")

        async def accepted() -> bool:
            try:
                await agent.approvals()
            except TemporalCredentialsRejected:
                return False
            return True

        await wait_for(accepted, seconds=HANG_GUARD)
        assert (await asyncio.wait_for(agent.run("What is 2+2?"), HANG_GUARD)).output == "4"
    finally:
        await agent.dispose()
