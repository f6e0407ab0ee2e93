"""`worker --processes N` as an operator runs it: N workers polling one task queue, each with
its metrics port, stopped together by one SIGTERM; one that dies takes the others down; a
bad setting is reported once, by the first, before any other starts."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from reactive_temporal.embedded.scripted_llm import ScriptedLLM
from tests.processes import PYTHON, REPO, start_worker, starter, stop, worker_env

pytestmark = pytest.mark.e2e

POLLING = "2 worker processes polling"


def two_free_ports() -> int:
    """A port P with P and P + 1 both free (worker i serves metrics on P + i)."""
    for _ in range(50):
        with socket.socket() as a:
            a.bind(("127.0.0.1", 0))
            port = int(a.getsockname()[1])
            with socket.socket() as b:
                try:
                    b.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
                return port
    raise AssertionError("no two adjacent free ports")


def health(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError as err:
        return 0, str(err)


def wait_for_text(log: Path, text: str, process: subprocess.Popen[bytes], seconds: float = 90):
    deadline = time.monotonic() + seconds
    while text not in log.read_text():
        assert process.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, f"{text!r} not in the log:\n{log.read_text()[-3000:]}"
        time.sleep(0.1)


def worker_pids(log: Path) -> dict[int, int]:
    """Worker number → pid, from the supervisor's `worker i/N: pid P` lines."""
    found = re.findall(r"^worker (\d+)/\d+: pid (\d+)$", log.read_text(), re.M)
    return {int(number): int(pid) for number, pid in found}


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def workflow_pollers(client: Client, task_queue: str) -> set[str]:
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    return {poller.identity for poller in response.pollers}


async def test_two_processes_serve_one_task_queue_and_stop_together(
    temporal_address: str, database_url: str, llm: ScriptedLLM, client: Client, tmp_path: Path
):
    task_queue = f"procs-{uuid.uuid4().hex[:8]}"
    env = worker_env(temporal_address, database_url, llm.base_url, task_queue, tmp_path)
    port = two_free_ports()
    log = tmp_path / "w.log"
    supervisor = start_worker(env, log, "--processes", "2", "--metrics-port", str(port))
    try:
        wait_for_text(log, POLLING, supervisor)
        pids = worker_pids(log)
        assert sorted(pids) == [1, 2] and len(set(pids.values())) == 2, log.read_text()
        assert supervisor.pid not in pids.values()
        # /healthz turns to polling a moment after a worker's ready line, as a lone worker's.
        deadline = time.monotonic() + 60
        while (health(port), health(port + 1)) != ((200, "polling\n"),) * 2:
            assert time.monotonic() < deadline, (health(port), health(port + 1))
            await asyncio.sleep(0.1)
        # Both poll the same task queue, as two workers.
        deadline = time.monotonic() + 60
        while len(pollers := await workflow_pollers(client, task_queue)) < 2:
            assert time.monotonic() < deadline, pollers
            await asyncio.sleep(0.2)
        assert {p.split("@")[0] for p in pollers} == {str(pid) for pid in pids.values()}, pollers
        result = await asyncio.to_thread(
            starter, "run", "What is 6 * 7?", "--json", env=env, cwd=tmp_path
        )
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["success"] is True

        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=90) == 0, log.read_text()[-3000:]
    finally:
        stop(supervisor)
    text = log.read_text()
    # Every line a worker printed came through, marked with it.
    assert "[worker 1/2] worker on" in text and "[worker 2/2] worker on" in text, text
    assert all(gone(pid) for pid in pids.values()), pids
    assert health(port)[0] == 0 and health(port + 1)[0] == 0


def test_a_worker_that_dies_stops_the_others_with_its_code(
    temporal_address: str, database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    env = worker_env(
        temporal_address, database_url, llm.base_url, f"procs-{uuid.uuid4().hex[:8]}", tmp_path
    )
    log = tmp_path / "w.log"
    supervisor = start_worker(env, log, "--processes", "2")
    try:
        wait_for_text(log, POLLING, supervisor)
        pids = worker_pids(log)
        os.kill(pids[2], signal.SIGKILL)
        assert supervisor.wait(timeout=90) == 128 + signal.SIGKILL, log.read_text()[-3000:]
    finally:
        stop(supervisor)
    assert "worker 2/2 exited with code 137: stopping the others" in log.read_text()
    assert gone(pids[1]), "worker 1 still runs"


def test_a_bad_setting_is_reported_once_before_a_second_worker_starts(
    temporal_address: str, database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    env = worker_env(
        temporal_address, database_url, llm.base_url, f"procs-{uuid.uuid4().hex[:8]}", tmp_path
    )
    log = tmp_path / "w.log"
    with open(log, "wb") as out:
        supervisor = subprocess.run(
            [*start_command(), "--processes", "3", "--tools", "no_such_module_here"],
            env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, timeout=120,
        )  # fmt: skip
    text = log.read_text()
    assert supervisor.returncode != 0, text
    assert text.count("no_such_module_here") >= 1 and "[worker 1/3]" in text, text
    assert "worker 2/3" not in text and "[worker 2/3]" not in text, text


def test_metrics_ports_past_65535_are_refused_before_anything_starts(
    temporal_address: str, database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    env = worker_env(
        temporal_address, database_url, llm.base_url, f"procs-{uuid.uuid4().hex[:8]}", tmp_path
    )
    result = subprocess.run(
        [*start_command(), "--processes", "4", "--metrics-port", "65534"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2, result
    assert "--metrics-port 65534 with --processes 4" in result.stderr, result.stderr
    assert "worker 1/4" not in result.stdout


def start_command() -> list[str]:
    return [PYTHON, str(REPO / "worker.py")]


def test_a_ctrl_c_in_the_terminal_drains_every_worker(
    temporal_address: str, database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    """A terminal's Ctrl-C reaches the supervisor and every worker of its process group, and
    the supervisor passes it on as SIGTERM: each worker saw a second signal at once and
    stopped without draining ("stopping now", exit 130). One Ctrl-C drains, as documented."""
    env = worker_env(
        temporal_address, database_url, llm.base_url, f"procs-{uuid.uuid4().hex[:8]}", tmp_path
    )
    log = tmp_path / "w.log"
    with open(log, "wb") as out:
        supervisor = subprocess.Popen(
            [PYTHON, str(REPO / "worker.py"), "--processes", "2"],
            env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,  # a group of its own, as a terminal's job is
        )  # fmt: skip
    try:
        wait_for_text(log, POLLING, supervisor)
        os.killpg(supervisor.pid, signal.SIGINT)  # what Ctrl-C does
        assert supervisor.wait(timeout=90) == 0, log.read_text()[-3000:]
    finally:
        stop(supervisor)
    text = log.read_text()
    assert "stopping now" not in text, text[-3000:]
    assert text.count("stopping: activities in flight have up to") == 2, text[-3000:]
