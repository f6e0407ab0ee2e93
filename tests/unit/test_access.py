"""An authorizer's refusal told from every other error, and said for the credentials in use
(`reactive_temporal/access.py`): what was refused, where, for whom (never the secret), and
what to grant or renew; the core's words for a worker's refused polls read the same way."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from google.protobuf.any_pb2 import Any as AnyProto
from google.rpc.status_pb2 import Status
from temporalio.api.errordetails.v1 import PermissionDeniedFailure
from temporalio.service import RPCError, RPCStatusCode, TLSConfig

from reactive_temporal.access import (
    TemporalCredentialsRejected,
    TemporalPermissionDenied,
    access_denied,
    core_refusal,
    operation,
    refusal_kind,
)
from reactive_temporal.connection import TemporalConnection, load_connection
from reactive_temporal.hosting.refusal_logs import RefusalLogs
from tests.support.pki import make_pki

DENIED, UNAUTHENTICATED = RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.UNAUTHENTICATED
START = operation("start a run", "StartWorkflowExecution")
LIST = operation("list workflows", "ListWorkflowExecutions")
CLOUD_REASON = "caller has insufficient permissions for namespace 'agents'"
# Recorded from the SDK (1.35) behind the authorizer front (tests/support/authorizer.py):
POLL_FAILURE = (
    "Poll failure: Unhandled grpc error when polling: Status { code: PermissionDenied, message: "
    '"Request unauthorized.", details: b"\\x08\\x07\\x12\\x15Request unauthorized.\\x1aJ\\nHtype.'
    'googleapis.com/temporal.api.errordetails.v1.PermissionDeniedFailure", metadata: MetadataMap '
    '{ headers: {"content-type": "application/grpc"} }, source: None }'
)
HEARTBEAT = (
    "[sdk_core::temporalio_sdk_core::worker::heartbeat] Network error while sending worker "
    "heartbeat {'error': 'Status { code: Unauthenticated, message: \"Jwt verification fails\", "
    'metadata: MetadataMap { headers: {"content-type": "application/grpc"} }, source: None }\'}'
)


def denied(message: str = "Request unauthorized.", reason: str = "") -> RPCError:
    """PERMISSION_DENIED as the server sends it: its PermissionDeniedFailure detail too."""
    detail = AnyProto()
    detail.Pack(PermissionDeniedFailure(reason=reason))
    status = Status(code=7, message=message, details=[detail])
    return RPCError(message, DENIED, status.SerializeToString())


def key_file_connection(tmp_path: Path, address: str = "agents.a1b2c.tmprl.cloud:7233"):
    key = tmp_path / "temporal-api-key"
    key.write_text("s3cret-key\n")
    return load_connection(
        environ={
            "TEMPORAL_ADDRESS": address,
            "TEMPORAL_NAMESPACE": "agents",
            "TEMPORAL_API_KEY_FILE": str(key),
        }
    )


@pytest.mark.parametrize(
    ("status", "message", "kind"),
    [
        (DENIED, "Request unauthorized.", "permission"),
        (DENIED, "unexpected authorization token format", "permission"),  # a claim mapper's
        (UNAUTHENTICATED, "Jwt is missing", "credentials"),
        (DENIED, "UpdateWorkflowExecution operation is disabled on this namespace.", None),
        (DENIED, "ExecuteMultiOperation API is disabled on this namespace.", None),
        (DENIED, "Deployments are disabled on this namespace.", None),
        (RPCStatusCode.NOT_FOUND, "workflow not found for ID: x", None),
    ],
)
def test_an_authorizers_refusal_is_told_from_a_switched_off_feature(status, message, kind):
    assert refusal_kind(status, message) == kind


def test_a_refusal_names_the_call_the_namespace_the_key_file_and_what_cloud_grants(
    tmp_path: Path,
):
    connection = key_file_connection(tmp_path)
    err = access_denied(denied(reason=CLOUD_REASON), START, connection)
    assert isinstance(err, TemporalPermissionDenied) and isinstance(err, RPCError)
    assert err.status == DENIED and err.operation == START and err.namespace == "agents"
    said = str(err)
    assert said.startswith(
        "Temporal refused to start a run (StartWorkflowExecution) in namespace 'agents' for the "
        f"API key in TEMPORAL_API_KEY_FILE ({tmp_path / 'temporal-api-key'}): "
        f"'Request unauthorized.' ({CLOUD_REASON}). This needs write access: give its identity "
        "(user or service account) the Write permission on namespace 'agents'"
    ), said
    assert "self-hosted" not in said  # the address is Temporal Cloud's
    assert "s3cret" not in said and "\n" not in said


def test_elsewhere_both_clouds_and_a_self_hosted_authorizers_grants_are_said(tmp_path: Path):
    connection = key_file_connection(tmp_path, address="temporal.internal:7233")
    said = str(access_denied(denied(), LIST, connection))
    assert "This needs read access: on Temporal Cloud, give" in said and "Read permission" in said
    assert "on a self-hosted cluster, have the cluster's claim mapper grant it agents:read" in said


def test_each_source_of_credentials_is_named_and_never_the_secret(tmp_path: Path):
    env_key = load_connection(environ={"TEMPORAL_ADDRESS": "a:1", "TEMPORAL_API_KEY": "s3cret-key"})
    said = str(access_denied(RPCError("Jwt is expired", UNAUTHENTICATED, b""), LIST, env_key))
    assert "Temporal did not accept the API key in TEMPORAL_API_KEY to list workflows" in said
    assert "set TEMPORAL_API_KEY to a valid one and restart" in said and "s3cret" not in said

    pki = make_pki(tmp_path / "pki")
    mtls = TemporalConnection(
        address="temporal.internal:7233",
        tls=TLSConfig(client_cert=pki.client_cert.read_bytes()),
        client_cert_source=str(pki.client_cert),
    )
    said = str(access_denied(denied(), START, mtls))
    assert f"for the client certificate {pki.client_cert} (CN=reactive-temporal worker)" in said
    assert "claim mapper grant it default:write" in said and "Temporal Cloud" not in said
    cloud_mtls = TemporalConnection(
        address="agents.a1b2c.tmprl.cloud:7233", tls=True, client_cert_source="/c/client.pem"
    )
    said = str(access_denied(denied(), START, cloud_mtls))
    assert "accepts the CA that issued it" in said

    anonymous = TemporalConnection(address="temporal.internal:7233")
    said = str(access_denied(denied(), START, anonymous))
    assert "for this client, which sends no credentials" in said
    assert "configure the identity it grants, TEMPORAL_API_KEY_FILE" in said


def test_the_key_files_renewal_needs_no_restart(tmp_path: Path):
    connection = key_file_connection(tmp_path)
    err = access_denied(RPCError("Jwt is expired", UNAUTHENTICATED, b""), LIST, connection)
    assert isinstance(err, TemporalCredentialsRejected) and err.status == UNAUTHENTICATED
    assert f"write a valid one into {tmp_path / 'temporal-api-key'}" in str(err)
    assert "without a restart" in str(err)


def test_other_errors_are_left_as_they_are(tmp_path: Path):
    connection = key_file_connection(tmp_path)
    switched_off = denied("UpdateWorkflowExecution operation is disabled on this namespace.")
    assert access_denied(switched_off, START, connection) is None
    assert access_denied(ValueError("no"), START, connection) is None
    mapped = access_denied(denied(), START, connection)
    assert mapped is not None
    assert access_denied(mapped, LIST, connection) is None  # said once, not wrapped again


def test_the_cores_words_for_a_workers_refused_calls_are_read():
    assert core_refusal(POLL_FAILURE) == (
        "permission", DENIED, "Request unauthorized."
    )  # fmt: skip
    assert core_refusal(HEARTBEAT) == ("credentials", UNAUTHENTICATED, "Jwt verification fails")
    assert core_refusal('Status { code: Unavailable, message: "transport error" }') is None


def test_a_workers_log_says_the_first_refusal_clearly_and_drops_the_rest(tmp_path: Path):
    connection = key_file_connection(tmp_path)
    quiet = RefusalLogs(connection, "agents-queue")

    def record(message: str, exc: BaseException | None = None) -> logging.LogRecord:
        info = (type(exc), exc, None) if exc is not None else None
        return logging.LogRecord("temporalio.core", logging.WARNING, "", 0, message, None, info)

    first = record(HEARTBEAT)
    assert quiet.filter(first)
    said = first.getMessage()
    assert (
        said.startswith("Temporal did not accept the API key in TEMPORAL_API_KEY_FILE")
        and "(RecordWorkerHeartbeat)" in said
    ), said
    assert "the worker stops within about a minute unless that is done" in said
    assert not quiet.filter(record(HEARTBEAT))  # said once
    failed = RuntimeError("Workflow worker failed")
    failed.__cause__ = RuntimeError(POLL_FAILURE)
    assert not quiet.filter(record("Worker failed, shutting down", failed))  # its traceback
    assert quiet.filter(record("Worker failed, shutting down", RuntimeError("other")))
    assert quiet.filter(record("gRPC call poll_workflow_task_queue retried 8 times"))
    # the stop it announced: the core's dropped connections as it shuts down (seen in CI)
    shutdown = (
        "[sdk_core::temporalio_sdk_core::worker] shutdown_worker rpc errored during worker "
        'shutdown: Status { code: Unknown, message: "transport error" } {}'
    )
    assert not quiet.filter(record(shutdown))
    assert RefusalLogs(connection, "q").filter(record(shutdown))  # no refusal said: shown
