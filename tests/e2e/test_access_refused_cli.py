"""The command line on a cluster whose authorizer refuses the caller: one line, what to grant.

`starter.py` commands and `worker` run as processes with TEMPORAL_API_KEY_FILE, through a
front answering as Temporal Cloud's authorizer does (`tests/support/authorizer.py`); the
worker serving the runs of the commands reaches the dev server directly. A refused command
prints one `error:` line (with `--json`, `{"error": …}`) naming the call, the namespace,
where the key came from and the permission to grant, and exits non-zero; `check` says what
the key may do; a worker whose key may not poll refuses to start, and one whose key is
revoked while it runs stops saying so once.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client

from reactive_temporal.config import Settings
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from tests.conftest import wait_for
from tests.processes import clean_env, start_worker, starter_async, stop
from tests.support.refusing_frontend import RefusingFrontend
from tests.workflow.conftest import Harness, running_worker

pytestmark = [pytest.mark.workflow, pytest.mark.e2e]

HANG_GUARD = 60
SDK_POLL_GRACE = 60
"""The core retries a refused poll for 60 s (`LONG_POLL_FATAL_GRACE`) before the worker fails."""


@pytest.fixture
async def harness(client: Client, settings: Settings) -> AsyncIterator[Harness]:
    async with running_worker(client, settings) as running:
        yield running


def cli_env(
    front: RefusingFrontend, settings: Settings, llm: ScriptedLLM, key_file: Path, queue: str
) -> dict[str, str]:
    return clean_env(
        TEMPORAL_ADDRESS=front.address,
        TEMPORAL_API_KEY_FILE=str(key_file),
        TEMPORAL_TLS="false",  # the front speaks plain gRPC; a key alone implies TLS
        TEMPORAL_TASK_QUEUE=queue,
        DATABASE_URL=settings.database_url or "",
        OPENAI_BASE_URL=llm.base_url,
        OPENAI_API_KEY="test",
        REACTIVE_TEMPORAL_DATA_DIR=str(key_file.parent / "data"),
        REACTIVE_TEMPORAL_CREDENTIALS_POLL="0.5",
    )


def said_once(stderr: str) -> str:
    """The one `error:` line a CLI command printed (it prints nothing else on failure)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


def grants(said: str, key_file: Path, access: str) -> None:
    assert "in namespace 'default'" in said, said
    assert f"the API key in TEMPORAL_API_KEY_FILE ({key_file})" in said, said
    assert f"the {access} permission on namespace 'default'" in said, said
    assert key_file.read_text().strip() not in said


async def parked_run(harness: Harness, llm: ScriptedLLM) -> str:
    """A run started with full rights, waiting for its call's approval."""
    model = llm.script(
        f"approving-{uuid.uuid4().hex[:6]}",
        [Reply("Computing.", [call("calculator", expression="2+2")]), Reply("FINAL ANSWER: 4")],
    )
    agent = harness.agent(
        model, agent_id=f"cli-{uuid.uuid4().hex[:6]}", approve_tools=["calculator"]
    )
    handle = await agent.start("What is 2+2?")

    async def waiting() -> bool:
        return bool(await agent.approvals())

    await wait_for(waiting, seconds=HANG_GUARD)
    return handle.id


async def test_commands_a_read_only_key_may_not_run_say_so_in_one_line(
    authorizer: RefusingFrontend, harness: Harness, settings: Settings, llm: ScriptedLLM,
    tmp_path: Path,
):  # fmt: skip
    key_file = tmp_path / "key"
    key_file.write_text("k-read")
    env = cli_env(authorizer, settings, llm, key_file, harness.task_queue)
    run_id = await parked_run(harness, llm)
    for command, action in (
        (("run", "What is 2+2?"), "start a run (StartWorkflowExecution)"),
        (("chat", "hello"), "(ExecuteMultiOperation)"),
        (("approve", run_id), "send the update"),
        (("deny", run_id, "--reason", "no"), "send the update"),
        (("cancel", run_id), "cancel a workflow (RequestCancelWorkflowExecution)"),
    ):
        done = await starter_async(*command, "--json", env=env, cwd=tmp_path, seconds=HANG_GUARD)
        assert done.code not in (0, None), done.describe()
        error = json.loads(done.stdout)["error"]
        assert error.startswith("Temporal refused to ") and action in error, done.describe()
        grants(error, key_file, "Write")
        assert said_once(done.stderr) == f"error: {error}"
    for reading in (
        ("runs", "--json"),
        ("approvals", "--json"),
        ("progress", run_id, "--json"),
        ("export", run_id, "-o", str(tmp_path / "history.json")),
    ):
        done = await starter_async(*reading, env=env, cwd=tmp_path, seconds=HANG_GUARD)
        assert done.code == 0, done.describe()  # reading is allowed

    key_file.write_text("k-other-namespace")
    done = await starter_async("runs", env=env, cwd=tmp_path, seconds=HANG_GUARD)
    assert done.code not in (0, None) and done.stdout == "", done.describe()
    line = said_once(done.stderr)
    assert "list workflows (ListWorkflowExecutions)" in line, line
    grants(line, key_file, "Read")
    await harness.agent("unused").cancel(run_id)


async def test_a_revoked_key_is_named_at_connect_with_how_to_renew_it(
    authorizer: RefusingFrontend, harness: Harness, settings: Settings, llm: ScriptedLLM,
    tmp_path: Path,
):  # fmt: skip
    key_file = tmp_path / "key"
    key_file.write_text("k-revoked")
    env = cli_env(authorizer, settings, llm, key_file, harness.task_queue)
    done = await starter_async("runs", "--json", env=env, cwd=tmp_path, seconds=HANG_GUARD)
    assert done.code not in (0, None), done.describe()
    error = json.loads(done.stdout)["error"]
    assert f"did not accept the API key in TEMPORAL_API_KEY_FILE ({key_file})" in error, error
    assert "to connect (GetSystemInfo)" in error and "'Jwt verification fails'" in error
    assert f"write a valid one into {key_file}" in error and "k-revoked" not in error
    assert said_once(done.stderr).endswith(error)


async def check_rows(env: dict[str, str], cwd: Path) -> tuple[int | None, dict[str, dict]]:
    done = await starter_async("check", "--json", env=env, cwd=cwd, seconds=HANG_GUARD)
    assert "Traceback" not in done.stderr, done.describe()
    return done.code, {row["name"]: row for row in json.loads(done.stdout)["checks"]}


async def test_check_says_what_the_key_may_do_without_doing_it(
    authorizer: RefusingFrontend, harness: Harness, settings: Settings, llm: ScriptedLLM,
    tmp_path: Path,
):  # fmt: skip
    key_file = tmp_path / "key"
    key_file.write_text("k-write")
    env = cli_env(authorizer, settings, llm, key_file, harness.task_queue)
    migrated = await starter_async("migrate", env=env, cwd=tmp_path, seconds=HANG_GUARD)
    assert migrated.code == 0, migrated.describe()
    code, rows = await check_rows(env, tmp_path)
    row = rows["permissions"]
    assert code == 0 and row["status"] == "ok", rows
    assert row["detail"] == (
        f"the API key in TEMPORAL_API_KEY_FILE ({key_file}) may start runs, send updates, "
        "send signals, read runs, poll for workflow tasks, poll for activity tasks"
    )
    assert rows["workflow updates"]["status"] == "ok", rows

    key_file.write_text("k-read")
    code, rows = await check_rows(env, tmp_path)
    row = rows["permissions"]
    assert code == 1 and row["status"] == "fail", rows
    assert (
        "may not start runs, send updates, send signals, poll for workflow tasks, poll for "
        "activity tasks in namespace 'default'"
    ) in row["detail"], row
    assert "; it may read runs." in row["detail"], row
    grants(row["detail"], key_file, "Write")
    updates = rows["workflow updates"]  # the cluster's switches: not what refused
    assert updates["status"] == "warn" and "may not send updates" in updates["detail"], updates
    assert [name for name, r in rows.items() if r["status"] == "fail"] == ["permissions"]
    refused = {path.rsplit("/", 1)[1] for _, path in authorizer.refusals.decided}  # type: ignore[union-attr]
    assert "StartWorkflowExecution" in refused  # asked, and refused: nothing was started


async def test_a_worker_whose_key_may_not_poll_refuses_to_start_in_one_line(
    authorizer: RefusingFrontend, settings: Settings, llm: ScriptedLLM, tmp_path: Path
):
    key_file = tmp_path / "key"
    key_file.write_text("k-read")
    queue = f"locked-{uuid.uuid4().hex[:8]}"
    env = cli_env(authorizer, settings, llm, key_file, queue)
    done = await starter_async("worker", env=env, cwd=tmp_path, seconds=HANG_GUARD)
    assert done.code not in (0, None), done.describe()
    line = said_once(done.stderr)
    assert f"poll for workflow tasks on task queue {queue!r} (PollWorkflowTaskQueue)" in line
    grants(line, key_file, "Write")


def test_a_worker_whose_key_is_revoked_while_it_runs_stops_saying_why_once(
    authorizer: RefusingFrontend, settings: Settings, llm: ScriptedLLM, tmp_path: Path
):
    """The SDK retries refused polls for a minute without a word, then fails the worker with
    a traceback; the worker exits non-zero with one line naming the renewal instead."""
    key_file = tmp_path / "key"
    key_file.write_text("k-write")
    queue = f"revoked-{uuid.uuid4().hex[:8]}"
    env = cli_env(authorizer, settings, llm, key_file, queue)
    log = tmp_path / "worker.log"
    worker = start_worker(env, log, command=("starter.py", "worker"))
    try:
        key_file.write_text("k-revoked")
        code = worker.wait(SDK_POLL_GRACE + HANG_GUARD)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        stop(worker)
    text = log.read_text()
    assert code not in (0, None), text[-3000:]
    assert "Traceback" not in text and "Status {" not in text, text[-3000:]  # nor the core's
    *warned, last = [line for line in text.splitlines() if "Jwt verification fails" in line]
    assert last.startswith("error: the worker stopped: Temporal did not accept the API key")
    assert f"on task queue {queue!r}" in last and f"write a valid one into {key_file}" in last
    assert len(warned) <= 1, text[-3000:]  # its heartbeat's refusal, when one came first
    for line in warned:
        assert "Temporal did not accept the API key in TEMPORAL_API_KEY_FILE" in line, line
        assert "the worker stops within about a minute unless that is done" in line, line
