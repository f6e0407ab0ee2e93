"""Controlling runs from the command line, with `worker.py` as a process: approve a parked
call after the worker was killed and replaced, deny one with a reason the model reads, an
approval timeout, a refused decision, the debrief's record; `cancel` during a slow LLM call."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

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
        replacement = processes.start_worker(env, log, "--tools", "tests.fixtures.inventory_tools")

        unknown = starter("approve", run_id, "call-bogus", env=env, cwd=tmp_path)
        assert unknown.returncode == 1
        assert (
            f"unknown call id 'call-bogus'; calls waiting for approval: {pending['call_id']}"
            in said(unknown)
        )
        ok = starter("approve", run_id, "--by", "alice", "--json", env=env, cwd=tmp_path)
        assert ok.returncode == 0, ok.stderr
        assert [d["decision"] for d in json.loads(ok.stdout)["decided"]] == ["approved"]

        code, result = finished(run)
        assert code == 0 and result["terminated_by"] == "final_answer"
        assert result["tools_used"] == [TOOL]
        assert json.loads(tool_observation(llm.requests[approved_model][1])) == {
            "sku": "SKU-1", "reserved": 3, "status": "reserved"
        }  # fmt: skip
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

        deadline = time.monotonic() + 30
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
