"""Credentials a run's tools read never reach its agent's long-lived memory: not the stored
debrief or lessons, not `starter.py lessons`, not chat's context, not the next run's prompt.
A real dev server, Postgres and scripted models; the key is one a tool really read."""

from __future__ import annotations

import dataclasses
import json
import logging
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import ActivityEnvironment

from activities.workflow_calls import EntityActivities
from reactive_temporal.config import Settings
from reactive_temporal.contracts import names
from reactive_temporal.contracts.debrief import AgentDebrief
from reactive_temporal.contracts.entity import ChatDirectInput, NotifyAgentInput, RunFinished
from reactive_temporal.contracts.run import AgentConfig, RunProgress
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from reactive_temporal.secrets_scan import (
    ANTHROPIC,
    GITHUB,
    OPENAI,
    PASSWORD,
    PRIVATE_KEY,
    marker,
)
from reactive_temporal.telemetry.metrics import REGISTRY
from tests.conftest import wait_for
from tests.processes import clean_env, starter_async
from tests.workflow.conftest import Harness

pytestmark = pytest.mark.workflow

OPENAI_KEY = "sk-proj-" + "Qx7" * 25 + "T3BlbkFJ" + "mP4k" * 18
GITHUB_KEY = "ghp_" + "Zr8vW2" * 6
ANTHROPIC_KEY = "sk-ant-api03-" + "Lk9Tq3" * 15 + "AA"
PRIVATE = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    + "\n".join(("MIIEowIBAAKCAQEA" + "u7Yb" * 12) for _ in range(4))
    + "\n-----END RSA PRIVATE KEY-----"
)
SECRETS = (OPENAI_KEY, GITHUB_KEY, ANTHROPIC_KEY, "MIIEowIBAAKCAQEA")


def holds_a_secret(text: str) -> list[str]:
    return [s[:12] for s in SECRETS if s in text]


def redactions(where: str, kind: str) -> float:
    labels = {"where": where, "kind": kind}
    return REGISTRY.get_sample_value("reactive_temporal_secrets_redacted_total", labels) or 0.0


async def test_a_key_a_tool_read_stays_out_of_lessons_debriefs_chat_and_the_next_prompt(
    harness: Harness,
    llm: ScriptedLLM,
    model_name: str,
    settings: Settings,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
):
    caplog.set_level(logging.WARNING, logger="activities.memory_redaction")
    counted_before = redactions("synthesis", OPENAI)
    agent_id = f"secrets-{uuid.uuid4().hex[:8]}"
    env_file = f"billing-{agent_id}.env"
    settings.workspace.mkdir(parents=True, exist_ok=True)
    (settings.workspace / env_file).write_text(
        f"OPENAI_API_KEY={OPENAI_KEY}\nDEPLOY_KEY={PRIVATE}\nREGION=eu-west-1\n"
    )
    llm.script(
        model_name,
        [
            Reply(None, [call("file_read", path=env_file)]),
            # a tool error quoting a key: the deterministic debrief's errors quote it verbatim
            Reply(None, [call("file_read", path=f"keys/{GITHUB_KEY}.txt")]),
            Reply(
                None,
                [
                    call(
                        "final-answer",
                        output="The billing API is configured for eu-west-1. " * 4,
                        format="text",
                        summary="Read the billing settings.",
                    )
                ],
            ),
            Reply("I read the billing settings."),  # the chat turn below
        ],
    )
    synthesis = {  # the model writes what it read into its summary, a finding and a lesson
        "summary": f"Read the billing env; its key is {OPENAI_KEY}.",
        "key_findings": [f"The .env holds OPENAI_API_KEY={OPENAI_KEY}", "Region eu-west-1"],
        "errors_encountered": [f"no file for {GITHUB_KEY}"],
        "lessons_learned": [
            f"Use the key {OPENAI_KEY} for the billing API",
            f"The billing API deploy key is {PRIVATE}",
            "Billing runs in eu-west-1",
        ],
        "caveats": "",
    }
    synth = llm.script(f"{model_name}-debrief", [Reply(json.dumps(synthesis))])
    agent = harness.agent(model_name, agent_id=agent_id, debrief_model=synth)
    first = await agent.run("Check the billing API settings")
    assert OPENAI_KEY in json.dumps(llm.requests[model_name][1])  # the tool really read it

    rich = await first.debrief_rich()
    assert rich is not None and rich.synthesized
    assert rich.lessons_learned == [
        f"Use the key {marker(OPENAI)} for the billing API",
        f"The billing API deploy key is {marker(PRIVATE_KEY)}",
        "Billing runs in eu-west-1",
    ]
    assert rich.key_findings[0] == f"The .env holds OPENAI_API_KEY={marker(OPENAI)}"
    assert holds_a_secret(rich.summary + rich.markdown.split("## Errors")[0]) == []
    assert redactions("synthesis", OPENAI) == counted_before + 3  # summary, finding, lesson
    warned = [r.getMessage() for r in caplog.records if f"run {first.run_id}" in r.getMessage()]
    assert any(OPENAI in m and "synthesis" in m for m in warned), warned
    assert holds_a_secret("\n".join(r.getMessage() for r in caplog.records)) == []

    async with harness.store.pool.connection() as conn:
        stored = [
            str(row)
            for query in (
                "SELECT debrief_json::text, debrief_markdown FROM agent_debriefs WHERE run_id = %s",
                "SELECT lesson FROM agent_lessons WHERE run_id = %s",
                "SELECT run::text FROM agent_last_runs WHERE run_id = %s",
            )
            for row in await (await conn.execute(query, (first.run_id,))).fetchall()
        ]
        assert len(stored) == 5  # the debrief, three lessons, the last run (with observations)
        assert holds_a_secret("\n".join(stored)) == []
        assert marker(GITHUB) in stored[0]  # the tool's error, as the debrief quotes it

    reply = await agent.chat("What did you find in the billing settings?", use_tools=False)
    assert reply.message == "I read the billing settings."
    chat_request = json.dumps(llm.requests[model_name][-1])
    assert "[Tool result]: OPENAI_API_KEY=" in chat_request  # the observation it quotes
    assert holds_a_secret(chat_request) == []

    async with harness.store.pool.connection() as conn:  # rows kept before keys were kept out
        await conn.execute(
            "INSERT INTO agent_lessons (run_id, position, agent_id, lesson, expires_at)"
            " VALUES (%s, 0, %s, %s, now() + interval '30 days')",
            (f"old-{agent_id}", agent_id, f"The billing API takes {ANTHROPIC_KEY} as its key"),
        )
        await conn.execute(
            "UPDATE agent_debriefs SET debrief_json = jsonb_set(debrief_json, '{summary}',"
            " to_jsonb(%s::text)) WHERE run_id = %s",
            (f"Kept before: {ANTHROPIC_KEY}", first.run_id),
        )

    env = clean_env(
        DATABASE_URL=harness.database_url or "", REACTIVE_TEMPORAL_DATA_DIR=str(tmp_path / "d")
    )
    listed = await starter_async("lessons", "--agent", agent_id, "--json", env=env, cwd=tmp_path)
    assert listed.code == 0, listed.describe()
    lessons = [x["lesson"] for x in json.loads(listed.stdout)["lessons"]]
    assert f"The billing API takes {marker(ANTHROPIC)} as its key" in lessons
    assert holds_a_secret(listed.stdout) == [] and len(lessons) == 4

    second_model = llm.script(
        f"{model_name}-2",
        [Reply("FINAL ANSWER: done"), Reply("FINAL ANSWER: I called the billing API.")],
    )
    second = harness.agent(second_model, agent_id=agent_id)
    await second.run("Call the billing API with its key")
    prompt = json.dumps(llm.requests[second_model][0])
    assert marker(OPENAI) in prompt and marker(ANTHROPIC) in prompt  # the lessons reached it
    assert f"Kept before: {marker(ANTHROPIC)}" in prompt  # the last run's notes
    assert "Errors in that run" in prompt and marker(GITHUB) in prompt
    assert holds_a_secret(prompt) == []

    async with harness.store.pool.connection() as conn:  # the last run, kept before
        await conn.execute(
            "UPDATE agent_last_runs SET run = jsonb_set(run, '{observations}',"
            " jsonb_build_array(%s::text)) WHERE agent_id = %s",
            (f"[Tool result]: kept before: {ANTHROPIC_KEY}", agent_id),
        )
    await second.chat("Which key did the billing API take?", use_tools=True)
    task = json.dumps(llm.requests[second_model][-1])  # the chat's run, told of the last run
    assert f"kept before: {marker(ANTHROPIC)}" in task and holds_a_secret(task) == []


async def test_a_password_a_lesson_quotes_is_kept_out_and_its_label_and_prose_kept(
    harness: Harness,
    llm: ScriptedLLM,
    model_name: str,
    settings: Settings,
    caplog: pytest.LogCaptureFixture,
):
    """A password the tool read (a `.env`, a curl command), written by the synthesis into a
    lesson as a label, a command and JSON: the stored lessons and the next run's prompt
    hold `Password: [redacted: password]`; the prose about the password and a page's
    cursor are kept as they were (the next run is given the lessons its task's words
    choose: here the two about the staging DB)."""
    caplog.set_level(logging.WARNING, logger="activities.memory_redaction")
    password = "Hunter2-staging"
    counted_before = redactions("synthesis", PASSWORD)
    agent_id = f"secrets-pw-{uuid.uuid4().hex[:8]}"
    env_file = f"staging-{agent_id}.env"
    settings.workspace.mkdir(parents=True, exist_ok=True)
    (settings.workspace / env_file).write_text(f"DB_HOST=db\nDB_PASSWORD={password}\n")
    llm.script(
        model_name,
        [
            Reply(None, [call("file_read", path=env_file)]),
            Reply("FINAL ANSWER: " + "The staging database is at db. " * 4),  # not trivial
        ],
    )
    cursor = "nextPageToken: CiAKGjBpNDd2Nmp2Zml2cXRwYjBpOXA1"
    lessons = [
        f"Staging DB login: **Password:** {password}",
        f"Check it with curl -u deploy:{password} https://staging.example.com/health",
        f'The config reads {{"user": "app", "password": "{password}"}}',
        "The password is required for the staging DB",
        f"Listing runs pages with {cursor}",
    ]
    synthesis = {"summary": "Read the staging env.", "lessons_learned": lessons, "caveats": ""}
    synth = llm.script(f"{model_name}-debrief", [Reply(json.dumps(synthesis))])
    agent = harness.agent(model_name, agent_id=agent_id, debrief_model=synth)
    first = await agent.run("Where is the staging database?")
    assert password in json.dumps(llm.requests[model_name][1])  # the tool really read it

    rich = await first.debrief_rich()
    assert rich is not None and rich.synthesized
    assert rich.lessons_learned == [
        f"Staging DB login: **Password:** {marker(PASSWORD)}",
        f"Check it with curl -u deploy:{marker(PASSWORD)} https://staging.example.com/health",
        f'The config reads {{"user": "app", "password": "{marker(PASSWORD)}"}}',
        "The password is required for the staging DB",
        f"Listing runs pages with {cursor}",
    ]
    assert redactions("synthesis", PASSWORD) == counted_before + 3
    assert password not in "\n".join(r.getMessage() for r in caplog.records)

    async with harness.store.pool.connection() as conn:
        stored = await (
            await conn.execute(
                "SELECT lesson FROM agent_lessons WHERE run_id = %s ORDER BY position",
                (first.run_id,),
            )
        ).fetchall()
    assert [row[0] for row in stored] == rich.lessons_learned

    second_model = llm.script(f"{model_name}-2", [Reply("FINAL ANSWER: done")])
    await harness.agent(second_model, agent_id=agent_id).run("Log in to the staging DB")
    prompt = json.dumps(llm.requests[second_model][0])
    assert f"**Password:** {marker(PASSWORD)}" in prompt and password not in prompt
    assert "The password is required for the staging DB" in prompt  # the lessons it chose


async def test_a_run_in_progress_is_quoted_to_a_tool_path_chat_without_the_key_it_read(
    harness: Harness, llm: ScriptedLLM, model_name: str, settings: Settings
):
    """Chat mid-run quotes the live run's last observation (here, the `.env` it read) in the
    task of its tool-path run: read from the run's progress without the key."""
    agent_id = f"secrets-live-{uuid.uuid4().hex[:8]}"
    env_file = f"live-{agent_id}.env"
    settings.workspace.mkdir(parents=True, exist_ok=True)
    (settings.workspace / env_file).write_text(f"OPENAI_API_KEY={OPENAI_KEY}\n")
    llm.script(
        model_name,
        [
            Reply(None, [call("file_read", path=env_file)]),
            Reply(None, [call("calculator", expression="6*7")]),  # parks: needs approval
            Reply("FINAL ANSWER: It is reading the billing settings."),  # the chat's run
        ],
    )
    synth = llm.script(f"{model_name}-debrief", [Reply("{}")], repeat_last=True)
    agent = harness.agent(
        model_name, agent_id=agent_id, approve_tools=["calculator"], debrief_model=synth
    )
    handle = await agent.start("Check the billing settings")
    await wait_for(lambda: _parked(handle), seconds=60)

    reply = await agent.chat("What is the run doing right now?", use_tools=True)
    assert reply.routed_via == "react-loop"
    task = "\n".join(str(m["content"]) for m in llm.requests[model_name][-1]["messages"])
    assert f"Last observation: OPENAI_API_KEY={marker(OPENAI)}" in task
    assert holds_a_secret(json.dumps(llm.requests[model_name][-1])) == []
    await agent.cancel(handle.id, reason="done looking")


async def _parked(handle: WorkflowHandle) -> bool:
    progress = await handle.query(names.PROGRESS_QUERY, result_type=RunProgress)
    return progress.waiting_for == "approval"


async def test_notes_an_agent_held_from_before_reach_a_direct_chat_without_keys(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """An agent's entity may hold a debrief it was told before keys were kept out (in its
    workflow state, not in Postgres): the direct chat call redacts the notes it is given, or,
    from an entity older than notes, the system prompt that holds them."""
    llm.script(model_name, [Reply("noted"), Reply("noted")])
    chat_direct = next(a for a in harness.worker.activities if a.__name__ == "chat_direct")
    held = f"## Last Run Results\nSummary: the key is {OPENAI_KEY}\n[Tool result]: {PRIVATE}"
    agent = AgentConfig(agent_id=f"secrets-held-{uuid.uuid4().hex[:8]}", model=model_name)
    for notes, context in ((held, "You are Ada."), (None, f"You are Ada.\n{held}")):
        await ActivityEnvironment().run(
            chat_direct,
            ChatDirectInput(agent=agent, context=context, notes=notes, history=[], message="hi"),
        )
        sent = json.dumps(llm.requests[model_name][-1])
        assert holds_a_secret(sent) == [] and marker(OPENAI) in sent and "You are Ada." in sent


async def test_a_run_told_to_its_agent_by_signal_is_told_without_keys(
    harness: Harness, client: Client
):
    """Runs from before the last run was kept in Postgres tell their agent with a
    `run_finished` signal, its debrief and observations in the agent's history: redacted."""
    agent = AgentConfig(agent_id=f"secrets-sig-{uuid.uuid4().hex[:8]}", model="m")
    run = RunFinished(
        run_id=f"run-{agent.agent_id}",
        started_at=datetime.now(UTC),
        agent=agent,
        debrief=AgentDebrief(outcome="success", summary=f"used {GITHUB_KEY}"),
        observations=[f"[Tool result]: OPENAI_API_KEY={OPENAI_KEY}"],
    )
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, task_queue=harness.task_queue)
    entity = EntityActivities(client, harness.worker.entity.debriefs)
    await env.run(
        entity.notify_agent,
        NotifyAgentInput(agent=agent, signal=names.RUN_FINISHED_SIGNAL, run_finished=run),
    )
    handle = client.get_workflow_handle(names.agent_workflow_id(agent.agent_id))
    history = await handle.fetch_history()
    told = [
        payload.data.decode()
        for event in history.events
        if event.HasField("workflow_execution_signaled_event_attributes")
        for payload in event.workflow_execution_signaled_event_attributes.input.payloads
    ] + [
        payload.data.decode()
        for event in history.events
        if event.HasField("workflow_execution_started_event_attributes")
        for payload in event.workflow_execution_started_event_attributes.input.payloads
    ]
    assert any(marker(OPENAI) in t and marker(GITHUB) in t for t in told), told
    assert holds_a_secret("\n".join(told)) == []
    await handle.terminate("test over")
