"""Worker Versioning: a worker with a deployment name and build id serves runs once its build is
the deployment's current version, and the runs record that build and their behaviour."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import VersioningBehavior
from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    SetWorkerDeploymentCurrentVersionRequest,
)
from temporalio.client import Client

from reactive_temporal.embedded.scripted_llm import ScriptedLLM
from tests.conftest import wait_for
from tests.processes import REPO, start_worker, stop, worker_env

pytestmark = pytest.mark.e2e


async def test_a_versioned_worker_serves_its_build_and_runs_auto_upgrade(
    client: Client, temporal_address: str, database_url: str, llm: ScriptedLLM, tmp_path: Path
):
    deployment = f"agents-{uuid.uuid4().hex[:6]}"
    env = {
        **worker_env(
            temporal_address, database_url, llm.base_url, f"ver-{uuid.uuid4().hex[:8]}", tmp_path
        ),
        "TEMPORAL_DEPLOYMENT_NAME": deployment,  # the name from the environment…
    }
    worker = start_worker(env, tmp_path / "worker.log", "--build-id", "build-1")  # …the build
    run = None
    try:
        assert f"deployment '{deployment}' build 'build-1'" in (tmp_path / "worker.log").read_text()

        async def registered() -> bool:
            try:
                await client.workflow_service.describe_worker_deployment(
                    DescribeWorkerDeploymentRequest(
                        namespace=client.namespace, deployment_name=deployment
                    )
                )
            except Exception:
                return False
            return True

        await wait_for(registered, seconds=60)
        await client.workflow_service.set_worker_deployment_current_version(
            SetWorkerDeploymentCurrentVersionRequest(
                namespace=client.namespace, deployment_name=deployment, build_id="build-1"
            )
        )
        run = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, str(REPO / "starter.py"), "run", "What is 6 * 7?", "--json"],
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        stop(worker)
    assert run is not None and run.returncode == 0, run.stderr if run else ""
    run_id = json.loads(run.stdout)["run_id"]
    described = await client.get_workflow_handle(run_id).describe()
    info = described.raw_description.workflow_execution_info.versioning_info
    assert info.behavior == VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE
    assert info.deployment_version.deployment_name == deployment
    assert info.deployment_version.build_id == "build-1"


def test_a_deployment_name_without_a_build_id_is_refused(tmp_path: Path):
    env = {
        **worker_env("127.0.0.1:1", "postgresql://x@127.0.0.1:1/x", "http://x", "q", tmp_path),
        "TEMPORAL_DEPLOYMENT_NAME": "agents",
    }
    proc = subprocess.run(
        [sys.executable, str(REPO / "worker.py")],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "TEMPORAL_WORKER_BUILD_ID" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
