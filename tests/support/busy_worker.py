"""A real worker that has met what the alert rules and the dashboard watch for, and its /metrics.

`busy_worker_scrape`: a `python worker.py --metrics-port` process on the test servers (dev
server, Postgres, a scripted model over HTTP) serves runs that call the model (once answered
503 and retried, once refused with a 400: `llm_error`), call a tool that works and one that
fails, write their calls into the text (an endpoint quirk), are stopped by their deadline in a
model call (its cost unreported) and in a tool (cancelled), put an API key in their answer
(redacted from the debrief), and are debriefed; a run's tool call waits for approval and is
approved; a run its code cannot replay (an older release's) fails its workflow task, and so
does an agent's chat workflow holding more than Temporal takes (`stuck_chat`). Its /metrics
is scraped as Prometheus would, once it serves what the caller wants (a hang guard bounds the
wait: what it lacks is the test's to say).

`outage_scrape`: a worker whose dev server is killed, scraped once its polls have failed: the
SDK serves its poll failures only then.

Used by tests/e2e/test_alert_series.py and tests/e2e/test_dashboard_series.py (through
tests/e2e/conftest.py, so one busy worker serves both).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError
from temporalio.worker import Worker

from reactive_temporal.api.agents import Agent
from reactive_temporal.api.entity_handle import AgentEntity
from reactive_temporal.api.entity_wedge import EntityWedged
from reactive_temporal.config import Settings
from reactive_temporal.contracts import names
from reactive_temporal.contracts.entity import AgentState, AgentWorkflowInput, ChatRequest
from reactive_temporal.contracts.run import AgentConfig, FinalAnswerCapture
from reactive_temporal.embedded.dev_server import DevServer, free_port
from reactive_temporal.embedded.offline_model import demo_responder
from reactive_temporal.embedded.scripted_llm import HttpError, Reply, ScriptedLLM, Step, call
from reactive_temporal.embedded.scripted_replies import Script
from reactive_temporal.hosting.runtime import Runtime
from reactive_temporal.prompts import SYNTHESIS_SYSTEM_PROMPT
from tests.conftest import wait_for
from tests.fixtures.incompatible_workflow import AgentRunWorkflowBeforeTheChangeStillRunning
from tests.processes import REPO, start_worker, starter_async, stop, worker_env
from tests.support.alert_rules import Selection, unserved

HEAVY_TOOLS = ["\x01" * 1_000] * 330
"""2 MB of tool names as JSON: with a chat turn's message of 120 KB, past 2 MiB."""
AFTER_AN_OUTAGE = {"temporal_long_request_failure"}
"""Served once a worker's polls have failed (`outage_scrape`), not by a busy worker."""

LEAKED_KEY = "sk-proj-" + "Vb5" * 25 + "T3BlbkFJ" + "nQ2w" * 18
"""An OpenAI-shaped key a run puts in its answer: its debrief is kept without it."""


@dataclass(frozen=True)
class Scrape:
    """A worker's /metrics as Prometheus read it, and the worker's log (for a failure)."""

    text: str
    log: Path

    def log_tail(self) -> str:
        return self.log.read_text()[-3000:]


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return str(response.read().decode())


async def scrape_serving(port: int, wanted: list[Selection]) -> str:
    """The worker's scrape once it serves all of `wanted`, or the last one after 60 s (a hang
    guard: what it lacks is the test's to say)."""
    for _ in range(120):
        text = scrape(port)
        if not unserved(wanted, text):
            break
        await asyncio.sleep(0.5)
    return text


def then_demo(steps: list[Step]) -> Any:
    """A model's script for its runs' requests; a debrief's synthesis is the demo model's."""
    script = Script(steps, repeat_last=True)

    def respond(request: dict[str, Any]) -> Step:
        system = next((m.get("content") for m in request.get("messages", [])), "")
        return demo_responder(request) if system == SYNTHESIS_SYSTEM_PROMPT else script(request)

    return respond


def in_text(name: str, **arguments: Any) -> str:
    """A tool call written into a reply's text, as a vLLM without its tool parser sends it."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


async def approved_run(client: Client, settings: Settings, queue: str, model: str) -> None:
    """A run whose calculator call waits for approval, approved once `approvals` lists it."""
    agent = Agent(
        AgentConfig.model_validate(
            {"agent_id": f"approving-{model}", "model": model, "approve_tools": ["calculator"]}
        ),
        Runtime(client, queue, offline_model=False, database_url=settings.database_url),
    )
    run = await agent.start("What is 3*3?")

    async def listed() -> bool:
        return [c.run_id for c in await agent.approvals()] == [run.id]

    await wait_for(listed, seconds=60)
    await agent.approve(run.id, by="on-call")
    result = await agent.result(run)
    assert result.terminated_by == "final_answer", result.terminated_by


def script_models(llm: ScriptedLLM, unique: str) -> dict[str, str]:
    """Each scripted model's name → how a run on it ends."""
    works, refused, slow_model, slow_tool, leaks = (
        f"{kind}-{unique}" for kind in ("works", "refused", "slow-model", "slow-tool", "leaks")
    )
    llm.script(
        works,
        then_demo(
            [
                HttpError(503, "overloaded", headers={"retry-after-ms": "10"}),
                Reply(
                    "Checking.",
                    tool_calls=[
                        call("calculator", expression="1/0"),
                        call("calculator", expression="2+2"),
                    ],
                ),
                Reply(in_text("final-answer", output="4", format="text", summary="Added.")),
            ]
        ),
    )
    llm.script(refused, then_demo([HttpError(400, "Unsupported parameter: 'max_tokens'")]))
    llm.script(slow_model, then_demo([Reply("Thinking it over.", delay=60)]))
    llm.script(slow_tool, then_demo([Reply("Working.", tool_calls=[call("slow_step", label="a")])]))
    answer = f"The deploy key is {LEAKED_KEY}."
    llm.script(
        leaks,
        then_demo([Reply("", tool_calls=[call("final-answer", output=answer, format="text")])]),
    )
    return {
        works: "final_answer_tool",
        refused: "llm_error",
        slow_model: "timeout",  # stopped by --timeout 2
        slow_tool: "timeout",
        leaks: "final_answer_tool",
    }


async def busy_worker_scrape(
    client: Client,
    settings: Settings,
    temporal_address: str,
    database_url: str,
    llm: ScriptedLLM,
    tmp_path: Path,
    wanted: list[Selection],
) -> Scrape:
    """The busy worker's scrape (module docstring), once it serves `wanted` (or after 60 s)."""
    queue = f"alerts-{uuid.uuid4().hex[:8]}"
    env = {
        **worker_env(temporal_address, database_url, llm.base_url, queue, tmp_path),
        "PYTHONPATH": str(REPO),  # the slow tool's module
        "SLOW_TOOL_LOG": str(tmp_path / "tool.log"),
    }
    unique = uuid.uuid4().hex[:6]
    ends = script_models(llm, unique)
    env["AGENT_MODEL_PRICES"] = json.dumps(
        {m: {"input_per_mtok": 1.0, "output_per_mtok": 2.0} for m in ends}
    )

    # An older release's run, still waiting when today's worker takes over its task queue.
    agent = Agent(
        AgentConfig.model_validate({"agent_id": f"old-{unique}", "model": "never-called"}),
        Runtime(client, queue, offline_model=False, database_url=settings.database_url),
    )
    async with Worker(
        client,
        task_queue=queue,
        workflows=[AgentRunWorkflowBeforeTheChangeStillRunning],
        max_cached_workflows=0,
    ):
        old = await agent.start("Say hello")

        async def timer_started() -> bool:
            events = [e.event_type async for e in old.fetch_history_events()]
            return EventType.EVENT_TYPE_TIMER_STARTED in events

        await wait_for(timer_started, seconds=60)

    port = free_port()
    worker = start_worker(
        env, tmp_path / "worker.log", "--metrics-port", str(port),
        "--tools", "tests.fixtures.slow_tools",
    )  # fmt: skip
    stuck: WorkflowHandle[Any, Any] | None = None
    try:
        # a new event for today's code to replay the old history on: it cannot
        await old.signal(names.FINAL_ANSWER_SIGNAL, FinalAnswerCapture(output="done"))
        approves = llm.script(
            f"approves-{unique}",
            then_demo(
                [
                    Reply("Checking.", [call("calculator", expression="3*3")]),
                    Reply("FINAL ANSWER: 9"),
                ]
            ),
        )
        run = ("run", "What is 2+2?", "--json", "--agent", "alerting", "--model")
        cli_runs = asyncio.gather(
            *(
                starter_async(
                    *run,
                    model,
                    *(("--timeout", "2") if end == "timeout" else ()),
                    env=env,
                    cwd=tmp_path,
                    seconds=90,
                )
                for model, end in ends.items()
            ),
        )
        runs, _ = await asyncio.gather(cli_runs, approved_run(client, settings, queue, approves))
        for result, end in zip(runs, ends.values(), strict=True):
            ended = json.loads(result.stdout or "{}").get("terminated_by")
            assert ended == end, result.describe()
        stuck = await stuck_chat(client, queue, unique)

        # Debriefs and the old run's failing task land after the runs return: wait for the
        # scrape to hold everything (the bound is a hang guard), then say what it lacks.
        return Scrape(await scrape_serving(port, wanted), tmp_path / "worker.log")
    finally:
        stop(worker)
        await old.terminate("test over")
        if stuck is not None:
            with contextlib.suppress(RPCError):  # ended already
                await stuck.terminate("test over")


async def stuck_chat(client: Client, queue: str, unique: str) -> WorkflowHandle[Any, Any]:
    """An agent's chat workflow carrying a configuration of 2 MB (sent by hand, before
    `entity-inputs-bounded`): a chat turn's activity input is past Temporal's 2 MiB, and its
    workflow task fails on every try (`failure_reason="PayloadsTooLarge"`)."""
    config = AgentConfig(agent_id=f"stuck-{unique}", model="never-called", tools=HEAVY_TOOLS)
    entity = await client.start_workflow(
        names.AGENT_WORKFLOW,
        AgentWorkflowInput(state=AgentState(agent=config)),
        id=names.agent_workflow_id(config.agent_id),
        task_queue=queue,
    )
    chat = AgentEntity(client, queue, config, send_config=False)
    try:
        await chat.chat(ChatRequest(message="\x01" * 20_000, use_tools=False))
    except EntityWedged:
        return entity
    raise AssertionError("a chat turn past 2 MiB was answered")


async def outage_scrape(
    database_url: str, llm: ScriptedLLM, tmp_path: Path, wanted: list[Selection]
) -> Scrape:
    """A worker's scrape once its dev server is gone and it serves `wanted` (or after 60 s);
    `wanted` must not be served before the outage."""
    server = DevServer(db_file=None, log_file=tmp_path / "temporal.log")
    await server.start()
    env = worker_env(server.address, database_url, llm.base_url, "alerts-outage", tmp_path)
    port = free_port()
    worker = start_worker(env, tmp_path / "worker.log", "--metrics-port", str(port))
    try:
        assert unserved(wanted, scrape(port)) != []  # not before the outage
        await server.stop()  # SIGKILL: the cluster is gone
        return Scrape(await scrape_serving(port, wanted), tmp_path / "worker.log")
    finally:
        stop(worker)
        await server.stop()
