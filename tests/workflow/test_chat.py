"""Chat and sessions on AgentWorkflow, with a real dev server, Postgres and scripted models."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from activities.workflow_calls import EntityActivities
from reactive_temporal.api.chat_refusals import ChatError
from reactive_temporal.contracts import names
from reactive_temporal.contracts.entity import (
    DEFAULT_SESSION,
    AgentState,
    AgentWorkflowInput,
    ChatReply,
    ChatRequest,
)
from reactive_temporal.contracts.run import AgentConfig, RunProgress
from reactive_temporal.embedded.scripted_llm import HttpError, Reply, ScriptedLLM, call
from tests.conftest import wait_for
from tests.processes import PYTHON, REPO, clean_env
from tests.workflow.conftest import Harness
from workflows.activity_options import INFRASTRUCTURE_RETRIES, RATE_LIMITED_RETRIES

pytestmark = pytest.mark.workflow


def system_of(request: dict) -> str:
    return request["messages"][0]["content"]


def notes_of(request: dict) -> str:
    """What chat knows of the agent's runs: quoted notes in a user-role message, unquoted."""
    notes = request["messages"][1]
    assert notes["role"] == "user" and notes["content"].startswith("Notes from your earlier runs")
    return "\n".join(line.removeprefix("> ") for line in notes["content"].splitlines())


def unique_agent() -> str:
    return f"chat-{uuid.uuid4().hex[:8]}"


async def test_chat_after_a_run_gets_the_debrief(harness: Harness, llm: ScriptedLLM, model_name):
    llm.script(
        model_name,
        [
            Reply(None, [call("calculator", expression="40+2")]),
            Reply(None, [call("final-answer", output="42", format="text", summary="Added them.")]),
            Reply("I added 40 and 2 with the calculator and got 42."),  # the chat turn
        ],
    )
    agent = harness.agent(model_name, agent_id=unique_agent())
    await agent.run("Add 40 and 2")
    reply = await agent.chat("What did you do in the last run?")

    assert reply.routed_via == "direct-llm"
    assert reply.message == "I added 40 and 2 with the calculator and got 42."
    assert reply.tools_used is None and reply.tokens > 0
    prompt = notes_of(llm.requests[model_name][-1])
    assert "## Last Run Results" in prompt and "Summary: Added them." in prompt
    assert "calculator (1x, 100% success)" in prompt
    assert "[Tool result]: 42" not in prompt  # too short to be an observation (≤ 10 chars)
    assert "Added them." not in system_of(llm.requests[model_name][-1])  # data, not instructions
    assert (await agent.get_last_debrief()).summary == "Added them."  # type: ignore[union-attr]


async def test_direct_and_tool_turns(harness: Harness, llm: ScriptedLLM, model_name):
    llm.script(
        model_name,
        [
            Reply("Hello! How can I help?"),  # direct
            Reply(None, [call("calculator", expression="6*7")]),  # tool path: child run
            Reply("FINAL ANSWER: 6*7 is 42"),
        ],
    )
    agent = harness.agent(model_name, agent_id=unique_agent(), system_prompt="You are Ada.")
    direct = await agent.chat("How are you?")
    assert direct.routed_via == "direct-llm" and direct.message == "Hello! How can I help?"
    assert system_of(llm.requests[model_name][0]).startswith("You are Ada.")  # persona kept

    tool = await agent.chat("calculate 6*7")
    assert tool.routed_via == "react-loop"
    assert tool.message == "6*7 is 42"
    assert tool.tools_used == ["calculator"]  # real tools only
    assert tool.steps == 3 and tool.run_id is not None and tool.run_id.startswith("run-")
    child_task = llm.requests[model_name][1]["messages"][1]["content"]
    assert "--- Conversation history ---\nUser: How are you?" in child_task
    assert child_task.endswith("calculate 6*7")


async def test_a_direct_reply_the_model_did_not_end_itself_says_so(
    harness: Harness, llm: ScriptedLLM, model_name
):
    """A reply cut off at the output limit (or stopped by the content filter) reaches the
    person, and the model's next turn, marked as not whole."""
    llm.script(
        model_name,
        [
            Reply("The three reasons are: first,", finish_reason="length"),
            Reply(None, finish_reason="content_filter"),
            Reply("Whole."),
        ],
    )
    session = harness.agent(model_name, agent_id=unique_agent()).session()
    cut = await session.chat("Why?", use_tools=False)
    assert cut.message == (
        "The three reasons are: first,\n\n[the answer was cut off at the model's output token "
        "limit]"
    )
    filtered = await session.chat("And?", use_tools=False)
    assert filtered.message == "[the answer was stopped by the provider's content filter]"
    whole = await session.chat("Once more?", use_tools=False)
    assert whole.message == "Whole."
    assert "cut off" in str(llm.requests[model_name][-1]["messages"])  # the model reads it


async def test_direct_chat_llm_call_leaves_room_for_infrastructure_retries(
    harness: Harness, llm: ScriptedLLM, model_name
):
    """The direct chat's LLM activity is capped like the run's `llm_step`: the activity counts
    LLM failures against llm_max_attempts and fails for good on the last; Temporal's cap is
    INFRASTRUCTURE_RETRIES (and RATE_LIMITED_RETRIES) higher, so a lost worker does not use up
    the LLM's attempts."""
    llm.script(model_name, [HttpError(503), HttpError(503), Reply("one attempt too many")])
    agent = harness.agent(model_name, agent_id=unique_agent(), llm_max_attempts=2)
    with pytest.raises(ChatError):
        await agent.chat("hello there", use_tools=False)
    assert len(llm.requests[model_name]) == 2  # the LLM got its two attempts, no more

    history = await harness.client.get_workflow_handle(agent.entity.workflow_id).fetch_history()
    scheduled = [
        e.activity_task_scheduled_event_attributes
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == names.CHAT_DIRECT
    ]
    assert [s.retry_policy.maximum_attempts for s in scheduled] == [
        2 + INFRASTRUCTURE_RETRIES + RATE_LIMITED_RETRIES
    ]


async def test_a_chat_turn_rides_out_its_run_reads_lost_twice(
    harness: Harness, llm: ScriptedLLM, model_name, monkeypatch: pytest.MonkeyPatch
):
    """A chat turn first reads its agent's runs (one activity: the runs going, the last run).
    That read was tried twice, 15 s each: two workers lost in a row (the chaos soak killed one
    16 s after the other) failed the turn, "activity StartToClose timeout", for a read that
    is safe to try again. Failing twice here (as a lost worker's attempt does), it goes on."""
    real = EntityActivities._last_run
    failures = [RuntimeError("the worker running this read was lost")] * 2

    async def flaky(self: EntityActivities, agent_id: str) -> Any:
        if failures:
            raise failures.pop()
        return await real(self, agent_id)

    monkeypatch.setattr(EntityActivities, "_last_run", flaky)
    llm.script(model_name, [Reply("Nothing ran yet.")])
    agent = harness.agent(model_name, agent_id=unique_agent())
    reply = await agent.chat("What did you do in the last run?")
    assert reply.message == "Nothing ran yet." and not failures


async def test_tool_path_is_capped_and_honours_max_iterations(harness: Harness, llm, model_name):
    llm.script(
        model_name, [Reply("more", [call("calculator", expression="1+1")])], repeat_last=True
    )
    agent = harness.agent(model_name, agent_id=unique_agent())
    default_cap = await agent.chat("calculate forever", use_tools=True)

    def run_steps() -> int:  # not the capped runs' debrief syntheses
        return len([r for r in llm.requests[model_name] if r.get("tools")])

    assert run_steps() == 5  # the default tool-path cap
    assert default_cap.steps == 10
    await agent.chat("calculate again", use_tools=True, max_iterations=2)
    assert run_steps() == 7


async def test_session_three_turns_history_and_end(harness: Harness, llm: ScriptedLLM, model_name):
    llm.script(model_name, [Reply(f"answer {i}") for i in range(3)])
    agent = harness.agent(model_name, agent_id=unique_agent())
    session = agent.session()
    for i in range(3):
        await session.chat(f"question {i}")
    history = await session.history()
    assert [(m.role, m.content) for m in history] == [
        ("user", "question 0"),
        ("assistant", "answer 0"),
        ("user", "question 1"),
        ("assistant", "answer 1"),
        ("user", "question 2"),
        ("assistant", "answer 2"),
    ]
    third_request = llm.requests[model_name][2]["messages"]
    assert [m["content"] for m in third_request[1:]] == [
        "question 0",
        "answer 0",
        "question 1",
        "answer 1",
        "question 2",
    ]

    saved = await session.end()
    assert len(saved) == 6
    assert await session.history() == saved  # an ended session's history, from Postgres
    async with harness.store.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT content FROM chat_messages WHERE agent_id = %s AND session_id = %s"
            " ORDER BY position",
            (agent.name, session.id),
        )
        rows = await cur.fetchall()
    assert [r[0] for r in rows][:2] == ["question 0", "answer 0"] and len(rows) == 6
    with pytest.raises(ChatError, match="has ended"):
        await agent.entity.chat(ChatRequest(message="hi", session_id=session.id))


async def test_resume_a_session_from_a_new_process(
    harness: Harness,
    llm: ScriptedLLM,
    model_name,
    temporal_address: str,
    database_url: str,
    tmp_path,
):
    llm.script(model_name, [Reply("first answer"), Reply("second answer")])
    agent_id = unique_agent()
    agent = harness.agent(model_name, agent_id=agent_id)
    session = agent.session(f"resume-{uuid.uuid4().hex[:6]}")
    await session.chat("My name is John Doe.")
    await session.end()

    env = clean_env(
        TEMPORAL_ADDRESS=temporal_address,
        TEMPORAL_TASK_QUEUE=harness.task_queue,
        DATABASE_URL=database_url,
        AGENT_MODEL=model_name,
        REACTIVE_TEMPORAL_DATA_DIR=str(tmp_path),
    )
    # the worker runs in this process: wait for the subprocess without blocking the loop
    proc = await asyncio.create_subprocess_exec(
        PYTHON, str(REPO / "starter.py"), "chat", "What is my name?", "--agent", agent_id,
        "--session", session.id, "--json",
        env=env, cwd=tmp_path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode == 0, stderr.decode()
    assert json.loads(stdout)["message"] == "second answer"
    sent = [m["content"] for m in llm.requests[model_name][-1]["messages"][1:]]
    assert sent == ["My name is John Doe.", "first answer", "What is my name?"]
    assert len(await session.history()) == 4


async def test_an_agent_s_chat_workflow_terminated_loses_nothing(
    harness: Harness, llm: ScriptedLLM, model_name
):
    """The README's way out of a chat workflow whose task keeps failing: terminate it. The
    next turn starts it again, the open session resumes from Postgres, and the agent still
    knows its last run."""
    llm.script(
        model_name,
        [
            Reply(None, [call("final-answer", output="42", format="text", summary="Added them.")]),
            Reply("first answer"),
            Reply("second answer"),
        ],
    )
    agent = harness.agent(model_name, agent_id=unique_agent())
    await agent.run("Add 40 and 2")
    session = agent.session(f"kept-{uuid.uuid4().hex[:6]}")
    await session.chat("My name is John Doe.")
    entity = harness.client.get_workflow_handle(agent.entity.workflow_id)
    await entity.terminate(reason="its workflow task kept failing")

    reply = await session.chat("What is my name?")
    assert reply.message == "second answer"
    request = llm.requests[model_name][-1]
    assert "Summary: Added them." in notes_of(request)
    # the notes and the session's first question go as one user turn
    assert request["messages"][1]["content"].endswith("\n\nMy name is John Doe.")
    sent = [m["content"] for m in request["messages"][2:]]
    assert sent == ["first answer", "What is my name?"]
    assert [m.content for m in await session.history()] == [
        "My name is John Doe.",
        "first answer",
        "What is my name?",
        "second answer",
    ]


async def test_rejected_update_leaves_history_unchanged(harness: Harness, llm, model_name):
    llm.script(model_name, [Reply("ok")])
    agent = harness.agent(model_name, agent_id=unique_agent())
    session = agent.session()
    await session.chat("hello")
    for bad, message in [
        ("", "message is empty"),
        ("   ", "message is empty"),
        ("x" * 20_001, "limit is 20000"),
    ]:
        with pytest.raises(ChatError, match=message):
            await session.chat(bad)
    with pytest.raises(ChatError, match="max_iterations must be between 1 and 50"):
        await session.chat("calculate", max_iterations=0)
    with pytest.raises(ChatError, match="unknown session 'never-opened'"):
        await agent.session("never-opened").entity.chat(
            ChatRequest(message="hi", session_id="never-opened")
        )
    with pytest.raises(ChatError, match="invalid session id"):
        await agent.session("bad id!").chat("hi")
    assert [m.content for m in await session.history()] == ["hello", "ok"]
    assert len(llm.requests[model_name]) == 1


async def test_late_rich_debrief_of_run_1_does_not_replace_run_2(harness: Harness, llm, model_name):
    agent_id = unique_agent()
    slow = llm.script(
        f"{model_name}-1",
        [
            Reply(None, [call("calculator", expression="1+1")]),
            Reply(
                None, [call("final-answer", output="one " * 40, format="text", summary="Run 1.")]
            ),
        ],
    )
    slow_synth = llm.script(
        f"{model_name}-1s", [Reply(json.dumps({"summary": "Run 1, rich."}), delay=4)]
    )
    run1 = await harness.agent(slow, agent_id=agent_id, debrief_model=slow_synth).run("first")
    fast = llm.script(f"{model_name}-2", [Reply("FINAL ANSWER: Run 2 answer.")])
    agent2 = harness.agent(fast, agent_id=agent_id)
    await agent2.run("second")
    assert (await agent2.get_last_debrief()).summary == "Run 2 answer."  # type: ignore[union-attr]

    rich1 = await run1.debrief_rich()
    assert rich1 is not None and rich1.summary == "Run 1, rich."
    last = await agent2.get_last_debrief()
    assert last is not None and last.summary == "Run 2 answer."


async def test_last_debrief_upgrades_to_the_rich_one(harness: Harness, llm, model_name):
    llm.script(
        model_name,
        [
            Reply(None, [call("calculator", expression="2+2")]),
            Reply(None, [call("final-answer", output="four " * 40, format="text", summary="S.")]),
        ],
    )
    synth = llm.script(f"{model_name}-s", [Reply(json.dumps({"summary": "Rich four."}), delay=1)])
    agent = harness.agent(model_name, agent_id=unique_agent(), debrief_model=synth)
    await agent.run("2+2 at length")
    assert (await agent.get_last_debrief()).summary == "S."  # type: ignore[union-attr]

    async def upgraded() -> bool:
        last = await agent.get_last_debrief()
        return last is not None and last.synthesized and last.summary == "Rich four."

    await wait_for(upgraded, seconds=60)


async def start_entity(
    client: Client, harness: Harness, config: AgentConfig, *, continue_after: int
) -> tuple[WorkflowHandle[Any, Any], str]:
    """The agent's entity, continuing as new past `continue_after` events; and its first run."""
    handle = await client.start_workflow(
        "AgentWorkflow",
        AgentWorkflowInput(
            state=AgentState(agent=config), continue_as_new_after_events=continue_after
        ),
        id=names.agent_workflow_id(config.agent_id),
        task_queue=harness.task_queue,
    )
    return handle, (await handle.describe()).run_id


async def continued_as_new(handle: WorkflowHandle[Any, Any], first_run_id: str) -> None:
    async def continued() -> bool:
        return (await handle.describe()).run_id != first_run_id

    await wait_for(continued, seconds=60)


async def test_continue_as_new_mid_session_keeps_history_and_debrief(
    harness: Harness, client: Client, llm: ScriptedLLM, model_name
):
    agent_id = unique_agent()
    config = AgentConfig(agent_id=agent_id, model=model_name)
    handle, first_run_id = await start_entity(client, harness, config, continue_after=40)
    llm.script(model_name, [Reply("FINAL ANSWER: Ran once.")] + [Reply(f"a{i}") for i in range(8)])
    agent = harness.agent(model_name, agent_id=agent_id)
    await agent.run("run once")
    session = agent.session()
    for i in range(8):
        await session.chat(f"q{i}")

    await continued_as_new(handle, first_run_id)
    history = await session.history()
    assert [m.content for m in history] == [x for i in range(8) for x in (f"q{i}", f"a{i}")]
    assert (await agent.get_last_debrief()).summary == "Ran once."  # type: ignore[union-attr]


async def test_a_turn_sent_again_to_the_next_run_is_answered_once(
    harness: Harness, client: Client, llm: ScriptedLLM, model_name
):
    """The server can hand a turn its entity's last run answered to the next run again
    (reactive_temporal.answered_turns); the next run does not know the update's id, and
    answers from the reply it carried over instead of asking the model twice."""
    agent_id = unique_agent()
    config = AgentConfig(agent_id=agent_id, model=model_name, memory=False)
    handle, first_run_id = await start_entity(client, harness, config, continue_after=5)
    llm.script(model_name, [Reply("Once."), Reply("Twice.")])
    turn = ChatRequest(message="Say it once", agent=config)
    first = await handle.execute_update(names.CHAT_UPDATE, turn, id="turn-1", result_type=ChatReply)

    await continued_as_new(handle, first_run_id)
    again = await handle.execute_update(names.CHAT_UPDATE, turn, id="turn-1", result_type=ChatReply)
    assert (first.message, again) == ("Once.", first)
    assert len(llm.requests[model_name]) == 1
    saved = await harness.agent(model_name, agent_id=agent_id).session(DEFAULT_SESSION).history()
    assert [m.content for m in saved] == ["Say it once", "Once."]
    # a new turn, under its own id, is asked of the model
    other = await handle.execute_update(names.CHAT_UPDATE, turn, id="turn-2", result_type=ChatReply)
    assert other.message == "Twice."


async def test_mid_run_chat_answers_from_the_live_state(harness: Harness, llm, model_name):
    agent_id = unique_agent()
    run_model = llm.script(
        f"{model_name}-run",
        [
            Reply(None, [call("calculator", expression="19*3")]),
            Reply("FINAL ANSWER: 57", delay=8),  # iteration 2 is slow: a wide window to chat in
        ],
    )
    chat_model = llm.script(model_name, [Reply("The run is on iteration 2.")])
    handle = await harness.start(run_model, "19*3 slowly", agent_id=agent_id)

    async def at_iteration_2() -> bool:
        progress = await handle.query("progress", result_type=RunProgress)
        return progress.iteration == 1

    await wait_for(at_iteration_2, seconds=60)  # generous: CI machines are shared
    reply = await harness.agent(chat_model, agent_id=agent_id).chat("How is it going?")
    assert reply.message == "The run is on iteration 2."
    prompt = notes_of(llm.requests[chat_model][0])
    assert f"Run {handle.id} is at iteration 2 of 10." in prompt
    assert "Tools called so far: calculator." in prompt and "Last observation: 57" in prompt
    result = await handle.result()
    assert result.output == "57" and result.terminated_by == "final_answer"


async def test_a_direct_turn_carries_the_persona_once(harness: Harness, llm, model_name):
    """The direct path's activity input holds the agent's system prompt once, in the prompt it
    sends: a long persona went into the entity's history twice a turn (the model settings
    carried it too)."""
    llm.script(model_name, [Reply("Ahoy.")])
    persona = "You are a pirate. " + "Arr. " * 4_000
    agent = harness.agent(model_name, agent_id=unique_agent(), system_prompt=persona)
    assert (await agent.chat("hello there", use_tools=False)).message == "Ahoy."
    assert persona.strip() in system_of(llm.requests[model_name][-1])

    history = await harness.client.get_workflow_handle(agent.entity.workflow_id).fetch_history()
    inputs = [
        e.activity_task_scheduled_event_attributes.input
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == names.CHAT_DIRECT
    ]
    assert len(inputs) == 1
    payloads = list(inputs[0].payloads)
    if (codec := harness.client.data_converter.payload_codec) is not None:
        payloads = await codec.decode(payloads)
    assert payloads[0].data.decode().count(persona.strip()) == 1


@pytest.mark.parametrize("routing_asked", [False, True], ids=["this release", "the next"])
@pytest.mark.parametrize("bundle", [None, names.ENTITY_PATCH_BUNDLE])
async def test_an_entity_decides_its_patches_before_any_handler_runs(
    bundle: str | None, routing_asked: bool, harness: Harness, llm, monkeypatch
):
    """Six sessions open and chat at once. An entity without a patch bundle in its input (as
    the project's starters start it for one more release) asks the bundle as it starts,
    before any update is taken; asked where each was first needed, a patch's marker went
    where the first handler to need it got to, which a replay's handlers need not match.
    With the bundle in its input it asks none of the bundle's (one that asked it as it
    started failed to replay once, at an upsert among 20 updates taken with its first task).
    Either way it then asks the patches released since the bundle, chat-routing-ascii and
    entity-inputs-bounded, from the release that asks them (`names.ASCII_CHAT_ROUTING_ASKED`,
    `names.ENTITY_INPUTS_BOUNDED_ASKED`)."""
    monkeypatch.setattr(names, "ASCII_CHAT_ROUTING_ASKED", routing_asked)
    monkeypatch.setattr(names, "ENTITY_INPUTS_BOUNDED_ASKED", routing_asked)
    model = f"crowd-{uuid.uuid4().hex[:6]}"
    llm.script(model, [Reply("noted")], repeat_last=True)
    agent = harness.agent(model, agent_id=unique_agent(), memory=False)
    if bundle is not None:
        await harness.client.start_workflow(
            names.AGENT_WORKFLOW,
            AgentWorkflowInput(state=AgentState(agent=agent.config), patch_bundle=bundle),
            id=agent.entity.workflow_id,
            task_queue=harness.task_queue,
        )
    sessions = [agent.session() for _ in range(6)]
    replies = await asyncio.gather(
        *(s.chat(f"Note {i}", use_tools=False) for i, s in enumerate(sessions))
    )
    assert [r.message for r in replies] == ["noted"] * 6

    history = await harness.client.get_workflow_handle(agent.entity.workflow_id).fetch_history()
    kinds = [e.event_type for e in history.events]
    markers = [
        json.loads(e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data)["id"]
        for e in history.events
        if e.HasField("marker_recorded_event_attributes")
    ]
    upserts = kinds.count(EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES)
    late = [names.ASCII_CHAT_ROUTING_PATCH, names.ENTITY_INPUTS_BOUNDED_PATCH]
    asked = late if routing_asked else []
    assert markers == ([] if bundle is not None else [names.ENTITY_PATCHES_2026_12]) + asked
    assert upserts == len(markers)  # TemporalChangeVersion, one for each marker
    if not markers:
        return
    first_update = kinds.index(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)
    last_marker = len(kinds) - 1 - kinds[::-1].index(EventType.EVENT_TYPE_MARKER_RECORDED)
    assert last_marker < first_update


@pytest.mark.parametrize("routing_asked", [False, True], ids=["this release", "the next"])
async def test_chat_routes_non_ascii_words_as_the_released_code(
    routing_asked: bool, harness: Harness, llm, model_name, monkeypatch
):
    """From the release that asks chat-routing-ascii (`names.ASCII_CHAT_ROUTING_ASKED`; this
    one routes as before, so that a rollback meets no run that asked it). The released code
    routes with JavaScript's `/\\b(...)\\b/i`, no `u` flag: an ASCII word
    boundary, and no non-ASCII letter taken for an ASCII one. `日本fetch the page` has a
    boundary between 本 and f there, so it goes to tools; `ſearch for the weather` (a long s)
    is no "search for", so it goes direct. Python's Unicode matching sent each the other
    way: 本 is a word character to it, and ſ matches s ignoring case."""
    monkeypatch.setattr(names, "ASCII_CHAT_ROUTING_ASKED", routing_asked)
    llm.script(  # the tool path offers tools, the direct path none
        model_name, lambda r: Reply("FINAL ANSWER: tools") if r.get("tools") else Reply("direct")
    )
    agent = harness.agent(model_name, agent_id=unique_agent(), memory=False)
    fetched = await agent.chat("日本fetch the page")
    search = await agent.chat("\u017fearch for the weather")
    paths = [(r.routed_via, r.message) for r in (fetched, search)]
    if routing_asked:
        assert paths == [("react-loop", "tools"), ("direct-llm", "direct")]
        assert fetched.run_id is not None and names.is_chat_run_workflow_id(fetched.run_id)
    else:
        assert paths == [("direct-llm", "direct"), ("react-loop", "tools")]


async def test_a_message_of_megabytes_is_refused_before_it_is_sent(harness: Harness, llm):
    """3 MB: the agent's refusal carried the message back, over Temporal's 2 MB, which failed
    the agent's task, and every other caller's chat with it, for a while (the sender got an
    RPCError). A message that is no string is a ChatError too (and a TypeError), not
    pydantic's."""
    model = f"big-{uuid.uuid4().hex[:6]}"
    llm.script(model, [Reply("fine")])
    agent = harness.agent(model, agent_id=unique_agent())
    with pytest.raises(ChatError, match="message is 3,000,000 characters|the limit is"):
        await asyncio.wait_for(agent.chat("x" * 3_000_000), timeout=60)
    with pytest.raises(ChatError, match=r"message is text \(str\), not int") as refused:
        await agent.chat(123)  # type: ignore[arg-type]
    assert isinstance(refused.value, TypeError)  # a ChatError that names a type
    assert (await agent.session().chat("small", use_tools=False)).message == "fine"
