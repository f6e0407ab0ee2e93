"""The structure of what a run, a chat turn and a debrief send, against endpoints that check
it as real providers do (`Endpoint.pairs_tool_calls`, `last_user_or_tool`,
`alternating_roles`), over real HTTP, through the real workflows.

A request refused for its structure is refused again at every later step of the run (or turn
of the session): the same history goes again. Each test drives the paths that build a
request's messages and asserts no request was refused for its structure.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from reactive_temporal import search_attributes as sa
from reactive_temporal.api.rerun import rerun_from_failure
from reactive_temporal.config import Settings
from reactive_temporal.contracts import names
from reactive_temporal.contracts.result import AgentResult
from reactive_temporal.contracts.run import AgentRunInput
from reactive_temporal.embedded.scripted_llm import (
    Endpoint,
    HttpError,
    Reply,
    ScriptedLLM,
    Step,
    call,
)
from reactive_temporal.limits import MAX_TOOL_CALLS_PER_TURN
from reactive_temporal.prompts import SYNTHESIS_SYSTEM_PROMPT
from reactive_temporal.telemetry.metrics import REGISTRY
from reactive_temporal.tools import tool
from tests.conftest import wait_for
from tests.workflow.conftest import Harness, running_worker
from workflows.agent_run import AgentRunWorkflow

pytestmark = [pytest.mark.faults, pytest.mark.workflow]

SYNTHESIS = {
    "summary": "The agent added numbers with the calculator.",
    "key_findings": ["2 + 2 = 4"],
    "errors_encountered": [],
    "lessons_learned": ["Use the calculator for sums."],
    "caveats": "",
}


def strict(**more: Any) -> Endpoint:
    """OpenAI's and Anthropic's rules on a request's structure, and Mistral's last role."""
    return Endpoint(
        content_required=True,
        nonblank_text=True,
        unique_call_ids=True,
        parses_arguments=True,
        pairs_tool_calls=True,
        last_user_or_tool=True,
        **more,
    )


def _system(request: dict[str, Any]) -> str:
    first = request["messages"][0]
    return str(first.get("content") or "") if first["role"] == "system" else ""


def with_synthesis(script: list[Step]) -> Any:
    """The script for the run's own steps; a debrief's synthesis gets its JSON whatever the
    order it comes in."""
    steps = iter(script)

    def respond(request: dict[str, Any]) -> Step:
        if _system(request) == SYNTHESIS_SYSTEM_PROMPT:
            return Reply(json.dumps(SYNTHESIS))
        return next(steps, Reply("FINAL ANSWER: done"))

    return respond


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def test_every_turn_of_a_run_sends_calls_paired_with_their_results(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """Nudges (empty reply, a required tool missing), calls past the per-turn cap, an unknown
    tool, a failing call, a refused and an accepted final answer, ids the model gave twice:
    every request pairs each call with its result, right after it."""
    llm.endpoint(model_name, strict())
    over = [call("calculator", expression=f"{n}+{n}") for n in range(MAX_TOOL_CALLS_PER_TURN + 2)]
    script: list[Step] = [
        Reply(""),  # empty: nudged
        Reply("FINAL ANSWER: 4"),  # the required calculator has not run: nudged
        Reply("Calling.", [call("no_such_tool", x=1), call("calculator", expression="1/0")]),
        Reply(None, over),  # the last two are refused: past the per-turn cap
        Reply(None, [call("calculator", call_id="call_0", expression="2+2")]),
        Reply(None, [call("calculator", call_id="call_0", expression="3+3")]),
        Reply(None, [call("final-answer", output="", format="text")]),  # refused
        Reply(None, [call("final-answer", output="4", format="text", summary="Added.")]),
    ]
    llm.script(model_name, with_synthesis(script))
    result = await asyncio.wait_for(
        harness.run(
            model_name,
            "What is 2+2?",
            agent_id=unique("pairs"),
            required_tools=["calculator"],
            max_iterations=12,
        ),  # fmt: skip
        120,
    )
    assert (result.terminated_by, result.output) == ("final_answer_tool", "4"), result.error
    assert llm.rejected[model_name] == []
    await result.debrief_rich()
    assert llm.rejected[model_name] == []


async def test_calls_approved_denied_and_timed_out_each_answered_before_the_next_step(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """Three calls parked for approval in one turn: one approved, one denied, one left to
    the approval timeout; each has its result in the next request, right after its call."""
    llm.endpoint(model_name, strict())
    llm.script(
        model_name,
        with_synthesis(
            [
                Reply(None, [call("calculator", expression=f"{n}*{n}") for n in (2, 3, 4)]),
                Reply("FINAL ANSWER: done"),
            ]
        ),
    )
    agent = harness.agent(  # 15 s: room to approve and deny first on a loaded machine
        model_name, agent_id=unique("approve"), approve_tools=["calculator"],
        approval_timeout_seconds=15,
    )  # fmt: skip
    handle = await agent.start("Square 2, 3 and 4")

    async def parked() -> bool:
        progress = await handle.query(AgentRunWorkflow.progress)
        return len(progress.pending_approvals) == 3

    await wait_for(parked, seconds=60)
    pending = (await handle.query(AgentRunWorkflow.progress)).pending_approvals
    await agent.approve(handle.id, pending[0].call_id, by="ann")
    await agent.deny(handle.id, pending[1].call_id, reason="not this one", by="bob")
    result = await asyncio.wait_for(agent.result(handle), 60)
    assert result.terminated_by == "final_answer", result.error
    assert llm.rejected[model_name] == []
    sent = llm.requests[model_name][1]["messages"]
    assert [m["role"] for m in sent[-4:]] == ["assistant", "tool", "tool", "tool"]


@tool
async def fetch_page(page: int) -> str:
    """Fetch one page of the report (about 6 KB of text)."""
    line = f"Page {page}: revenue by region, units, notes and the auditor's remarks. "
    return (line * 90)[:6_000]


def pages(count: int) -> Any:
    def respond(request: dict[str, Any]) -> Step:
        if _system(request) == SYNTHESIS_SYSTEM_PROMPT:
            return Reply(json.dumps(SYNTHESIS))
        results = [m["content"] for m in request["messages"] if m["role"] == "tool"]
        done = int(re.match(r"Page (\d+):", results[-1])[1]) if results else 0  # type: ignore[index]
        if done < count:
            return Reply(f"Reading page {done + 1}.", [call("fetch_page", page=done + 1)])
        return Reply(None, [call("final-answer", output="Read.", format="text", summary="Read.")])

    return respond


async def test_turns_left_out_to_fit_the_window_leave_no_call_or_result_alone(
    client: Client, settings: Settings, llm: ScriptedLLM
):
    """A run that outgrows an 8k window: older turns are shortened, stubbed, then left out
    whole; what is sent still pairs every call it shows with its result."""
    model = llm.endpoint(unique("window"), strict(context_tokens=8_192))
    llm.script(model, pages(12))
    async with running_worker(client, settings, extra_tools=[fetch_page]) as harness:
        agent = harness.agent(
            model, agent_id=unique("reader"), max_iterations=15, tools=["fetch_page"]
        )
        result = await asyncio.wait_for(agent.run("Read the 12 pages, one at a time."), 180)
    assert result.terminated_by == "final_answer_tool", result.error
    refused = llm.rejected[model]
    assert all(b["error"]["code"] == "context_length_exceeded" for b in refused), refused
    left_out = [
        r for r in llm.requests[model]
        if any("earlier turn(s) are left out" in str(m.get("content")) for m in r["messages"])
    ]  # fmt: skip
    assert left_out, "no request left a turn out: the test did not reach that path"


async def test_a_run_continued_as_new_sends_whole_pairs_after_each_new_start(
    harness: Harness, client: Client, llm: ScriptedLLM, model_name: str
):
    """Continued as new every two iterations: each Temporal run reads the transcript whole,
    and sends each earlier call with its result."""
    llm.endpoint(model_name, strict())
    script: list[Step] = [
        Reply(None, [call("calculator", expression=f"{i}*2"), call("calculator", expression="1")])
        for i in range(5)
    ]
    llm.script(model_name, with_synthesis(script))
    agent = harness.agent(model_name, agent_id=unique("can"), max_iterations=10)
    handle = await client.start_workflow(
        AgentRunWorkflow.run,
        AgentRunInput(task="Double 0 to 4", agent=agent.config, continue_as_new_every=2),
        id=names.run_workflow_id(agent.config.agent_id, uuid.uuid4()),
        task_queue=harness.task_queue,
        search_attributes=TypedSearchAttributes(
            [SearchAttributePair(sa.AGENT_NAME, agent.config.agent_id)]
        ),
    )
    result = await asyncio.wait_for(agent.result(handle), 120)
    assert result.terminated_by == "final_answer", result.error
    assert result.metadata.iterations == 6
    assert llm.rejected[model_name] == []


async def test_a_rerun_sends_whole_pairs(
    harness: Harness, client: Client, llm: ScriptedLLM, model_name: str
):
    """A run that fails for good after a tool turn, rerun from its last good point: the
    rerun's request holds the calls before the failure with their results."""
    llm.endpoint(model_name, strict())
    llm.script(
        model_name,
        [Reply(None, [call("calculator", expression="5*5")]), HttpError(400, "model not found")],
    )
    failed = await harness.run(model_name, "5*5 then answer", agent_id=unique("rerun"))
    assert failed.terminated_by == "llm_error"
    llm.script(model_name, with_synthesis([Reply("FINAL ANSWER: 25")]))
    new_run = await rerun_from_failure(client, failed.run_id)
    rerun = client.get_workflow_handle(failed.run_id, run_id=new_run, result_type=AgentResult)
    assert (await asyncio.wait_for(rerun.result(), 60)).terminated_by == "final_answer"
    assert llm.rejected[model_name] == []


async def test_chat_turns_send_whole_turns_a_strict_template_takes(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """Direct turns after a run (its notes in a user message), in a session whose history
    window is cut mid-turn, and a tool-path turn, on an endpoint whose chat template wants
    user and assistant turns alternating and the user's last."""
    llm.endpoint(model_name, strict(alternating_roles=True))

    def respond(request: dict[str, Any]) -> Step:
        if _system(request) == SYNTHESIS_SYSTEM_PROMPT:
            return Reply(json.dumps(SYNTHESIS))
        if not request.get("tools"):
            return Reply("A reply. " * 120)  # ~1,100 characters: the window is cut by size
        if not any(m["role"] == "tool" for m in request["messages"]):
            return Reply(None, [call("calculator", expression="2+2")])
        return Reply(None, [call("final-answer", output="4", format="text", summary="2+2.")])

    llm.script(model_name, respond)
    agent = harness.agent(model_name, agent_id=unique("chat"))
    run = await asyncio.wait_for(agent.run("What is 2+2?"), 60)
    assert run.terminated_by == "final_answer_tool", run.error
    session = agent.session()
    for i in range(8):
        reply = await asyncio.wait_for(session.chat(f"Question {i}: " + "why? " * 40), 60)
        assert reply.routed_via == "direct-llm"
    tools = await asyncio.wait_for(session.chat("calculate 2+2", use_tools=True), 60)
    assert tools.routed_via == "react-loop"
    assert llm.rejected[model_name] == []


def mistral() -> Endpoint:
    """Mistral's rules besides OpenAI's: its API's order of roles, and its templates' (as
    vLLM renders them) alternation and nine-character call ids."""
    return strict(alternating_roles=True, role_order=True, nine_char_call_ids=True)


NUDGED_AFTER_RESULTS: list[Step] = [
    # a call and `FINAL ANSWER:` before the required calculator ran: nudged after the result
    Reply("Looking it up.\nFINAL ANSWER: 4", [call("no_such_tool", call_id="abcdefghi", x=1)]),
    Reply(None, [call("calculator", call_id="abcdefghi", expression="2+2")]),  # id again
    Reply("FINAL ANSWER: 4"),
]


async def test_a_mistral_model_is_sent_a_nudged_run_in_the_shape_its_templates_take(
    harness: Harness, llm: ScriptedLLM
):
    """A nudge after tool results was a user turn after a tool's, and an id given twice went
    as `abcdefghi-2`: Mistral refused every later step of the run."""
    model = llm.endpoint(unique("mistral-small"), mistral())
    llm.script(model, with_synthesis(NUDGED_AFTER_RESULTS))
    result = await asyncio.wait_for(
        harness.run(
            model, "What is 2+2?", agent_id=unique("mistral"), required_tools=["calculator"]
        ),
        60,
    )
    assert (result.terminated_by, result.output) == ("final_answer", "4"), result.error
    assert llm.rejected[model] == []
    last = llm.requests[model][2]["messages"]
    assert [m["role"] for m in last[-4:]] == ["assistant", "tool", "assistant", "tool"]
    assert "[harness] Not done yet" in last[-3]["content"]


async def test_a_model_the_table_does_not_know_is_sent_the_shape_its_400s_ask_for(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """A local model behind a strict template: each shape refused once, learned by the
    worker, and the run goes on; the worker's next run of the model is not refused."""
    llm.endpoint(model_name, mistral())
    llm.script(model_name, with_synthesis(NUDGED_AFTER_RESULTS * 2))
    for _ in range(2):
        result = await asyncio.wait_for(
            harness.run(
                model_name, "What is 2+2?", agent_id=unique("local"), required_tools=["calculator"]
            ),
            60,
        )
        assert (result.terminated_by, result.output) == ("final_answer", "4"), result.error
        said = [b["error"]["message"] for b in llm.rejected[model_name]]
        assert len(said) == 2, said  # both at the first run, none at the second
    assert any("roles must alternate" in s for s in said)
    assert any("length 9" in s for s in said)
    learned = REGISTRY.get_sample_value(
        "reactive_temporal_llm_adaptations_total", {"model": model_name, "kind": "shape_learned"}
    )
    assert learned == 2
