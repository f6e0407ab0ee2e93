"""Every series and label the alert rules select is one a real worker serves.

A `python worker.py --metrics-port` process on the test servers (dev server, Postgres, a
scripted model over HTTP) meets what the rules watch for: runs that call the model (once
answered 503 and retried, once refused with a 400: `llm_error`), call a tool that works and
one that fails, write their calls into the text (an endpoint quirk), are stopped by their
deadline in a model call (its cost unreported) and in a tool (cancelled), and are debriefed;
and a run its code cannot replay (an older release's) fails its workflow task. Its /metrics,
scraped as Prometheus would, must then hold every name, label and label value the rules
select (tests/support/alert_rules.py), so renaming a series in
reactive_temporal/telemetry/metrics.py, or an SDK upgrade renaming one of Temporal's, fails
here instead of silencing an alert.

Served only after an outage: the SDK's poll failures, from a worker whose dev server is
killed (the second test). Checked against the project's enumerations rather than a scrape:
label values no test run produces (a run ending `budget_exceeded` or `error`, an endpoint
that cuts prompts or writes harmony channels; `KNOWN_VALUES`). The client certificate's
expiry gauge is served without TLS too, as 0 (the rules skip 0).
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker

from reactive_temporal.api.agents import Agent
from reactive_temporal.config import Settings
from reactive_temporal.contracts import names
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
from tests.support.alert_rules import Selection, rules, selections, unserved

pytestmark = pytest.mark.e2e

SELECTIONS = [s for rule in rules() for s in selections(rule)]
AFTER_AN_OUTAGE = {"temporal_long_request_failure"}
"""Served once a worker's polls have failed (the second test)."""


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


async def test_every_series_the_alerts_select_is_served_by_a_real_worker(
    client: Client,
    settings: Settings,
    temporal_address: str,
    database_url: str,
    llm: ScriptedLLM,
    tmp_path: Path,
):
    queue = f"alerts-{uuid.uuid4().hex[:8]}"
    env = {
        **worker_env(temporal_address, database_url, llm.base_url, queue, tmp_path),
        "PYTHONPATH": str(REPO),  # the slow tool's module
        "SLOW_TOOL_LOG": str(tmp_path / "tool.log"),
    }
    unique = uuid.uuid4().hex[:6]
    works, refused, slow_model, slow_tool = (
        f"{kind}-{unique}" for kind in ("works", "refused", "slow-model", "slow-tool")
    )
    env["AGENT_MODEL_PRICES"] = json.dumps(
        {m: {"input_per_mtok": 1.0, "output_per_mtok": 2.0} for m in (works, slow_model)}
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

        await wait_for(timer_started, seconds=30)

    port = free_port()
    worker = start_worker(
        env, tmp_path / "worker.log", "--metrics-port", str(port),
        "--tools", "tests.fixtures.slow_tools",
    )  # fmt: skip
    try:
        # a new event for today's code to replay the old history on: it cannot
        await old.signal(names.FINAL_ANSWER_SIGNAL, FinalAnswerCapture(output="done"))
        ends = {works: "final_answer_tool", refused: "llm_error"}
        ends |= {slow_model: "timeout", slow_tool: "timeout"}  # stopped by --timeout 2
        run = ("run", "What is 2+2?", "--json", "--agent", "alerting", "--model")
        runs = await asyncio.gather(
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
            )
        )
        for result, end in zip(runs, ends.values(), strict=True):
            ended = json.loads(result.stdout or "{}").get("terminated_by")
            assert ended == end, result.describe()

        # Debriefs and the old run's failing task land after the runs return: wait for the
        # scrape to hold everything (the bound is a hang guard), then say what it lacks.
        wanted = [s for s in SELECTIONS if s.metric not in AFTER_AN_OUTAGE]
        text = await scrape_serving(port, wanted)
    finally:
        stop(worker)
        await old.terminate("test over")
    problems = unserved(wanted, text)
    assert problems == [], "the alert rules select what this worker does not serve:\n" + (
        "\n".join(problems)
    )
    assert 'failure_reason="NonDeterminismError"' in text  # the failure the rule is for


async def test_the_poll_failures_an_alert_selects_are_served_when_temporal_is_gone(
    database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    wanted = [s for s in SELECTIONS if s.metric in AFTER_AN_OUTAGE]
    assert {s.metric for s in wanted} == AFTER_AN_OUTAGE, "no rule selects these any more"
    server = DevServer(db_file=None, log_file=tmp_path / "temporal.log")
    await server.start()
    env = worker_env(server.address, database_url, llm.base_url, "alerts-outage", tmp_path)
    port = free_port()
    worker = start_worker(env, tmp_path / "worker.log", "--metrics-port", str(port))
    try:
        assert unserved(wanted, scrape(port)) != []  # not before the outage
        await server.stop()  # SIGKILL: the cluster is gone
        text = await scrape_serving(port, wanted)
    finally:
        stop(worker)
        await server.stop()
    problems = unserved(wanted, text)
    assert problems == [], (
        "\n".join(problems) + "\n" + (tmp_path / "worker.log").read_text()[-3000:]
    )
