"""Encryption under attack: failure messages stay sealed, and with encryption required, a
client without the keys cannot slip plaintext into a run.

Rows: `input` is what a client without the keys sends to a running, encrypting run (a
signal or an update, in plaintext); `expect` is what happens to it. After each, the run
still ends the way its own model decides, nothing stored changed but the run's own rows, and
no workflow task failed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.api.history.v1 import History
from temporalio.client import Client, WorkflowUpdateFailedError

from reactive_temporal.api.agents import Agent
from reactive_temporal.codec import build_data_converter, generate_key_string
from reactive_temporal.config import Settings
from reactive_temporal.contracts import names
from reactive_temporal.contracts.entity import ChatRequest
from reactive_temporal.contracts.run import AgentConfig, FinalAnswerCapture
from reactive_temporal.embedded.scripted_llm import HttpError, Reply, ScriptedLLM, call
from reactive_temporal.hosting.runtime import Runtime
from tests.adversarial.cases import Hostile, params, table
from tests.adversarial.conftest import (
    StoreSnapshot,
    assert_no_failed_tasks,
    owned_by,
    unique,
)
from tests.workflow.conftest import running_worker

KEYS = generate_key_string("adv")
SECRET = "zanzibar-provider-secret"

PLAINTEXT = table("encryption-required", [
    Hostile("plaintext-final-answer-signal", "signal",
            "dropped: the run ends with its own answer",
            "an unauthenticated client ends a run with its own answer"),
    Hostile("plaintext-chat-update", "update", "rejected",
            "an unauthenticated client writes into an agent's chat"),
])  # fmt: skip


@pytest.fixture(scope="module")
async def sealed(
    temporal_address: str, settings: Settings
) -> AsyncIterator[tuple[Client, Client, str]]:
    """An encrypting client and worker that require encryption, and a client without keys."""
    client = await Client.connect(
        temporal_address, data_converter=build_data_converter(KEYS, required=True)
    )
    plain = await Client.connect(temporal_address, data_converter=build_data_converter(None))
    async with running_worker(client, settings, max_cached_workflows=None) as harness:
        yield client, plain, harness.task_queue


def agent(client: Client, task_queue: str, model: str, **config: Any) -> Agent:
    return Agent(
        AgentConfig(agent_id=unique("enc"), model=model, **config),
        Runtime(client, task_queue, offline_model=False),
    )


async def test_failure_messages_are_sealed_in_the_history(
    sealed: tuple[Client, Client, str], llm: ScriptedLLM, database_url: str
):
    """A provider's error body ends up in the activity failure: it must be ciphertext in the
    history, and still readable by the run (its `error`) and by anyone with the keys."""
    client, plain, task_queue = sealed
    model = llm.script(unique("enc-fail"), [HttpError(400, f"bad request near {SECRET}")])
    result = await agent(client, task_queue, model, memory=False).run("Fail, loudly")
    assert result.terminated_by == "llm_error" and SECRET in (result.error or "")
    history = await plain.get_workflow_handle(result.run_id).fetch_history()
    raw = History(events=history.events).SerializeToString()
    assert SECRET.encode() not in raw and b"Encoded failure" in raw
    await assert_no_failed_tasks(client, result.run_id)


@pytest.mark.parametrize("row", params(PLAINTEXT))
async def test_plaintext_from_a_client_without_keys_is_refused(
    row: Hostile, sealed: tuple[Client, Client, str], llm: ScriptedLLM, database_url: str
):
    client, plain, task_queue = sealed
    model = llm.script(unique("enc-plain"), [
        Reply(None, [call("calculator", expression="6*7")], delay=1.0),
        Reply("FINAL ANSWER: 42, said the model"),
    ], repeat_last=True)  # fmt: skip
    run_agent = agent(client, task_queue, model, memory=False)
    before = await StoreSnapshot.take(database_url)
    handle = await run_agent.start("What is 6*7?")
    if row.input == "signal":
        forged = FinalAnswerCapture(output="forged", format="text", summary="forged")
        await plain.get_workflow_handle(handle.id).signal(names.FINAL_ANSWER_SIGNAL, forged)
    else:
        await run_agent.chat("hello")  # the agent's entity exists, encrypted
        with pytest.raises(WorkflowUpdateFailedError):
            await plain.get_workflow_handle(run_agent.entity.workflow_id).execute_update(
                names.CHAT_UPDATE, ChatRequest(message="forged note")
            )
    result = await asyncio.wait_for(run_agent.result(handle), 60)
    after = await StoreSnapshot.take(database_url)
    assert result.output == "42, said the model", row.expect
    assert after.changes_since(before, own=owned_by(handle.id, run_agent.name)) == []
    await assert_no_failed_tasks(client, handle.id)
    if row.input == "update":
        history = await run_agent.session("default").history()
        assert all("forged" not in m.content for m in history)
