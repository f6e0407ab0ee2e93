"""deploy/kubernetes/worker.yaml hangs together (parsed, not applied: no cluster here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

MANIFEST = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "worker.yaml"
SECRET_WORDS = ("KEY", "PASSWORD", "TOKEN", "DATABASE_URL")


@pytest.fixture(scope="module")
def objects() -> dict[tuple[str, str], dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def one(objects, kind: str) -> dict[str, Any]:
    (found,) = [o for (k, _), o in objects.items() if k == kind]
    return found


def container(objects, kind: str) -> dict[str, Any]:
    (only,) = one(objects, kind)["spec"]["template"]["spec"]["containers"]
    return only


def env_sources(objects, spec: dict[str, Any]) -> dict[str, str]:
    """The variables a container gets from its ConfigMaps and Secrets."""
    values: dict[str, str] = {}
    for source in spec.get("envFrom", []):
        if "configMapRef" in source:
            values.update(objects[("ConfigMap", source["configMapRef"]["name"])]["data"])
        if "secretRef" in source:
            values.update(objects[("Secret", source["secretRef"]["name"])]["stringData"])
    return values


def test_worker_serves_health_and_metrics_on_the_configured_port(objects):
    worker = container(objects, "Deployment")
    env = env_sources(objects, worker)
    port = int(env["REACTIVE_TEMPORAL_METRICS_PORT"])
    (metrics,) = [p for p in worker["ports"] if p["name"] == "metrics"]
    assert metrics["containerPort"] == port
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        check = worker[probe]["httpGet"]
        assert check["path"] == "/healthz" and check["port"] in ("metrics", port), probe
    annotations = one(objects, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(port)
    assert annotations["prometheus.io/path"] == "/metrics"


def test_sigterm_drain_fits_inside_the_termination_grace_period(objects):
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    command = container(objects, "Deployment")["command"]
    assert command[:2] == ["python", "worker.py"]
    drain = int(command[command.index("--graceful-shutdown") + 1])
    assert 0 < drain < pod["terminationGracePeriodSeconds"]
    rollout = one(objects, "Deployment")["spec"]["strategy"]["rollingUpdate"]
    assert rollout["maxUnavailable"] == 0, "a rollout must not stop workers before new ones poll"


def test_keys_live_in_secrets_and_config_in_the_configmap(objects):
    worker = container(objects, "Deployment")
    env = env_sources(objects, worker)
    for name in ("DATABASE_URL", "OPENAI_API_KEY", "TEMPORAL_API_KEY"):
        assert name in env, name
    for (kind, _), obj in objects.items():
        if kind == "ConfigMap":
            leaked = [k for k in obj["data"] if any(w in k for w in SECRET_WORDS)]
            assert not leaked, f"secrets in a ConfigMap: {leaked}"
    for key in ("TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_TASK_QUEUE"):
        assert key in env


def test_workers_use_the_read_write_role_and_migrations_the_owner(objects):
    worker_env = env_sources(objects, container(objects, "Deployment"))
    assert urlsplit(worker_env["DATABASE_URL"]).username == "agents_worker"
    job = container(objects, "Job")
    assert job["command"] == ["python", "starter.py", "migrate"]
    assert urlsplit(env_sources(objects, job)["DATABASE_URL"]).username == "agents_migrator"


def test_worker_versioning_is_configured(objects):
    env = env_sources(objects, container(objects, "Deployment"))
    assert env["TEMPORAL_DEPLOYMENT_NAME"]
    assert env["TEMPORAL_WORKER_BUILD_ID"]


def test_pods_run_unprivileged(objects):
    for kind in ("Deployment", "Job"):
        pod = one(objects, kind)["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] != 0
