"""A Temporal authorizer before the dev server: each call decided by the API key it carries.

    keys = {"k-write": WRITE, "k-read": READ, "k-other": NONE}
    with RefusingFrontend(server.address, Authorizer(keys)) as front:
        ...  # clients with TEMPORAL_API_KEY(_FILE)=k-read reach it at front.address

The dev server has no authorizer (`temporal server start-dev` takes no claim mapper), so this
policy of `tests/support/refusing_frontend.py` answers as one does, word for word:

- a self-hosted frontend's authorization interceptor (`common/authorization/interceptor.go`)
  refuses a call its authorizer denies, and a token its claim mapper cannot read, with
  PERMISSION_DENIED "Request unauthorized." (the denial's reason, when the authorizer gives
  one, in the PermissionDeniedFailure detail); it never says UNAUTHENTICATED. The default
  authorizer always lets GetSystemInfo and the health check through, lets a namespace's
  readers call the read-only APIs of `common/api/metadata.go`, and its writers the rest.
- Temporal Cloud answers an identity without the namespace permission the same way, with the
  reason "caller has insufficient permissions for namespace '<ns>'" (seen in
  temporalio/sdk-typescript#1765), and a missing, invalid, expired or revoked API key with
  UNAUTHENTICATED at its edge, GetSystemInfo included ("Jwt is missing", seen from
  us-east4.gcp.api.temporal.io; "Jwt verification fails" and "Jwt is expired" are that
  edge's other words).

A key's role here holds for the one namespace the tests use: a key of another namespace is
NONE. `cloud=False` answers as a self-hosted cluster (no reason, bad keys PERMISSION_DENIED).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tests.support.refusing_frontend import PERMISSION_DENIED, UNAUTHENTICATED, Refusal

WORKFLOW_SERVICE = "/temporal.api.workflowservice.v1.WorkflowService/"
OPERATOR_SERVICE = "/temporal.api.operatorservice.v1.OperatorService/"
ALWAYS_ALLOWED = frozenset(
    {WORKFLOW_SERVICE + "GetSystemInfo", "/grpc.health.v1.Health/Check"}
)  # fmt: skip
"""The default authorizer's `healthCheckAPI`: allowed to every caller, with claims or none."""
READ_ONLY = frozenset(
    {
        WORKFLOW_SERVICE + name
        for name in (
            "DescribeNamespace", "ListNamespaces", "GetWorkflowExecutionHistory",
            "GetWorkflowExecutionHistoryReverse", "ListOpenWorkflowExecutions",
            "ListClosedWorkflowExecutions", "ListWorkflowExecutions",
            "ListArchivedWorkflowExecutions", "ScanWorkflowExecutions", "CountWorkflowExecutions",
            "GetSearchAttributes", "QueryWorkflow", "DescribeWorkflowExecution",
            "DescribeTaskQueue", "GetClusterInfo", "ListTaskQueuePartitions", "DescribeSchedule",
            "ListScheduleMatchingTimes", "ListSchedules", "GetWorkerBuildIdCompatibility",
            "GetWorkerTaskReachability", "PollWorkflowExecutionUpdate", "DescribeBatchOperation",
            "ListBatchOperations",
        )
    }
    | {OPERATOR_SERVICE + "ListSearchAttributes"}
)  # fmt: skip
"""`AccessReadOnly` in the server's `common/api/metadata.go`: what a namespace reader may call."""

WRITE, READ, NONE, REVOKED = "write", "read", "none", "revoked"
TEST_KEYS = {"k-write": WRITE, "k-read": READ, "k-other-namespace": NONE}
"""The keys the access tests give: one that may write, one that may only read, one of another
namespace (tests/e2e/conftest.py's `authorizer`)."""
UNAUTHORIZED = "Request unauthorized."
NO_KEY, BAD_KEY = "Jwt is missing", "Jwt verification fails"


@dataclass
class Authorizer:
    """Decides each call by its `authorization: Bearer <key>` header and the key's role."""

    keys: Mapping[str, str]
    """API key: WRITE, READ, NONE (valid, no permission on the namespace) or REVOKED."""
    namespace: str = "default"
    cloud: bool = True
    decided: list[tuple[str, str]] = field(default_factory=list)
    """(key's role or "anonymous", method) of each call it refused."""

    def __call__(self, path: str, headers: Mapping[bytes, bytes]) -> Refusal | None:
        bearer = headers.get(b"authorization", b"").decode()
        key = bearer.removeprefix("Bearer ").strip() if bearer.startswith("Bearer ") else ""
        role = self.keys.get(key, REVOKED) if key else None
        refusal = self._refusal(path, role)
        if refusal is not None:
            self.decided.append((role or "anonymous", path))
        return refusal

    def _refusal(self, path: str, role: str | None) -> Refusal | None:
        if role in (None, REVOKED) and self.cloud:  # Cloud's edge: every call, no exception
            return (UNAUTHENTICATED, NO_KEY if role is None else BAD_KEY)
        if path in ALWAYS_ALLOWED or role == WRITE or (role == READ and path in READ_ONLY):
            return None
        if role in (None, REVOKED) or not self.cloud:
            return (PERMISSION_DENIED, UNAUTHORIZED)
        return (
            PERMISSION_DENIED,
            UNAUTHORIZED,
            f"caller has insufficient permissions for namespace '{self.namespace}'",
        )
