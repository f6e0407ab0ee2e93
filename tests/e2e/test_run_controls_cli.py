"""Controlling runs from the command line, with `worker.py` as a process: approve a parked
call after the worker was killed and replaced, deny one with a reason the model reads, an
approval timeout, a refused decision, the debrief's record; `cancel` during a slow LLM call."""

from __future__ import annotations

import getpass
import json
import signal
import subprocess
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from reactive_temporal.api.control import DECISION_PATIENCE_SECONDS
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from tests import processes
from tests.processes import REPO, starter

pytestmark = pytest.mark.e2e

TOOL = "reserve_stock"


def background_run(env: dict[str, str], cwd: Path, *args: str) -> subprocess.Popen[str]:
    """`starter.py run … --json` left running (not a terminal: it never asks inline)."""
    return subprocess.Popen(
        [processes.PYTHON, str(REPO / "starter.py"), "run", *args, "--json"],
        env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def finished(run: subprocess.Popen[str], timeout: float = 120) -> tuple[int, dict[str, Any]]:
    stdout, stderr = run.communicate(timeout=timeout)
    assert stdout.strip(), stderr
    return run.returncode, json.loads(stdout.strip().splitlines()[-1])


def waiting_calls(env: dict[str, str], cwd: Path, run_id: str | None = None) -> list[dict]:
    """Poll `approvals --json` until a call (of `run_id`, when given) is listed."""
    deadline = time.monotonic() + 60
    while True:
        proc = starter("approvals", "--json", env=env, cwd=cwd)
        assert proc.returncode == 0, proc.stderr
        pending = json.loads(proc.stdout)["pending"]
        mine = [p for p in pending if run_id is None or p["run_id"] == run_id]
        if mine:
            return mine
        assert time.monotonic() < deadline, f"nothing waits for approval: {proc.stdout}"
        time.sleep(0.5)


def said(proc: subprocess.CompletedProcess[str]) -> str:
    """What a command printed on stderr, with Rich's line wrapping undone."""
    return " ".join(proc.stderr.split())


def tool_observation(request: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(request["messages"]) if m["role"] == "tool")


def test_approvals_survive_a_worker_kill_and_decisions_are_recorded(
    temporal_address: str, database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    queue = f"e2e-approve-{uuid.uuid4().hex[:8]}"
    env = {
        **processes.worker_env(temporal_address, database_url, llm.base_url, queue, tmp_path),
        "PYTHONPATH": str(REPO),
    }
    log = tmp_path / "worker.log"
    worker = processes.start_worker(env, log, "--tools", "tests.fixtures.inventory_tools")
    replacement = None
    try:
        reserve = [
            Reply("Reserving.", [call(TOOL, sku="SKU-1", units=3)]),
            Reply("FINAL ANSWER: ok"),
        ]
        approved_model = llm.script(f"e2e-apr-{uuid.uuid4().hex[:6]}", reserve)
        run = background_run(env, tmp_path, "Reserve 3 of SKU-1", "--model", approved_model,
                             "--approve", TOOL)  # fmt: skip
        [pending] = waiting_calls(env, tmp_path)
        assert (pending["tool"], json.loads(pending["arguments"])) == (
            TOOL,
            {"sku": "SKU-1", "units": 3},
        )
        assert pending["since"] and pending["run_id"].startswith("run-agent-")
        run_id = pending["run_id"]

        worker.send_signal(signal.SIGKILL)  # the parked run holds no activity: nothing is lost
        worker.wait(30)
        # a decision sent while no worker runs waits for one, and says so (it waited silent)
        early = subprocess.Popen(
            [processes.PYTHON, str(REPO / "starter.py"), "approve", run_id, "call-bogus"],
            env=env, cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        time.sleep(DECISION_PATIENCE_SECONDS + 4)
        assert early.poll() is None  # still waiting
        replacement = processes.start_worker(env, log, "--tools", "tests.fixtures.inventory_tools")
        stdout, stderr = early.communicate(timeout=60)
        unknown = subprocess.CompletedProcess(early.args, early.returncode, stdout, stderr)
        assert unknown.returncode == 1
        assert "waiting for a worker to take the decision" in said(unknown)
        assert (
            f"unknown call id 'call-bogus'; calls waiting for approval: {pending['call_id']}"
            in said(unknown)
        )
        # no CALL_ID: every waiting call; no --by: the OS user decides
        ok = starter(
            "approve", run_id, "--reason", "stock checked", "--json", env=env, cwd=tmp_path
        )
        assert ok.returncode == 0, ok.stderr
        [decided] = json.loads(ok.stdout)["decided"]
        assert (decided["call_id"], decided["decision"], decided["by"], decided["reason"]) == (
            pending["call_id"], "approved", getpass.getuser(), "stock checked"
        )  # fmt: skip

        code, result = finished(run)
        assert code == 0 and result["terminated_by"] == "final_answer"
        assert result["tools_used"] == [TOOL]
        [record] = result["debrief"]["approvals"]
        assert (record["decision"], record["by"], record["reason"]) == (
            "approved", getpass.getuser(), "stock checked"
        )  # fmt: skip
        assert datetime.fromisoformat(record["requested_at"]) <= datetime.fromisoformat(
            record["at"]
        )
        assert json.loads(tool_observation(llm.requests[approved_model][1])) == {
            "sku": "SKU-1", "reserved": 3, "status": "reserved"
        }  # fmt: skip
        # its live output, written by the killed worker and then by its replacement: one log
        watched = starter("watch", run_id, "--json", env=env, cwd=tmp_path)
        assert watched.returncode == 0, watched.stderr
        events = [json.loads(line) for line in watched.stdout.splitlines() if line.strip()]
        types = [e["type"] for e in events]
        assert (types.count("iteration"), types[-1]) == (2, "finished")
        assert [e["status"] for e in events if e["type"] == "approval"] == ["pending", "approved"]
        assert types.index("approval") < types.index("tool_start") < types.index("tool_end")
        offsets = [e["offset"] for e in events[:-1]]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))  # dense, in order

        again = starter("approve", run_id, env=env, cwd=tmp_path)
        assert again.returncode == 1 and "is not running" in said(again)

        denied_model = llm.script(f"e2e-deny-{uuid.uuid4().hex[:6]}", reserve)
        run = background_run(env, tmp_path, "Reserve 3 of SKU-1", "--model", denied_model,
                             "--approve", TOOL)  # fmt: skip
        [pending] = waiting_calls(env, tmp_path)
        no_reason = starter("deny", pending["run_id"], env=env, cwd=tmp_path)
        assert no_reason.returncode == 2 and "a denial needs a reason" in said(no_reason)
        reason = "SKU-1 is frozen for audit"
        deny = starter("deny", pending["run_id"], pending["call_id"], "--reason", reason,
                       "--by", "bob", env=env, cwd=tmp_path)  # fmt: skip
        assert deny.returncode == 0, deny.stderr
        code, result = finished(run)
        assert result["terminated_by"] == "final_answer" and result["tools_used"] == []
        assert "SKU-1 is frozen for audit" in tool_observation(llm.requests[denied_model][1])

        timeout_model = llm.script(f"e2e-timeout-{uuid.uuid4().hex[:6]}", reserve)
        run = background_run(env, tmp_path, "Reserve 3 of SKU-1", "--model", timeout_model,
                             "--approve", TOOL, "--approval-timeout", "2")  # fmt: skip
        code, timed_out = finished(run)
        assert "no decision within 2 s (approval timeout)" in tool_observation(
            llm.requests[timeout_model][1]
        )

        debrief = starter("debrief", result["run_id"], "--json", env=env, cwd=tmp_path)
        assert debrief.returncode == 0, debrief.stderr
        [record] = json.loads(debrief.stdout)["approvals"]
        assert (record["decision"], record["by"], record["reason"]) == (
            "denied", "bob", "SKU-1 is frozen for audit"
        )  # fmt: skip
        assert record["at"] and record["tool"] == TOOL
        [record] = timed_out["debrief"]["approvals"]
        assert (record["decision"], record["by"]) == ("denied", "timeout")
    finally:
        processes.stop(worker, replacement)


def test_cancel_from_the_command_line_during_a_slow_llm_call(
    temporal_address: str, database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    queue = f"e2e-cancel-{uuid.uuid4().hex[:8]}"
    env = processes.worker_env(temporal_address, database_url, llm.base_url, queue, tmp_path)
    worker = processes.start_worker(env, tmp_path / "worker.log")
    try:
        model = llm.script(
            f"e2e-cancel-{uuid.uuid4().hex[:6]}",
            [Reply("Looking it up.", [call("calculator", expression="2+2")]),
             Reply("FINAL ANSWER: late", delay=90)],
        )  # fmt: skip
        run = background_run(env, tmp_path, "2+2, slowly", "--model", model)
        deadline = time.monotonic() + 60
        while len(llm.requests[model]) < 2:  # in the slow second LLM call
            assert time.monotonic() < deadline and run.poll() is None
            time.sleep(0.2)
        listed = starter("runs", "--status", "running", "--json", env=env, cwd=tmp_path)
        [run_id] = [
            r["run_id"] for r in json.loads(listed.stdout)["runs"] if r["task"] == "2+2, slowly"
        ]

        cancel = starter(
            "cancel", run_id, "--reason", "changed my mind", "--json", env=env, cwd=tmp_path
        )
        assert cancel.returncode == 0, cancel.stderr
        result = json.loads(cancel.stdout)
        assert (result["terminated_by"], result["success"], result["output"]) == (
            "cancelled", False, "Looking it up."
        )  # fmt: skip
        assert result["error"] == "cancelled: changed my mind"
        code, seen_by_run = finished(run)
        assert code == 1 and seen_by_run["terminated_by"] == "cancelled"  # `run` exits non-zero

        deadline = time.monotonic() + 60
        while True:
            listed = starter(
                "runs", "--terminated-by", "cancelled", "--json", env=env, cwd=tmp_path
            )
            runs = json.loads(listed.stdout)["runs"]
            if [r["status"] for r in runs if r["run_id"] == run_id] == ["completed"]:
                break
            assert time.monotonic() < deadline, listed.stdout
            time.sleep(0.5)
    finally:
        processes.stop(worker)


def test_cancel_an_agent_s_running_runs_at_once(
    temporal_address: str, database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    """`cancel --agent NAME`: every running run of that agent (three, each in a slow LLM
    call) ends `cancelled` with the reason, and another agent's run goes on."""
    queue = f"e2e-cancel-all-{uuid.uuid4().hex[:8]}"
    env = processes.worker_env(temporal_address, database_url, llm.base_url, queue, tmp_path)
    worker = processes.start_worker(env, tmp_path / "worker.log")
    runaway, other = f"runaway-{uuid.uuid4().hex[:6]}", f"other-{uuid.uuid4().hex[:6]}"
    slow = llm.script(f"e2e-slow-{uuid.uuid4().hex[:6]}", [Reply("FINAL ANSWER: late", delay=90)],
                      repeat_last=True)  # fmt: skip
    runs = [
        background_run(env, tmp_path, f"task {i}", "--agent", runaway, "--model", slow)
        for i in range(3)
    ]
    spared = background_run(env, tmp_path, "spare me", "--agent", other, "--model", slow)
    try:
        deadline = time.monotonic() + 60
        while True:  # all four in their LLM call, and the three listed by visibility
            listed = starter("runs", "--agent", runaway, "--status", "running", "--json",
                             env=env, cwd=tmp_path)  # fmt: skip
            if len(llm.requests[slow]) >= 4 and len(json.loads(listed.stdout)["runs"]) == 3:
                break
            assert time.monotonic() < deadline, listed.stdout
            time.sleep(0.3)

        cancel = starter("cancel", "--agent", runaway, "--reason", "runaway loop", "--json",
                         env=env, cwd=tmp_path)  # fmt: skip
        assert cancel.returncode == 0, cancel.stderr
        done = json.loads(cancel.stdout)
        assert done["agent"] == runaway and len(done["ended"]) == 3, done
        assert set(done["ended"].values()) == {"cancelled"}
        assert done["unserved"] == {} and done["failed"] == {}
        for run in runs:
            code, seen = finished(run)
            assert code == 1 and seen["terminated_by"] == "cancelled"
            assert seen["error"] == "cancelled: runaway loop" and seen["run_id"] in done["ended"]

        assert spared.poll() is None  # the other agent's run goes on
        words = starter("cancel", "--agent", other, env=env, cwd=tmp_path)
        assert words.returncode == 0, words.stderr
        assert "1 of 1 running runs of agent" in words.stdout
        assert finished(spared)[1]["terminated_by"] == "cancelled"
        nothing = starter("cancel", "--agent", runaway, env=env, cwd=tmp_path)
        assert nothing.returncode == 0 and "no running runs of agent" in nothing.stdout
    finally:
        for run in [*runs, spared]:
            if run.poll() is None:
                run.kill()
        processes.stop(worker)


def test_budgets_and_the_deadline_from_the_command_line(
    temporal_address: str, database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    """`run --token-budget`, `--cost-budget` and `--timeout` end their runs (exit 1), and
    `runs --terminated-by` / `--status` find them by those endings."""
    tag = uuid.uuid4().hex[:6]
    looping = [Reply("Once more.", [call("calculator", expression="1+1")], usage=(1000, 100))]
    tokens_model = llm.script(f"e2e-tokens-{tag}", looping, repeat_last=True)
    cost_model = llm.script(f"e2e-cost-{tag}", looping, repeat_last=True)
    slow_model = llm.script(
        f"e2e-slow-{tag}",
        [Reply("First look.", [call("calculator", expression="3*3")]),
         Reply("FINAL ANSWER: 9", delay=90)],
    )  # fmt: skip
    queue = f"e2e-limits-{tag}"
    env = {
        **processes.worker_env(temporal_address, database_url, llm.base_url, queue, tmp_path),
        # $1.10 a step for the cost model (the worker prices the calls)
        "AGENT_MODEL_PRICES": json.dumps(
            {cost_model: {"input_per_mtok": 1000.0, "output_per_mtok": 1000.0}}
        ),
    }
    agent = f"limits-{tag}"
    worker = processes.start_worker(env, tmp_path / "worker.log")
    try:
        started = time.monotonic()
        runs = [
            background_run(env, tmp_path, "Loop on tokens", "--agent", agent,
                           "--model", tokens_model, "--token-budget", "2500"),
            background_run(env, tmp_path, "Loop on cost", "--agent", agent,
                           "--model", cost_model, "--cost-budget", "2"),
            background_run(env, tmp_path, "Square three slowly", "--agent", agent,
                           "--model", slow_model, "--timeout", "20"),
        ]  # fmt: skip
        (t_code, tokens), (c_code, cost), (s_code, slow) = [finished(r) for r in runs]
        assert time.monotonic() - started < 80  # the slow model's 90 s answer was not awaited

        assert (t_code, tokens["terminated_by"], tokens["success"]) == (1, "budget_exceeded", False)
        assert tokens["error"] == "token budget of 2,500 exceeded: 3,300 tokens used"
        assert tokens["debrief"]["errors_encountered"][0] == f"Stopped: {tokens['error']}"
        assert (c_code, cost["terminated_by"]) == (1, "budget_exceeded")
        assert cost["error"] == "cost budget of $2.0000 exceeded: $2.2000 spent"
        assert (s_code, slow["terminated_by"], slow["output"]) == (1, "timeout", "First look.")
        assert slow["error"] == "deadline of 20 s reached during an LLM call"
        assert slow["debrief"]["errors_encountered"][0] == f"Stopped: {slow['error']}"

        def listed(*args: str) -> set[str]:
            proc = starter("runs", "--agent", agent, *args, "--json", env=env, cwd=tmp_path)
            assert proc.returncode == 0, proc.stderr
            return {r["run_id"] for r in json.loads(proc.stdout)["runs"]}

        expected = {
            ("--terminated-by", "budget_exceeded"): {tokens["run_id"], cost["run_id"]},
            ("--terminated-by", "timeout"): {slow["run_id"]},
            ("--status", "completed"): {tokens["run_id"], cost["run_id"], slow["run_id"]},
            ("--status", "running"): set(),
        }
        deadline = time.monotonic() + 60  # visibility catches up within moments
        while (seen := {k: listed(*k) for k in expected}) != expected:
            assert time.monotonic() < deadline, seen
            time.sleep(0.5)
    finally:
        processes.stop(worker)
