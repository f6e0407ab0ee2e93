"""OpenTelemetry traces from a worker with OTEL_EXPORTER_OTLP_ENDPOINT set, received over OTLP/HTTP.

One run is one trace: its workflow span, the activities, a `chat {model}` span per LLM request
with the GenAI attributes, an `execute_tool {tool}` span per tool call, and the debrief child
workflow. A worker killed mid-run and replaced replays the finished steps without new spans.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from reactive_temporal.hosting.worker_lifecycle import QUIT_NOW, SIGNAL_ECHO_SECONDS
from tests.processes import REPO, start_worker, starter, stop, worker_env
from tests.support.otlp import OtlpReceiver, ReceivedSpan

pytestmark = pytest.mark.e2e

# An answer long enough that the run's debrief is synthesized in a child workflow (a short one
# is kept in the run): "1 + 2 + … + 40 = 820".
LONG_SUM = "What is " + " + ".join(str(i) for i in range(1, 41)) + "?"


def tracing_env(base: dict[str, str], otlp: OtlpReceiver) -> dict[str, str]:
    return {
        **base,
        "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "100",  # export within 0.1 s: a killed worker loses little
        "OTEL_SERVICE_NAME": "agents-under-test",
    }


def run_root(spans: list[ReceivedSpan], run_id: str) -> ReceivedSpan | None:
    for span in spans:
        if span.name == "RunWorkflow:AgentRunWorkflow":
            if span.attributes.get("temporalWorkflowID") == run_id:
                return span
    return None


def test_one_run_is_one_trace_with_workflow_llm_and_tool_spans(
    temporal_address: str, database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    model = f"traced-{uuid.uuid4().hex[:6]}"  # the offline demo model: calculator, final-answer
    base = worker_env(
        temporal_address, database_url, llm.base_url, f"trace-{uuid.uuid4().hex[:8]}", tmp_path
    )
    with OtlpReceiver() as otlp:
        env = tracing_env(base, otlp)
        worker = start_worker(env, tmp_path / "worker.log")
        try:
            proc = starter("run", LONG_SUM, "--json", "--model", model, env=env, cwd=tmp_path)
            assert proc.returncode == 0, proc.stderr
            run_id = json.loads(proc.stdout)["run_id"]
            spans = otlp.wait_for(
                lambda s: (
                    run_root(s, run_id) is not None
                    and any(x.name == "RunWorkflow:DebriefWorkflow" for x in s)
                ),
                seconds=60,
            )
        finally:
            stop(worker)  # flushes
        spans = otlp.snapshot()
    root = run_root(spans, run_id)
    assert root is not None
    trace = [s for s in spans if s.trace_id == root.trace_id]
    names = [s.name for s in trace]
    assert root.parent_span_id == ""  # the run's own trace
    assert "RunActivity:llm_step" in names
    assert "RunWorkflow:DebriefWorkflow" in names  # the debrief is in the run's trace
    # Every span about this run or its debrief is in this one trace.
    about_run = [
        s for s in spans if str(s.attributes.get("temporalWorkflowID", "")).startswith(run_id)
    ]
    assert {s.trace_id for s in about_run} == {root.trace_id}

    chats = [s for s in trace if s.name == f"chat {model}"]
    assert len(chats) == len(llm.requests[model]) >= 2  # one span per real request
    for chat in chats:
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.request.model"] == model
        assert chat.attributes["gen_ai.usage.input_tokens"] > 0
        assert chat.attributes["gen_ai.usage.output_tokens"] > 0
        assert chat.service == "agents-under-test"
    tools = [s for s in trace if s.name == "execute_tool calculator"]
    assert len(tools) == 1 and tools[0].attributes["gen_ai.tool.name"] == "calculator"
    assert not otlp.errors


def test_a_worker_killed_mid_run_leaves_no_duplicate_llm_spans(
    temporal_address: str, database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    tool_log = tmp_path / "tool.log"
    tool_log.touch()
    base = worker_env(
        temporal_address, database_url, llm.base_url, f"kill-{uuid.uuid4().hex[:8]}", tmp_path
    )
    model = llm.script(
        f"killed-{uuid.uuid4().hex[:6]}",
        [
            Reply(content="step", tool_calls=[call("slow_step", label="k")]),
            Reply(content="FINAL ANSWER: survived"),
        ],
    )
    with OtlpReceiver() as otlp:
        env = {**tracing_env(base, otlp), "SLOW_TOOL_LOG": str(tool_log), "PYTHONPATH": str(REPO)}
        args = ("--tools", "tests.fixtures.slow_tools")
        first = start_worker(env, tmp_path / "a.log", *args)
        second = None
        run = subprocess.Popen(
            [sys.executable, str(REPO / "starter.py"), "run", "Survive a kill", "--json",
             "--model", model, "--no-memory"],
            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while "start k" not in tool_log.read_text():
                assert time.monotonic() < deadline, "the tool never started"
                time.sleep(0.1)
            otlp.wait_for(lambda s: any(x.name == f"chat {model}" for x in s), seconds=60)
            first.send_signal(signal.SIGKILL)
            first.wait(10)
            second = start_worker(env, tmp_path / "b.log", *args)
            out, errors = run.communicate(timeout=180)
            assert run.returncode == 0, errors
            run_id = json.loads(out)["run_id"]
            otlp.wait_for(lambda s: run_root(s, run_id) is not None, seconds=60)
        finally:
            run.kill()
            stop(first, second)
        spans = otlp.snapshot()
    root = run_root(spans, run_id)
    assert root is not None
    chats = [s for s in spans if s.name == f"chat {model}"]
    # Two real requests (before and after the kill), two spans: the new worker replayed the
    # first step from history without calling the model, and without a span.
    assert len(llm.requests[model]) == 2
    assert len(chats) == 2 and len({s.span_id for s in chats}) == 2
    assert {s.trace_id for s in chats} == {root.trace_id}  # the same trace across workers
    runs_of_tool = [line for line in tool_log.read_text().splitlines() if line.startswith("start")]
    tool_spans = [s for s in spans if s.name == "execute_tool slow_step" and s.end_ns]
    assert len(tool_spans) <= len(runs_of_tool)  # the killed attempt never ended its span


def test_a_collector_that_never_answers_delays_no_second_signal(
    temporal_address: str, database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    """The trace exporter's last flush blocked the worker's event loop while its collector
    hung (18 s), so a second signal, meant to stop the worker at once, went unheard."""
    silent = socket.create_server(("127.0.0.1", 0))  # accepts, never answers
    base = worker_env(
        temporal_address, database_url, llm.base_url, f"trace-{uuid.uuid4().hex[:8]}", tmp_path
    )
    env = {
        **base,
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{silent.getsockname()[1]}",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    worker = start_worker(env, tmp_path / "worker.log")
    try:
        proc = starter("run", "What is 2 + 3?", "--json", "--no-memory", env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        worker.send_signal(signal.SIGTERM)
        # past the window in which a second signal is the first one's echo, counted from when
        # a loaded worker's loop took the first (b16e858): at 1 s it raced that window
        time.sleep(SIGNAL_ECHO_SECONDS + 1.0)
        worker.send_signal(signal.SIGINT)
        # stopped by it (130); a loop the flush blocked heard it only once the flush was over
        # (18 s) and by then ended as a drained worker does, 0: the status tells them apart,
        # not a time a loaded machine can stretch
        assert worker.wait(timeout=60) == QUIT_NOW
    finally:
        stop(worker)
        silent.close()
