"""`python starter.py dev`: the embedded stack and a worker in the foreground, shared by
other commands, stopped cleanly by Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from reactive_temporal.embedded.dev_server import free_port
from reactive_temporal.embedded.orphans import stop_orphans
from tests.processes import PYTHON, REPO, clean_env, starter

pytestmark = pytest.mark.e2e


def test_dev_serves_runs_and_stops_on_ctrl_c(tmp_path: Path):
    data = tmp_path / "data"
    env = clean_env(REACTIVE_TEMPORAL_DATA_DIR=str(data))
    port, ui_port = free_port(), free_port()
    log = open(tmp_path / "dev.log", "w+")  # noqa: SIM115
    dev = subprocess.Popen(
        [PYTHON, str(REPO / "starter.py"), "dev", "--port", str(port), "--ui-port", str(ui_port)],
        env={**env, "COLUMNS": "200"}, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while not (data / "stack.json").exists():
            assert dev.poll() is None, (tmp_path / "dev.log").read_text()
            assert time.monotonic() < deadline, "dev stack did not come up"
            time.sleep(0.2)
        published = json.loads((data / "stack.json").read_text())
        assert published["temporal_address"] == f"127.0.0.1:{port}"
        assert published["web_ui"] == f"http://127.0.0.1:{ui_port}"
        # the banner is printed just after the stack is published: wait for it, not race it
        while f"http://127.0.0.1:{ui_port}" not in (tmp_path / "dev.log").read_text():
            assert dev.poll() is None, (tmp_path / "dev.log").read_text()
            assert time.monotonic() < deadline, "dev printed no banner with the Web UI"
            time.sleep(0.2)
        with urllib.request.urlopen(published["web_ui"], timeout=10) as page:  # the Web UI serves
            assert page.status == 200

        # another command uses the running stack and its worker instead of starting its own
        proc = starter("run", "What is 9 * 9?", "--json", env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["output"] == "9 * 9 = 81"
        second_dev = starter("dev", env=env, cwd=tmp_path, timeout=60)
        assert second_dev.returncode == 2 and "already running" in second_dev.stderr
        # another stack on the same port: it joined this server (its worker on the same
        # task queue, this stack's runs' rows in its own Postgres); now it is refused
        other = clean_env(REACTIVE_TEMPORAL_DATA_DIR=str(tmp_path / "other"))
        collided = starter("dev", "--port", str(port), env=other, cwd=tmp_path, timeout=60)
        assert collided.returncode == 2, collided.stderr
        assert f"the Temporal port {port} on 127.0.0.1 is taken" in collided.stderr
        assert not (tmp_path / "other" / "stack.json").exists()
    finally:
        dev.send_signal(signal.SIGINT)
        code = dev.wait(60)
        log.close()
    assert code == 0, (tmp_path / "dev.log").read_text()
    assert "stopped." in (tmp_path / "dev.log").read_text()
    assert not (data / "stack.json").exists()
    assert not (data / "postgres" / "postmaster.pid").exists()  # Postgres shut down too


def test_dev_json_prints_the_stack_as_one_object(tmp_path: Path):
    env = clean_env(REACTIVE_TEMPORAL_DATA_DIR=str(tmp_path / "data"))
    metrics = free_port()
    dev = subprocess.Popen(
        [PYTHON, str(REPO / "starter.py"), "dev", "--json", "--port", str(free_port()),
         "--ui-port", str(free_port()), "--metrics-port", str(metrics)],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert dev.stdout is not None
        line = dev.stdout.readline()  # printed once the worker is ready
        info = json.loads(line)
        assert info["temporal_address"].startswith("127.0.0.1:") and info["offline_model"] is True
        # dev serves metrics too: the SDK's worker metrics through the same port, and health
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/healthz", timeout=5):
                    break
            except OSError:
                assert time.monotonic() < deadline, "dev's /healthz never turned 200"
                time.sleep(0.2)
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=10) as page:
            assert "temporal_worker_task_slots_available" in page.read().decode()
    finally:
        dev.send_signal(signal.SIGINT)
        out, _ = dev.communicate(timeout=60)
    assert dev.returncode == 0 and out.strip() == ""  # nothing else on stdout


def test_dev_after_a_dev_killed_outright_stops_what_it_left_running(tmp_path: Path):
    """SIGKILL leaves `dev`'s Temporal dev server and Postgres running, holding their ports:
    the next `dev` in the same data directory was refused ("the Temporal port … is taken")
    until someone found them. It stops them and comes up."""
    data = tmp_path / "data"
    env = clean_env(REACTIVE_TEMPORAL_DATA_DIR=str(data))
    args = [PYTHON, str(REPO / "starter.py"), "dev", "--json", "--port", str(free_port()),
            "--ui-port", str(free_port())]  # fmt: skip
    first = subprocess.Popen(
        args, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert first.stdout is not None and json.loads(first.stdout.readline())  # ready
    first.kill()
    first.wait(30)
    assert (data / "postgres" / "postmaster.pid").exists()  # left running
    second = subprocess.Popen(
        args, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert second.stdout is not None
        ready = second.stdout.readline()
        assert ready, second.communicate(timeout=30)
        assert json.loads(ready).get("temporal_address") == f"127.0.0.1:{args[5]}", ready
        ran = starter("run", "What is 9 * 9?", "--json", env=env, cwd=tmp_path)
        assert ran.returncode == 0 and json.loads(ran.stdout)["output"] == "9 * 9 = 81"
    finally:
        second.send_signal(signal.SIGINT)
        _, errors = second.communicate(timeout=60)
        stop_orphans(data)  # whatever is still running, should the test fail
    assert second.returncode == 0, errors
    assert "left running" in errors  # it says what it stopped
    assert not (data / "temporal.pid").exists()


def test_commands_after_a_dev_killed_outright_leave_no_postgres_running(tmp_path: Path):
    """Run as root, embedded Postgres serves as a user of its own: a command after a `dev`
    killed outright made the data directory owner-only before it stopped the Postgres left
    running, which PANICked in its shutdown ("could not open file …/pg_control: Permission
    denied"); and the dead `dev` stayed listed as the server's user, so every later command's
    Postgres was left running, one more each time, and its `stack.json` stayed behind."""
    data = tmp_path / "data"
    env = clean_env(REACTIVE_TEMPORAL_DATA_DIR=str(data))
    dev = subprocess.Popen(
        [PYTHON, str(REPO / "starter.py"), "dev", "--json", "--port", str(free_port()),
         "--ui-port", str(free_port())],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert dev.stdout is not None and json.loads(dev.stdout.readline())  # ready
        dev.kill()
        dev.wait(30)
        for _ in range(2):
            listed = starter("runs", "--json", env=env, cwd=tmp_path)
            assert listed.returncode == 0, listed.stderr
            assert postgres_of(data) == [], "a command left its Postgres running"
        assert not (data / "stack.json").exists()
        log = data / "postgres" / "log"
        assert not log.exists() or "PANIC" not in log.read_text(errors="replace")
    finally:
        stop_orphans(data)


def postgres_of(data: Path) -> list[int]:
    """The pids of the Postgres servers (postmasters) serving `data`, once they are gone or a
    minute after a command ended (a fast shutdown takes a moment)."""
    deadline = time.monotonic() + 60
    while True:
        found = []
        for proc in Path("/proc").iterdir():
            try:
                command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except (OSError, ValueError):
                continue
            if f"-D {data / 'postgres'}" in command and "postgres" in command.split()[0]:
                found.append(int(proc.name))
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)
