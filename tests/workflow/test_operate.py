"""What operators see and do: Web UI metadata, search attributes, `runs`, `rerun`."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest
from google.protobuf.duration_pb2 import Duration
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
from temporalio.client import Client

from reactive_temporal import search_attributes as sa
from reactive_temporal.config import Settings
from reactive_temporal.contracts.run import RunProgress
from reactive_temporal.embedded.scripted_llm import HttpError, Reply, ScriptedLLM, call
from tests.conftest import wait_for
from tests.processes import PYTHON, REPO, clean_env
from tests.workflow.conftest import Harness, running_worker

pytestmark = pytest.mark.workflow


async def cli(harness: Harness, temporal_address: str, tmp_path: Path, *args: str):
    """Run starter.py without blocking this loop (the worker lives in this process)."""
    env = clean_env(
        TEMPORAL_ADDRESS=temporal_address,
        TEMPORAL_TASK_QUEUE=harness.task_queue,
        REACTIVE_TEMPORAL_DATA_DIR=str(tmp_path),
        COLUMNS="80",  # a standard terminal
    )
    proc = await asyncio.create_subprocess_exec(
        PYTHON, str(REPO / "starter.py"), *args, env=env, cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout=120)
    return proc.returncode, stdout.decode(), stderr.decode()


async def summaries_of_activities(client: Client, workflow_id: str) -> list[str]:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    out = []
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            [summary] = await client.data_converter.decode([event.user_metadata.summary], [str])
            out.append(summary)
    return out


async def test_web_ui_sees_summary_details_activity_summaries_and_attributes(
    harness: Harness, client: Client, llm: ScriptedLLM, model_name
):
    agent_id = f"ui-{uuid.uuid4().hex[:6]}"
    llm.script(
        model_name,
        [
            Reply(None, [call("calculator", expression="2+2")]),
            Reply("FINAL ANSWER: 4", delay=5),
        ],
    )
    handle = await harness.start(model_name, "Add two and two", agent_id=agent_id)
    description = await handle.describe()
    assert await description.static_summary() == "Add two and two"
    assert f"agent `{agent_id}`" in (await description.static_details() or "")

    async def on_second_iteration() -> bool:
        return (await handle.query("progress", result_type=RunProgress)).iteration == 1

    await wait_for(on_second_iteration, seconds=60)
    metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    assert "iteration 1/10" in metadata.current_details
    assert "last tool: calculator" in metadata.current_details
    result = await handle.result()

    summaries = await summaries_of_activities(client, handle.id)
    # (prepare_run is a local activity now: a marker, not a scheduled activity)
    assert summaries[0].startswith("llm · iteration 1 · ")
    assert summaries[1] == 'tool calculator("expression": "2+2")'
    assert summaries[2].startswith("llm · iteration 2 · ")
    assert summaries[2].endswith("tokens so far")
    attrs = (await handle.describe()).typed_search_attributes
    assert attrs.get(sa.AGENT_NAME) == agent_id
    assert attrs.get(sa.TERMINATED_BY) == "final_answer"
    assert attrs.get(sa.OUTCOME) == "success"
    assert attrs.get(sa.ITERATIONS) == 2
    assert attrs.get(sa.TOKENS_USED) == result.metadata.tokens_used
    assert attrs.get(sa.DEBRIEF_STATUS) == "deterministic"  # trivial: kept by the run itself


async def test_workers_on_a_namespace_new_to_us_register_the_attributes_its_runs_carry(
    client: Client, settings: Settings, llm: ScriptedLLM, model_name
):
    """A worker on a namespace that has never seen us registers the search attributes, a
    second worker starts there finding them, and a run there carries them."""
    namespace = f"fresh-{uuid.uuid4().hex[:8]}"
    await client.workflow_service.register_namespace(
        RegisterNamespaceRequest(
            namespace=namespace, workflow_execution_retention_period=Duration(seconds=86_400)
        )
    )
    fresh = await Client.connect(client.service_client.config.target_host, namespace=namespace)
    listed = await fresh.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    assert not set(sa.ALL) & set(listed.custom_attributes)
    llm.script(model_name, [Reply("FINAL ANSWER: 4")])
    async with running_worker(fresh, settings) as first, running_worker(fresh, settings):
        handle = await first.start(model_name, "Add two and two", agent_id="newcomer")
        assert (await handle.result()).output == "4"
    attrs = (await handle.describe()).typed_search_attributes
    assert attrs.get(sa.AGENT_NAME) == "newcomer"
    assert attrs.get(sa.OUTCOME) == "success"
    assert await sa.ensure_registered(fresh, namespace) == []


async def test_runs_json_filters_by_agent(
    harness: Harness, llm: ScriptedLLM, model_name, temporal_address: str, tmp_path: Path
):
    mine, other = f"runs-{uuid.uuid4().hex[:6]}", f"other-{uuid.uuid4().hex[:6]}"
    llm.script(model_name, [Reply("FINAL ANSWER: ok")], repeat_last=True)
    ran = [await harness.run(model_name, f"task {i}", agent_id=mine) for i in range(2)]
    await harness.run(model_name, "not mine", agent_id=other)

    async def listed() -> bool:
        code, stdout, _ = await cli(
            harness, temporal_address, tmp_path, "runs", "--agent", mine, "--json"
        )
        return code == 0 and len(json.loads(stdout)["runs"]) == 2

    await wait_for(listed, seconds=60)  # visibility is eventually consistent
    code, stdout, stderr = await cli(
        harness, temporal_address, tmp_path, "runs", "--agent", mine, "--json"
    )
    runs = json.loads(stdout)["runs"]
    assert {r["run_id"] for r in runs} == {r.run_id for r in ran}
    assert all(r["agent"] == mine and r["status"] == "completed" for r in runs)
    assert all(r["terminated_by"] == "final_answer" and r["outcome"] == "success" for r in runs)
    assert {r["task"] for r in runs} == {"task 0", "task 1"}
    code, stdout, _ = await cli(harness, temporal_address, tmp_path, "runs", "--agent", mine)
    lines = stdout.splitlines()
    assert code == 0 and all(len(line) <= 80 for line in lines), stdout
    assert all(any(r.run_id in line for line in lines) for r in ran), stdout  # never cut
    code, _, stderr = await cli(harness, temporal_address, tmp_path, "runs", "--status", "sleeping")
    assert code == 2 and "unknown status 'sleeping'" in stderr
    code, _, stderr = await cli(harness, temporal_address, tmp_path, "runs", "--agent", "x' OR 1=1")
    assert code == 2 and "invalid agent name" in stderr


async def test_rerun_after_a_non_retryable_llm_error(
    harness: Harness, llm: ScriptedLLM, model_name, temporal_address: str, tmp_path: Path
):
    llm.script(
        model_name,
        [Reply(None, [call("calculator", expression="5*5")]), HttpError(400, "model not found")],
    )
    failed = await harness.run(model_name, "5*5 then answer", memory=False)
    assert failed.terminated_by == "llm_error" and not failed.success

    llm.script(model_name, [Reply("FINAL ANSWER: 25")])  # the model is fixed
    code, stdout, stderr = await cli(
        harness, temporal_address, tmp_path, "rerun", failed.run_id, "--json"
    )
    assert code == 0, stderr
    result = json.loads(stdout)
    assert result["success"] is True and result["output"] == "25"
    assert result["run_id"] == failed.run_id  # the same run, reset to its last good point
    assert "reset" in stderr and "new run id" in stderr
    assert result["metadata"]["iterations"] == 2  # the calculator turn was kept, not redone
    assert len(llm.requests[model_name]) == 3  # the first step was not asked again

    code, _, stderr = await cli(harness, temporal_address, tmp_path, "rerun", failed.run_id)
    assert code == 1 and "no failed step" in stderr


async def test_rerun_from_start(
    harness: Harness, llm: ScriptedLLM, model_name, temporal_address: str, tmp_path: Path
):
    llm.script(model_name, [HttpError(400, "bad"), Reply("FINAL ANSWER: again")])
    failed = await harness.run(model_name, "try twice", memory=False)
    code, stdout, stderr = await cli(
        harness, temporal_address, tmp_path, "rerun", failed.run_id, "--from-start", "--json"
    )
    assert code == 0, stderr
    result = json.loads(stdout)
    assert result["output"] == "again" and result["run_id"] != failed.run_id


async def test_replay_and_export_from_the_server(
    harness: Harness, llm: ScriptedLLM, model_name, temporal_address: str, tmp_path: Path
):
    llm.script(model_name, [Reply("FINAL ANSWER: fine")])
    run = await harness.run(model_name, "replay me", memory=False)
    code, stdout, stderr = await cli(
        harness, temporal_address, tmp_path, "replay", run.run_id, "--json"
    )
    assert code == 0, stderr
    assert json.loads(stdout)["ok"] is True
    exported = tmp_path / "h.json"
    code, _, stderr = await cli(
        harness, temporal_address, tmp_path, "export", run.run_id, "-o", str(exported)
    )
    assert code == 0, stderr
    code, stdout, _ = await cli(
        harness, temporal_address, tmp_path, "replay", "--file", str(exported)
    )
    assert code == 0 and "replay cleanly" in stdout
    code, _, stderr = await cli(harness, temporal_address, tmp_path, "replay", "run-missing-1")
    assert code == 1 and "no workflow with id 'run-missing-1'" in stderr
