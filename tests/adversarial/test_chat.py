"""Chat updates: what a user types and what the model answers, on both chat paths.

Rows: `input` is (message, the scripted model's replies, use_tools); `expect` is the reply's
message, or with `options["history"]` what the session's stored history must hold for the
user's message, or with `options["chat_error"]` part of the ChatError the chat must raise
(with `options["unsent"]`, before anything was sent: the model never asked).
Each row is its own agent; afterwards its entity has no failed workflow task and nothing
stored changed but its own rows.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from reactive_temporal.api.chat_refusals import CHAT_ERROR_MAX_CHARS, ChatError
from reactive_temporal.contracts import names
from reactive_temporal.embedded.scripted_llm import HttpError, Reply, ScriptedLLM, call
from reactive_temporal.limits import REPLY_CONTENT_MAX_CHARS
from tests.adversarial.cases import Hostile, params, table
from tests.adversarial.conftest import (
    StoreSnapshot,
    assert_no_failed_tasks,
    fetch,
    owned_by,
    unique,
)
from tests.workflow.conftest import Harness

CHAT = table("chat", [
    # refused before it is sent, as a run's task is (it was stored as "caf\ufffd ok?", a
    # message other than the one given; before that, a serialization error)
    Hostile("chat-lone-surrogate-message", ("caf\ud800 ok?", [Reply("fine")], False),
            "message is not UTF-8 text: 'caf\\ud800 ok?'", "sent as U+FFFD",
            {"chat_error": True, "unsent": True}),
    Hostile("chat-lone-surrogate-reply", ("hello", [Reply("\udfffreply")], False),
            "\ufffdreply", "the chat activity's result could not be serialized, retried"),
    Hostile("chat-max-length-deep-json", ("[" * 20_000, [Reply("that is a lot of brackets")],
            False), "that is a lot of brackets", "parsed as JSON somewhere"),
    Hostile("chat-markup-and-escapes", ("[/] \x1b]8;;http://x\x1b\\y\x1b]8;;\x1b\\",
            [Reply("[bold]noted[/bold]")], False), "[bold]noted[/bold]",
            "markup is data until a terminal shows it"),
    Hostile("chat-tool-path-surrogate", ("calculate 2+2 \ud800", [Reply("FINAL ANSWER: 4")],
            True), "lone surrogate", "the tool-path run's task could not be serialized",
            {"chat_error": True, "unsent": True}),
    Hostile("chat-megabytes-reply", ("hello", [Reply("w" * 3_000_000)], False), "",
            "a 3 MB chat activity result, past Temporal's 2 MB payload limit",
            {"reply_chars": REPLY_CONTENT_MAX_CHARS}),
    Hostile("chat-megabytes-error-body", ("hello", [HttpError(400, "e" * 3_000_000)], False),
            "LLM endpoint answered HTTP 400: eeee",
            "the failure was past Temporal's size limit: the chat failed with 'Activity task "
            "failed', its cause lost", {"chat_error": True}),
    Hostile("chat-tool-path-forty-calls",
            ("calculate forty sums", [Reply(None, [call("calculator", expression=f"{i}+1")
                                                   for i in range(40)]),
                                      Reply("FINAL ANSWER: forty sums")], True),
            "forty sums", "40 activities at once from one chat turn"),
])  # fmt: skip


@pytest.fixture(scope="module")
async def chatted(
    adv: Harness, llm: ScriptedLLM, client: Client, database_url: str
) -> dict[str, Any]:
    async def one(row: Hostile) -> dict[str, Any]:
        message, replies, use_tools = row.input
        model = llm.script(unique("chat"), replies, repeat_last=True)
        agent = adv.agent(model, agent_id=unique("chat"), memory=False)
        session = agent.session(unique("s"))
        try:
            reply: Any = await asyncio.wait_for(session.chat(message, use_tools=use_tools), 60)
        except ChatError as refused:
            reply = refused
        return {"reply": reply, "agent": agent, "history": await session.history(),
                "model_requests": len(llm.requests.get(model, []))}  # fmt: skip

    before = await StoreSnapshot.take(database_url)
    outcomes = await asyncio.gather(*(one(row) for row in CHAT))
    after = await StoreSnapshot.take(database_url)
    own = owned_by(
        *(o["agent"].name for o in outcomes), *(f"run-{o['agent'].name}" for o in outcomes)
    )
    return {
        "by_id": dict(zip([r.id for r in CHAT], outcomes, strict=True)),
        "changes": after.changes_since(before, own=own),
    }


@pytest.mark.parametrize("row", params(CHAT))
async def test_hostile_chat_gets_a_clear_reply(
    row: Hostile, chatted: dict[str, Any], client: Client
):
    outcome = chatted["by_id"][row.id]
    if row.options.get("chat_error"):
        error = outcome["reply"]
        assert isinstance(error, ChatError) and row.expect in str(error), error
        assert len(str(error)) <= CHAT_ERROR_MAX_CHARS and outcome["history"] == []
    elif row.options.get("history"):
        assert outcome["history"][0].content == row.expect
    elif "reply_chars" in row.options:
        message = outcome["reply"].message
        assert len(message) <= row.options["reply_chars"] and "characters cut" in message
        assert outcome["history"][-1].content == message
    else:
        assert outcome["reply"].message == row.expect
    if row.options.get("unsent"):  # refused before anything was sent
        assert outcome["model_requests"] == 0, outcome["model_requests"]
    elif not row.input[2]:  # the direct path: one call of the model, never retried (billed)
        assert outcome["model_requests"] == 1, outcome["model_requests"]
    await assert_no_failed_tasks(client, names.agent_workflow_id(outcome["agent"].name))


def test_chat_changed_nothing_stored_but_its_own(chatted: dict[str, Any]):
    assert chatted["changes"] == []


async def test_hand_sent_run_finished_signals_leave_the_agent_whole(
    adv: Harness, llm: ScriptedLLM, client: Client, database_url: str
):
    """`run_finished` sent by hand, as anyone with access to the namespace can: a start time
    without a zone failed the agent's workflow (a chat turn in flight lost with it), and
    another agent's configuration was adopted (the agent's later chats saved under that
    agent). The first is taken as UTC, the second ignored; the agent chats on."""
    agent_id, other = unique("rf"), unique("rf-other")
    model = llm.script(unique("rf"), [Reply("FINAL ANSWER: 4"), Reply("noted")], repeat_last=True)
    agent = adv.agent(model, agent_id=agent_id)
    await agent.run("What is 2+2?")
    session = agent.session("s1")
    await session.chat("hello")
    entity = client.get_workflow_handle(names.agent_workflow_id(agent_id))
    for started_at, config in [
        ("2030-01-01T00:00:00", {"agent_id": agent_id, "model": model}),
        ("2031-01-01T00:00:00+00:00", {"agent_id": other, "model": model}),
    ]:
        await entity.signal(
            names.RUN_FINISHED_SIGNAL,
            {"run_id": unique("hand"), "started_at": started_at, "agent": config},
        )
    assert (await asyncio.wait_for(session.chat("what did you find?"), 60)).message == "noted"
    statuses = [w.status async for w in client.list_workflows(f"WorkflowId = '{entity.id}'")]
    assert statuses == [WorkflowExecutionStatus.RUNNING], statuses
    await assert_no_failed_tasks(client, entity.id)
    saved = await fetch(
        database_url, "SELECT agent_id, count(*) FROM chat_messages WHERE session_id = 's1' "
        "AND agent_id IN (%s, %s) GROUP BY agent_id", (agent_id, other)
    )  # fmt: skip
    assert saved == [(agent_id, 4)], saved


async def test_a_chat_turn_with_a_system_prompt_past_the_limit_is_refused(
    adv: Harness, llm: ScriptedLLM, client: Client
):
    """`Agent(AgentConfig(system_prompt=…))` is public: a 1.1 MB prompt, carried twice in the
    turn's activity input, made it 2.2 MB, and the agent's workflow task failed forever (every
    later chat of the agent with it). The turn is refused; the agent chats on."""
    model = llm.script(unique("big-prompt"), [Reply("fine")], repeat_last=True)
    agent_id = unique("big-prompt")
    await adv.agent(model, agent_id=agent_id, memory=False).chat("hello")
    huge = adv.agent(model, agent_id=agent_id, memory=False, system_prompt="p" * 1_100_000)
    with pytest.raises(ChatError, match="system_prompt is 1,100,000 characters; the limit is"):
        await asyncio.wait_for(huge.chat("hello again"), 60)
    again = await asyncio.wait_for(adv.agent(model, agent_id=agent_id, memory=False).chat("hi"), 60)
    assert again.message == "fine"
    await assert_no_failed_tasks(client, names.agent_workflow_id(agent_id))


async def test_a_session_of_escaped_replies_reads_back(adv: Harness, llm: ScriptedLLM):
    """Control characters are six bytes each as JSON: a page of a session read back, sized
    by its UTF-8 in Postgres, came to 2.9 MB and `history()` failed past the 2 MB limit (the
    turns all kept in Postgres, none readable)."""
    model = llm.script(unique("esc"), [Reply("\x1b" * 60_000)], repeat_last=True)
    session = adv.agent(model, agent_id=unique("esc"), memory=False).session("s1")
    for i in range(8):
        await asyncio.wait_for(session.chat(f"turn {i}"), 60)
    history = await asyncio.wait_for(session.history(), 60)
    assert len(history) == 16 and history[-1].content == "\x1b" * 60_000
