"""The CLI as users run it: `python starter.py run …` as a subprocess.

Against a separately started `python worker.py` (the production shape), and on the
embedded default with nothing configured (the README's first command).
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from reactive_temporal.embedded.scripted_llm import HttpError, Reply, ScriptedLLM, call
from tests import processes
from tests.processes import PYTHON, REPO, clean_env, starter

pytestmark = pytest.mark.e2e


@pytest.fixture
def worker_env(
    temporal_address: str, database_url: str, llm: ScriptedLLM, tmp_path: Path
) -> Iterator[dict[str, str]]:
    """A `python worker.py` subprocess on its own task queue; yields the env to reach it."""
    env = clean_env(
        TEMPORAL_ADDRESS=temporal_address,
        DATABASE_URL=database_url,
        OPENAI_BASE_URL=llm.base_url,
        OPENAI_API_KEY="test-key",
        TEMPORAL_TASK_QUEUE=f"e2e-{uuid.uuid4().hex[:8]}",
        REACTIVE_TEMPORAL_DATA_DIR=str(tmp_path / "data"),
    )
    log = open(tmp_path / "worker.log", "w+")  # noqa: SIM115
    worker = subprocess.Popen(
        [PYTHON, str(REPO / "worker.py")],
        env=env,
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while "worker on" not in (tmp_path / "worker.log").read_text():
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()
            assert time.monotonic() < deadline, "worker did not start"
            time.sleep(0.1)
        yield env
    finally:
        worker.terminate()
        worker.wait(30)
        log.close()


def test_run_json_against_a_separate_worker(worker_env: dict[str, str], tmp_path: Path):
    proc = starter(
        "run",
        "What is (17 * 23) + 4?",
        "--json",
        "--agent",
        "e2e-agent",
        env=worker_env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)  # stdout holds exactly one JSON object
    assert result["success"] is True
    assert result["terminated_by"] == "final_answer_tool"
    assert result["output"] == "(17 * 23) + 4 = 395"
    assert result["agent_id"] == "e2e-agent"
    assert result["run_id"].startswith("run-e2e-agent-")
    assert result["metadata"]["iterations"] == 2
    assert result["metadata"]["tokens_used"] > 0
    assert result["final_answer"]["summary"].startswith("Used the calculator")


def test_failed_run_exits_non_zero(worker_env: dict[str, str], llm: ScriptedLLM, tmp_path: Path):
    model = llm.script(f"e2e-400-{uuid.uuid4().hex[:6]}", [HttpError(400, "bad request")])
    proc = starter("run", "Anything", "--json", "--model", model, env=worker_env, cwd=tmp_path)
    assert proc.returncode == 1
    result = json.loads(proc.stdout)
    assert result["terminated_by"] == "llm_error" and result["success"] is False


def test_human_output_shows_progress_and_the_answer(worker_env: dict[str, str], tmp_path: Path):
    proc = starter("run", "What is 6 * 7?", env=worker_env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "6 * 7 = 42" in proc.stdout
    assert "final_answer_tool" in proc.stdout
    assert "iteration 1/10" in proc.stderr  # live progress, read from the running workflow


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", ""], "task"),
        (["run", "x" * 100_001], "task"),
        (["run", "hi", "--max-iterations", "0"], "max-iterations"),
        (["run", "hi", "--max-iterations", "many"], "max-iterations"),
        (["run", "hi", "--agent", "bad name!"], "agent_id"),
    ],
)
def test_bad_input_is_refused_with_a_clear_error(args, message, tmp_path: Path):
    env = clean_env(TEMPORAL_ADDRESS="127.0.0.1:1", REACTIVE_TEMPORAL_DATA_DIR=str(tmp_path))
    proc = starter(*args, env=env, cwd=tmp_path)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_unreachable_temporal_is_reported(tmp_path: Path):
    env = clean_env(TEMPORAL_ADDRESS="127.0.0.1:1", REACTIVE_TEMPORAL_DATA_DIR=str(tmp_path))
    proc = starter("run", "hi", env=env, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2
    assert "cannot reach Temporal at 127.0.0.1:1" in proc.stderr


def test_embedded_default_with_nothing_configured(tmp_path: Path):
    """The README's first command: no servers, no keys, fresh data directory."""
    env = clean_env(REACTIVE_TEMPORAL_DATA_DIR=str(tmp_path / "data"))
    proc = starter("run", "What is (17 * 23) + 4?", env=env, cwd=tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "(17 * 23) + 4 = 395" in proc.stdout
    assert "offline scripted model" in proc.stderr
    # a run with nothing to synthesize kept its debrief itself: nothing more is being written
    assert "rich debrief" not in proc.stderr and "synthesized debrief" not in proc.stderr
    capped = starter("run", "What is 3 * 3?", "--max-iterations", "1", env=env, cwd=tmp_path)
    assert capped.returncode == 1, capped.stdout + capped.stderr  # stopped at its cap
    assert "synthesized debrief of run-" in capped.stderr  # the second debrief, named
    assert capped.stdout.count("Agent Debrief") == 2
    assert (tmp_path / "data" / "temporal.sqlite").exists()  # runs persist across commands
    assert (tmp_path / "data" / "postgres" / "PG_VERSION").exists()
    imports = {**env, "PYTHONPROFILEIMPORTTIME": "1"}  # every module imported, on stderr
    again = starter("run", "What is 2**10?", "--json", env=imports, cwd=tmp_path, timeout=180)
    assert again.returncode == 0, again.stderr
    run = json.loads(again.stdout)
    assert run["output"] == "2**10 = 1024"  # README: make demo TASK=…
    worker = "reactive_temporal.hosting.worker_factory"
    assert worker in again.stderr  # a run is served by a worker in the command's process...

    # ...a command that only reads starts none (its imports and start were most of its time)
    listed = starter("runs", "--json", env=imports, cwd=tmp_path, timeout=180)
    assert listed.returncode == 0, listed.stderr
    assert run["run_id"] in [r["run_id"] for r in json.loads(listed.stdout)["runs"]]
    shown = starter("debrief", run["run_id"], "--json", env=imports, cwd=tmp_path, timeout=180)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["outcome"] == "success"
    assert worker not in listed.stderr and worker not in shown.stderr


def test_reading_commands_first_on_a_fresh_clone(tmp_path: Path):
    """`lessons` or `costs` before any run, on the embedded default: they said to run
    `migrate` first, which refuses the embedded Postgres (it needs DATABASE_URL). The embedded
    database is brought up to date as its worker would, and each says there is nothing yet."""
    env = clean_env(REACTIVE_TEMPORAL_DATA_DIR=str(tmp_path / "data"))
    lessons = starter("lessons", "--json", env=env, cwd=tmp_path, timeout=180)
    assert lessons.returncode == 0, lessons.stderr
    assert json.loads(lessons.stdout)["lessons"] == []
    costs = starter("costs", env=env, cwd=tmp_path, timeout=180)
    assert costs.returncode == 0, costs.stderr
    assert "no runs ended" in costs.stdout + costs.stderr


def test_debrief_command(worker_env: dict[str, str], llm: ScriptedLLM, tmp_path: Path):
    model = llm.script(
        f"e2e-debrief-{uuid.uuid4().hex[:6]}",
        [
            Reply(None, [call("calculator", expression="3*3")]),
            Reply(None, [call("final-answer", output="Nine. " * 30, format="text", summary="s")]),
            # the synthesis uses the run's model: its next answer is the debrief's JSON
            Reply(json.dumps({"summary": "Rich summary.", "key_findings": ["9"]})),
        ],
    )
    env = {**worker_env}
    proc = starter("run", "3*3, at length", "--json", "--model", model, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    run = json.loads(proc.stdout)
    assert run["debrief"]["outcome"] == "success" and run["debrief"]["synthesized"] is False
    assert "## Summary" in run["debrief"]["markdown"]

    rich = starter("debrief", run["run_id"], "--rich", "--json", env=env, cwd=tmp_path, timeout=120)
    assert rich.returncode == 0, rich.stderr
    assert json.loads(rich.stdout)["summary"] == "Rich summary."

    human = starter("debrief", run["run_id"], env=env, cwd=tmp_path)  # now the rich one is done
    assert human.returncode == 0 and "Rich summary." in human.stdout
    assert "synthesized debrief" in human.stderr

    unknown = starter("debrief", "run-nope-123", env=env, cwd=tmp_path)
    assert unknown.returncode == 1 and "no run with id 'run-nope-123'" in unknown.stderr

    no_memory = starter("run", "What is 1+1?", "--no-memory", "--json", env=env, cwd=tmp_path)
    assert json.loads(no_memory.stdout)["debrief"] is None
    missing = starter("debrief", json.loads(no_memory.stdout)["run_id"], env=env, cwd=tmp_path)
    assert missing.returncode == 1 and "has no debrief" in missing.stderr


@pytest.mark.parametrize(
    "command", [("worker.py",), ("starter.py", "worker")], ids=["worker.py", "starter-worker"]
)
def test_a_worker_loads_user_tools(
    command: tuple[str, ...],
    temporal_address: str,
    database_url: str,
    llm: ScriptedLLM,
    tmp_path: Path,
):
    """`python worker.py --tools M` and `python starter.py worker --tools M` are one command."""
    queue = f"e2e-tools-{uuid.uuid4().hex[:8]}"
    env = {
        **processes.worker_env(temporal_address, database_url, llm.base_url, queue, tmp_path),
        "PYTHONPATH": str(REPO),
    }
    log = tmp_path / "worker.log"
    worker = processes.start_worker(
        env, log, "--tools", "tests.fixtures.extra_tools", command=command
    )
    try:
        assert "shout" in log.read_text()  # its start-up line lists the tools it serves
        model = llm.script(
            f"e2e-tools-{uuid.uuid4().hex[:6]}",
            [Reply(None, [call("shout", text="hello")]), Reply("FINAL ANSWER: done")],
        )
        proc = starter("run", "Shout hello", "--json", "--model", model, env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["tools_used"] == ["shout"]
        assert llm.requests[model][1]["messages"][-1]["content"] == "HELLO!"
    finally:
        processes.stop(worker)
    assert worker.returncode == 0, log.read_text()[-2000:]  # SIGTERM: a clean, graceful stop
