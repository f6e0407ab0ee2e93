"""A worker as operators run it: metrics and health on a port, SIGTERM drains, limits from options.

Workers are `python worker.py` processes; runs are started with `starter.py run`; the metrics
are scraped over HTTP as Prometheus would.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.client import Client

from reactive_temporal.embedded.dev_server import free_port
from reactive_temporal.embedded.scripted_llm import HttpError, Reply, ScriptedLLM, call
from reactive_temporal.hosting.worker_lifecycle import QUIT_NOW, SIGNAL_ECHO_SECONDS
from tests.processes import REPO, start_worker, starter, stop, worker_env
from workflows.agent_run import AgentRunWorkflow

pytestmark = pytest.mark.e2e


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError as err:
        return 0, str(err)


def samples(text: str, metric: str) -> dict[str, float]:
    """`{label set: value}` of one metric in Prometheus text, labels as written."""
    found = {}
    for line in text.splitlines():
        match = re.match(rf"^{re.escape(metric)}(\{{[^}}]*\}})?\s+(\S+)$", line)
        if match:
            found[match.group(1) or ""] = float(match.group(2))
    return found


def value(text: str, metric: str, **labels: str) -> float:
    """The sum of a metric's samples whose labels include `labels`."""
    total = 0.0
    for label_set, sample in samples(text, metric).items():
        if all(f'{k}="{v}"' in label_set for k, v in labels.items()):
            total += sample
    return total


def wait_until(predicate, seconds: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"{what} not met within {seconds}s"
        time.sleep(0.1)


async def test_metrics_count_each_real_event_once_across_a_restart_that_replays(
    temporal_address: str, database_url: str, llm: ScriptedLLM, client: Client, tmp_path: Path
):
    env = worker_env(
        temporal_address, database_url, llm.base_url, f"metrics-{uuid.uuid4().hex[:8]}", tmp_path
    )
    model = f"metrics-{uuid.uuid4().hex[:6]}"  # the offline demo model answers for any name
    env["AGENT_MODEL_PRICES"] = json.dumps(
        {model: {"input_per_mtok": 1000.0, "output_per_mtok": 2000.0}}
    )
    loop_model = llm.script(  # one 503 first (Temporal retries the step), then a tool loop
        f"loop-{uuid.uuid4().hex[:6]}",
        [
            HttpError(503, "overloaded", headers={"retry-after-ms": "10"}),
            Reply(content="again", tool_calls=[call("calculator", expression="1+1")]),
        ],
        repeat_last=True,
    )
    port = free_port()
    scrape = f"http://127.0.0.1:{port}/metrics"
    worker = start_worker(env, tmp_path / "a.log", "--metrics-port", str(port))
    try:
        health = f"http://127.0.0.1:{port}/healthz"
        wait_until(lambda: get(health) == (200, "polling\n"), seconds=60, what="/healthz 200")
        ok = starter(
            "run", "What is 6 * 7?", "--json", "--agent", "counted", "--model", model,
            env=env, cwd=tmp_path,
        )  # fmt: skip
        assert ok.returncode == 0, ok.stderr
        capped = starter(
            "run", "Loop forever", "--json", "--agent", "counted", "--model", loop_model,
            "--max-iterations", "2", env=env, cwd=tmp_path,
        )  # fmt: skip
        assert json.loads(capped.stdout)["terminated_by"] == "max_iterations"
        first_run = json.loads(ok.stdout)["run_id"]

        # Debriefs are written after the runs return: wait for both to be counted.
        wait_until(
            lambda: value(get(scrape)[1], "reactive_temporal_debriefs_total") == 2,
            what="two debriefs counted",
        )
        text = get(scrape)[1]
    finally:
        stop(worker)

    # The SDK's own worker metrics are there too.
    assert "temporal_worker_task_slots_available" in text
    runs = "reactive_temporal_runs_total"
    assert value(text, runs, agent="counted", terminated_by="final_answer_tool") == 1
    assert value(text, runs, agent="counted", terminated_by="max_iterations") == 1
    assert value(text, runs) == 2
    # One LLM request per request the model server really received, by model.
    demo_calls = len(llm.requests[model])  # the run's two steps and its debrief's synthesis
    assert value(text, "reactive_temporal_llm_request_seconds_count", model=model) == demo_calls
    # The retried request is one failed request and one that succeeded, not two successes.
    loop_seconds = "reactive_temporal_llm_request_seconds_count"
    assert value(text, loop_seconds, model=loop_model, outcome="retryable_error") == 1
    assert (
        value(text, loop_seconds, model=loop_model, outcome="ok")
        == len(llm.requests[loop_model]) - 1
    )
    tokens_in = value(text, "reactive_temporal_llm_tokens_total", model=model, kind="input")
    tokens_out = value(text, "reactive_temporal_llm_tokens_total", model=model, kind="output")
    assert tokens_in > 0 and tokens_out > 0
    cost = value(text, "reactive_temporal_llm_cost_usd_total", model=model)
    assert cost == pytest.approx(tokens_in * 0.001 + tokens_out * 0.002)  # AGENT_MODEL_PRICES
    assert value(text, "reactive_temporal_tool_calls_total", tool="calculator", outcome="ok") == 3
    assert value(text, "reactive_temporal_debriefs_total") == 2

    # A new worker replays the finished run from its history (a query on an uncached run
    # replays it whole): nothing is counted again.
    worker = start_worker(env, tmp_path / "b.log", "--metrics-port", str(port))
    try:
        progress = await client.get_workflow_handle(first_run).query(AgentRunWorkflow.progress)
        assert progress is not None
        text = get(scrape)[1]
    finally:
        stop(worker)
    assert value(text, runs) == 0, "a replayed run was counted again"
    assert value(text, "reactive_temporal_llm_request_seconds_count") == 0
    assert value(text, "reactive_temporal_tool_calls_total") == 0


@dataclass
class SlowRun:
    """A worker with the slow tool, and a run (`starter.py run`) that calls it once; the
    call goes on until the test creates `release`."""

    env: dict[str, str]
    args: tuple[str, ...]
    tool_log: Path
    release: Path
    worker: subprocess.Popen[bytes]
    run: subprocess.Popen[str]


def slow_run(temporal_address: str, database_url: str, llm: ScriptedLLM, tmp_path: Path) -> SlowRun:
    tool_log = tmp_path / "tool.log"
    tool_log.touch()
    release = tmp_path / "release-the-tool"
    env = {
        **worker_env(
            temporal_address, database_url, llm.base_url, f"drain-{uuid.uuid4().hex[:8]}", tmp_path
        ),
        "SLOW_TOOL_LOG": str(tool_log),
        "SLOW_TOOL_RELEASE": str(release),
        "PYTHONPATH": str(REPO),
    }
    model = llm.script(
        f"drain-{uuid.uuid4().hex[:6]}",
        [
            Reply(content="on it", tool_calls=[call("slow_step", label="one")]),
            Reply(content="FINAL ANSWER: the step is done"),
        ],
    )
    args = ("--tools", "tests.fixtures.slow_tools", "--metrics-port", str(free_port()))
    worker = start_worker(env, tmp_path / "a.log", *args, "--graceful-shutdown", "20")
    run = subprocess.Popen(
        [sys.executable, str(REPO / "starter.py"), "run", "Do the slow step", "--json",
         "--model", model, "--no-memory"],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    wait_until(lambda: "start one" in tool_log.read_text(), what="the tool started")
    return SlowRun(env, args, tool_log, release, worker, run)


def test_sigterm_drains_an_in_flight_tool_call_then_exits_0(
    temporal_address: str, database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    slow = slow_run(temporal_address, database_url, llm, tmp_path)
    health = f"http://127.0.0.1:{slow.args[-1]}/healthz"
    second = None
    try:
        assert get(health)[0] == 200
        slow.worker.send_signal(signal.SIGTERM)
        # Draining: not healthy any more, still finishing the tool call (held in flight until
        # this is seen: a 4 s tool could end first on a loaded machine, and the worker with it)
        wait_until(lambda: get(health) == (503, "draining\n"), what="503 draining")
        assert slow.worker.poll() is None
        slow.release.touch()
        assert slow.worker.wait(timeout=60) == 0
        assert "stopping: activities in flight have up to 20 s" in (tmp_path / "a.log").read_text()
        lines = slow.tool_log.read_text().splitlines()
        assert [line.split()[0] for line in lines] == ["start", "done"], lines
        # A new worker finishes the run; the tool does not run again.
        second = start_worker(slow.env, tmp_path / "b.log", *slow.args)
        out, errors = slow.run.communicate(timeout=120)
        assert slow.run.returncode == 0, errors
        result = json.loads(out)
        assert result["success"] is True and result["output"] == "the step is done"
        assert len(slow.tool_log.read_text().splitlines()) == 2
    finally:
        slow.run.kill()
        stop(slow.worker, second)


def test_a_second_signal_stops_a_draining_worker_at_once(
    temporal_address: str, database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    """An operator who will not wait out the graceful shutdown: the second Ctrl-C did
    nothing (the stop was already asked for) until the drain ended."""
    slow = slow_run(temporal_address, database_url, llm, tmp_path)
    try:
        slow.worker.send_signal(signal.SIGTERM)
        wait_until(lambda: "stopping:" in (tmp_path / "a.log").read_text(), what="draining")
        time.sleep(SIGNAL_ECHO_SECONDS + 1.0)  # sooner, it is the first one's echo (counted
        # from when the worker's loop took the first, later on a loaded machine)
        slow.worker.send_signal(signal.SIGINT)
        # at once, the tool call still in flight (never released): a worker that went on
        # draining would end it, at its 30 s timeout or the 20 s drain's end, and exit 0
        assert slow.worker.wait(timeout=60) == QUIT_NOW
        assert "stopping now" in (tmp_path / "a.log").read_text()
        assert "done one" not in slow.tool_log.read_text()
    finally:
        slow.run.kill()
        stop(slow.worker)


def test_concurrency_limits_come_from_options_and_the_environment(
    temporal_address: str, database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    env = worker_env(
        temporal_address, database_url, llm.base_url, f"limits-{uuid.uuid4().hex[:8]}", tmp_path
    )
    env["REACTIVE_TEMPORAL_MAX_CONCURRENT_WORKFLOW_TASKS"] = "7"
    port = free_port()
    worker = start_worker(
        env, tmp_path / "w.log", "--metrics-port", str(port), "--max-concurrent-activities", "13"
    )
    slots = "temporal_worker_task_slots_available"
    scrape = f"http://127.0.0.1:{port}/metrics"
    try:  # the SDK reports each slot gauge once its poller has started
        wait_until(
            lambda: all(
                f'worker_type="{kind}"' in "".join(samples(get(scrape)[1], slots))
                for kind in ("ActivityWorker", "WorkflowWorker")
            ),
            seconds=30,
            what="both slot gauges",
        )
        text = get(scrape)[1]
    finally:
        stop(worker)
    assert value(text, slots, worker_type="ActivityWorker") == 13
    assert value(text, slots, worker_type="WorkflowWorker") == 7
