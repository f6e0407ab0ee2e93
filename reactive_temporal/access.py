"""Calls a Temporal cluster's authorizer refuses, said in words an operator can act on.

A cluster with an authorizer (Temporal Cloud; a self-hosted one with a claim mapper and an
authorizer) answers a call it will not take from this caller with PERMISSION_DENIED, and
Temporal Cloud a missing, invalid, expired or revoked API key with UNAUTHENTICATED. The SDK
raises either as a bare RPCError ("Request unauthorized."), which names neither the call, the
namespace, the credentials in use nor what to grant. Here each becomes a
TemporalPermissionDenied or TemporalCredentialsRejected that does, built in one place from the
call (`Operation`) and the connection (`TemporalConnection`), and never holding a secret.

The servers' words (read in their source; `tests/support/authorizer.py` answers the same):
- a self-hosted frontend's authorization interceptor (`common/authorization/interceptor.go`)
  answers "Request unauthorized." to a call its authorizer denies and to a token its claim
  mapper cannot read alike (the authorizer's reason, if any, in the PermissionDeniedFailure
  detail). Its default authorizer lets a namespace's readers call the read-only APIs of
  `common/api/metadata.go` and its writers the rest; GetSystemInfo always passes, so a client
  connects and its first real call is refused.
- Temporal Cloud says the same, with the reason "caller has insufficient permissions for
  namespace '<ns>'", and refuses a bad API key at its edge, GetSystemInfo included
  (UNAUTHENTICATED "Jwt is missing").
- The frontend's switches answer PERMISSION_DENIED too ("… is disabled on this namespace.",
  `cluster_switches.py`): those are no authorizer's, and are left to their own handling.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NamedTuple

from temporalio.api.errordetails.v1 import PermissionDeniedFailure
from temporalio.service import RPCError, RPCStatusCode

if TYPE_CHECKING:  # connection.py reads this module's words for a refused connect
    from reactive_temporal.connection import TemporalConnection

Access = Literal["read", "write", "admin"]
Kind = Literal["permission", "credentials"]


@dataclass(frozen=True)
class Operation:
    """A call as the message names it: what it does, the API, the access it needs."""

    action: str
    """In words: "start a run", "send the update 'chat'", "list workflows"."""
    api: str
    """The gRPC method: StartWorkflowExecution, ListWorkflowExecutions, …"""
    access: Access

    def said(self) -> str:
        return f"{self.action} ({self.api})"


READ_ONLY_APIS = frozenset(
    {
        "DescribeNamespace", "GetWorkflowExecutionHistory", "GetWorkflowExecutionHistoryReverse",
        "ListWorkflowExecutions", "CountWorkflowExecutions", "QueryWorkflow",
        "DescribeWorkflowExecution", "DescribeTaskQueue", "ListSearchAttributes",
        "PollWorkflowExecutionUpdate", "ListSchedules", "DescribeSchedule",
    }
)  # fmt: skip
"""The APIs this project calls that `common/api/metadata.go` marks AccessReadOnly."""
ADMIN_APIS = frozenset({"AddSearchAttributes"})


def operation(action: str, api: str) -> Operation:
    """`action` through `api`, with the access the server's metadata gives that API."""
    access: Access = "read" if api in READ_ONLY_APIS else "admin" if api in ADMIN_APIS else "write"
    return Operation(action, api, access)


class TemporalAccessDenied(RPCError):
    """Temporal refused a call for who is calling: its authorizer, or its authentication.

    Still an RPCError with the server's status (PERMISSION_DENIED or UNAUTHENTICATED), so code
    that catches RPCError goes on catching it; `str()` and `message` say what was refused, in
    which namespace, for which credentials (where they come from, never the secret) and what
    to do. Sent again, it would be refused again: nothing waits it out.
    """

    def __init__(
        self,
        message: str,
        status: RPCStatusCode,
        raw_grpc_status: bytes,
        *,
        operation: Operation,
        namespace: str,
        credentials: str,
        server_message: str,
    ) -> None:
        super().__init__(message, status, raw_grpc_status)
        self.operation = operation
        self.namespace = namespace
        self.credentials = credentials
        """Which credentials were sent ("the API key in TEMPORAL_API_KEY_FILE (/path)")."""
        self.server_message = server_message
        """The server's own words (and its reason, when it gave one)."""


class TemporalPermissionDenied(TemporalAccessDenied):
    """PERMISSION_DENIED: the credentials were read, and they may not make this call."""


class TemporalCredentialsRejected(TemporalAccessDenied):
    """UNAUTHENTICATED: the credentials were not accepted (invalid, expired or revoked)."""


FEATURE_SWITCHED_OFF = re.compile(r"\b(is|are) disabled\b|\bdisabled on this namespace\b", re.I)
"""How the frontend words a feature its dynamic config switched off (PERMISSION_DENIED too)."""


def refusal_kind(status: RPCStatusCode, message: str) -> Kind | None:
    """ "permission" for an authorizer's PERMISSION_DENIED, "credentials" for UNAUTHENTICATED,
    None for anything else (a switched-off feature's PERMISSION_DENIED included)."""
    if status == RPCStatusCode.UNAUTHENTICATED:
        return "credentials"
    if status == RPCStatusCode.PERMISSION_DENIED and not FEATURE_SWITCHED_OFF.search(message):
        return "permission"
    return None


def server_words(err: RPCError) -> str:
    """The server's message, and its PermissionDeniedFailure's reason when it gave one."""
    said = repr(err.message)
    for detail in err.grpc_status.details if err.raw_grpc_status else ():
        failure = PermissionDeniedFailure()
        if detail.Unpack(failure) and failure.reason:
            said += f" ({failure.reason})"
    return said


def access_denied(
    err: BaseException, operation: Operation, connection: TemporalConnection
) -> TemporalAccessDenied | None:
    """`err` as the access refusal it is, for `operation` on `connection`; else None."""
    if isinstance(err, TemporalAccessDenied) or not isinstance(err, RPCError):
        return None
    kind = refusal_kind(err.status, err.message)
    if kind is None:
        return None
    return refused(kind, operation, connection, server_words(err), err.status, err.raw_grpc_status)


def refused(
    kind: Kind,
    operation: Operation,
    connection: TemporalConnection,
    said: str,
    status: RPCStatusCode | None = None,
    raw_grpc_status: bytes = b"",
) -> TemporalAccessDenied:
    """The error for a refusal of `kind` of `operation`, the server having `said` so."""
    namespace = connection.namespace
    who = credentials_of(connection)
    if kind == "credentials":
        message = (
            f"Temporal did not accept {who} to {operation.said()} in namespace {namespace!r}: "
            f"{said}. {renewal_hint(connection)}"
        )
        error_type: type[TemporalAccessDenied] = TemporalCredentialsRejected
        status = status or RPCStatusCode.UNAUTHENTICATED
    else:
        message = (
            f"Temporal refused to {operation.said()} in namespace {namespace!r} for {who}: "
            f"{said}. {grant_hint(operation.access, connection)}"
        )
        error_type = TemporalPermissionDenied
        status = status or RPCStatusCode.PERMISSION_DENIED
    return error_type(
        message,
        status,
        raw_grpc_status,
        operation=operation,
        namespace=namespace,
        credentials=who,
        server_message=said,
    )


def credentials_of(connection: TemporalConnection) -> str:
    """Which credentials the connection sends, by where they come from; never the secret."""
    if connection.api_key:
        where = f" ({connection.api_key_file})" if connection.api_key_file else ""
        return f"the API key in {_key_setting(connection)}{where}"
    if connection.client_cert_source:
        subject = _subject(connection.client_cert)
        return f"the client certificate {connection.client_cert_source}{subject}"
    return "this client, which sends no credentials (no API key, no client certificate)"


def _key_setting(connection: TemporalConnection) -> str:
    if connection.api_key_setting:
        return connection.api_key_setting
    return "TEMPORAL_API_KEY_FILE" if connection.api_key_file else "TEMPORAL_API_KEY"


def cloud(connection: TemporalConnection) -> bool:
    """The address is Temporal Cloud's (a namespace endpoint or a regional API endpoint)."""
    host = (connection.address or "").rpartition(":")[0].lower()
    return host.endswith((".tmprl.cloud", ".api.temporal.io"))


CLOUD_PERMISSION = {"read": "Read", "write": "Write", "admin": "Namespace Admin"}


def grant_hint(access: Access, connection: TemporalConnection) -> str:
    """What to grant (or configure) so the call is taken, on Cloud and self-hosted."""
    namespace = connection.namespace
    if not connection.api_key and not connection.client_cert_source:
        return (
            "The cluster takes no call from an anonymous client: configure the identity it "
            "grants, TEMPORAL_API_KEY_FILE (or TEMPORAL_API_KEY), or a client certificate "
            "(TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH)"
        )
    on_cloud = (
        f"give its identity (user or service account) the {CLOUD_PERMISSION[access]} "
        f"permission on namespace {namespace!r}"
    )
    self_hosted = (
        f"have the cluster's claim mapper grant it {namespace}:{access} (the default JWT claim "
        "mapper reads the token's `permissions` claim; a custom authorizer, its own rules)"
    )
    needs = f"This needs {access} access: "
    if cloud(connection) and not connection.api_key:  # Cloud takes a certificate by its CA
        return (
            f"Temporal Cloud takes a client certificate on namespace {namespace!r} when the "
            "namespace accepts the CA that issued it and its certificate filters match it: add "
            "that CA to the namespace's CA certificates, or widen its filters"
        )
    if cloud(connection):
        return needs + on_cloud
    if not connection.api_key:  # a certificate's identity, read by a claim mapper
        return needs + self_hosted
    # an API key elsewhere: a self-hosted JWT, or Cloud behind a private endpoint's name
    return f"{needs}on Temporal Cloud, {on_cloud}; on a self-hosted cluster, {self_hosted}"


def renewal_hint(connection: TemporalConnection) -> str:
    """What renews credentials the cluster no longer accepts, and whether a restart is due."""
    if connection.api_key_file:
        return (
            "The key is invalid, expired or revoked: write a valid one into "
            f"{connection.api_key_file} (TEMPORAL_API_KEY_FILE); a running worker or Python API "
            "process reads it again when it changes, without a restart"
        )
    if connection.api_key:
        return (
            f"The key is invalid, expired or revoked: set {_key_setting(connection)} to a "
            "valid one and restart (with TEMPORAL_API_KEY_FILE instead, running processes take "
            "a renewed key without a restart)"
        )
    if connection.client_cert_source:
        return (
            f"Renew the client certificate {connection.client_cert_source}: running processes "
            "take renewed TLS files without a restart"
        )
    return (
        "This client sends no credentials: set TEMPORAL_API_KEY_FILE (or TEMPORAL_API_KEY), or "
        "a client certificate (TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH)"
    )


def _subject(pem: bytes | None) -> str:
    """` (CN=…)`: the certificate's subject, the identity an mTLS claim mapper reads."""
    if not pem:
        return ""
    from cryptography import x509  # a certificate's, only: not every process loads it

    try:
        return f" ({x509.load_pem_x509_certificate(pem).subject.rfc4514_string()})"
    except ValueError:
        return ""


# -- the core's words: a worker's polls and start -----------------------------------------------

_CORE_STATUS = re.compile(r'code: (PermissionDenied|Unauthenticated), message: "((?:[^"\\]|\\.)*)"')
_CORE_CODES = {
    "PermissionDenied": RPCStatusCode.PERMISSION_DENIED,
    "Unauthenticated": RPCStatusCode.UNAUTHENTICATED,
}


class CoreRefusal(NamedTuple):
    kind: Kind
    status: RPCStatusCode
    message: str
    """The server's words."""


def core_refusal(text: str) -> CoreRefusal | None:
    """The access refusal in the core's error text, as a worker's fatal poll error, its
    start's namespace check or a failed connect says it (`Status { code: PermissionDenied,
    message: "Request unauthorized.", … }`); else None."""
    found = _CORE_STATUS.search(text)
    if found is None:
        return None
    status, message = _CORE_CODES[found.group(1)], found.group(2).replace('\\"', '"')
    kind = refusal_kind(status, message)
    return CoreRefusal(kind, status, message) if kind is not None else None
