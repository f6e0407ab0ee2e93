"""`starter.py check`: what a worker would find wrong, found before it is deployed.

An operator otherwise learns of a wrong setting when a worker refuses to start or a run fails:
a certificate not trusted, a namespace misspelt, a database never migrated, a model key
refused. Each check here reads what a worker would read (`Settings`, `WorkerTarget.resolve`)
and asks the server once, read-only: nothing is registered, migrated or written.

A check is a `Check` row: `ok`, `warn` (worth knowing, nothing a worker would fail on) or
`fail`, with a one-line detail that names the setting to change and never a secret. Every
call has its own deadline (`within`), so a server that hangs fails its row, not the command.
A row that depends on one that failed (the schema of a database not reached) is `warn`, "not
checked": the row that failed says why. The model endpoints' checks are `preflight_models`';
the task queue's, which needs the client API, is `api/readiness.py`'s, which runs them all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal, TypeVar

import psycopg
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from activities.migrations import MIGRATIONS
from activities.store import Store, StoreUnavailable
from reactive_temporal.access import TemporalAccessDenied
from reactive_temporal.access_calls import mapped_refusals
from reactive_temporal.config import Settings
from reactive_temporal.connection import TemporalConnection
from reactive_temporal.database_settings import Conninfo
from reactive_temporal.embedded.dev_server import StackError
from reactive_temporal.embedded.stack import connect
from reactive_temporal.hosting.cert_expiry import EXPIRY_WARNING, not_after
from reactive_temporal.hosting.worker_lifecycle import NoServerError, WorkerTarget
from reactive_temporal.search_attributes import create_commands, unregistered

Status = Literal["ok", "warn", "fail"]
T = TypeVar("T")


@dataclass(frozen=True)
class Check:
    """One row of the report: what was checked, how it went, and what to do if not ok."""

    name: str
    status: Status
    detail: str

    def as_json(self) -> dict[str, str]:
        """The row as `--json` prints it."""
        return {"name": self.name, "status": self.status, "detail": self.detail}


def not_checked(name: str, because: str) -> Check:
    """A row that could not be checked because another failed (that one says why)."""
    return Check(name, "warn", f"not checked: {because}")


class Late(Exception):
    """A call passed its deadline; the message says which call and how long it had."""


async def within(seconds: float, call: Awaitable[T], what: str) -> T:
    """`call`, or Late naming `what` when it takes longer than `seconds` (a hanging server)."""
    try:
        return await asyncio.wait_for(call, seconds)
    except TimeoutError:
        raise Late(f"{what} did not answer within {seconds:g} s") from None


@dataclass(frozen=True)
class Targets:
    """What a worker started now would serve, each part alone: a missing Temporal address
    does not stop the database being checked."""

    connection: TemporalConnection | None
    database: Conninfo | None
    database_setting: str
    """The setting that gave `database`, named in what to fix."""
    task_queue: str
    llm_base_url: str | None
    offline_model: bool


NO_DEV_STACK = "and no `python starter.py dev` running here"


def resolve_targets(settings: Settings) -> Targets:
    """`WorkerTarget.resolve`, and when it finds nothing to serve, what is configured."""
    setting = "DATABASE_URL_FILE" if settings.database_url_file else "DATABASE_URL"
    try:
        target = WorkerTarget.resolve(settings)
    except NoServerError:  # no `dev` stack here: only the environment counts
        url = settings.database_url
        return Targets(
            settings.temporal_connection() if settings.temporal_address else None,
            settings.database_conninfo(url) if url else None,
            setting,
            settings.temporal_task_queue,
            settings.openai_base_url,
            settings.uses_offline_model,
        )
    if settings.database_url is None:
        setting = "the `starter.py dev` stack's database"
    return Targets(
        target.connection,
        settings.database_conninfo(target.database_url),
        setting,
        target.task_queue,
        target.llm_base_url,
        target.offline_model,
    )


# -- Temporal ------------------------------------------------------------------------------------


async def connect_temporal(
    settings: Settings, targets: Targets, seconds: float
) -> tuple[Check, Client | None]:
    """The `temporal` row, and the client when the server answered."""
    connection = targets.connection
    if connection is None:
        why = f"no TEMPORAL_ADDRESS (nor a profile's address) {NO_DEV_STACK}: set it"
        return Check("temporal", "fail", why), None
    try:
        client = await within(
            seconds,
            connect(
                connection,
                encryption_keys=settings.encryption_keys,
                encryption_required=settings.encryption_required,
            ),
            f"Temporal at {connection.describe()}",
        )
    except (StackError, ValueError, Late) as err:  # one line: `connection.explain`'s
        return Check("temporal", "fail", f"{err} (check TEMPORAL_ADDRESS)"), None
    return Check("temporal", "ok", f"reached {connection.describe()}"), client


async def namespace_check(client: Client, seconds: float) -> Check:
    """The namespace exists: a worker on a misspelt one polls without error, for nothing."""
    namespace = client.namespace
    try:
        with mapped_refusals(client, "describe the namespace", "DescribeNamespace"):
            await within(
                seconds,
                client.workflow_service.describe_namespace(
                    DescribeNamespaceRequest(namespace=namespace)
                ),
                f"the description of namespace {namespace!r}",
            )
    except Late as err:
        return Check("namespace", "fail", str(err))
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return Check(
                "namespace",
                "fail",
                f"namespace {namespace!r} does not exist: set TEMPORAL_NAMESPACE (or the "
                f"profile's namespace) to one that does, or create it "
                f"(temporal operator namespace create --namespace {namespace})",
            )
        if isinstance(err, TemporalAccessDenied):  # it says which namespace, and the rest
            return Check("namespace", "fail", str(err))
        return Check("namespace", "fail", f"namespace {namespace!r}: {err.message}")
    return Check("namespace", "ok", f"{namespace!r} exists")


async def search_attributes_check(client: Client, seconds: float) -> Check:
    """The runs' search attributes are registered: read only, as the worker's start reads
    them before it registers what is missing (which it may not do on every server)."""
    namespace = client.namespace
    try:
        missing = await within(
            seconds, unregistered(client, namespace), "the listing of search attributes"
        )
    except Late as err:
        return Check("search attributes", "fail", str(err))
    except RPCError as err:
        return Check(
            "search attributes",
            "fail",
            f"the server will not list namespace {namespace!r}'s search attributes "
            f"({err.message}): a worker's start fails the same way",
        )
    if not missing:
        return Check("search attributes", "ok", "all registered")
    commands = "; ".join(create_commands(namespace, missing))
    return Check(
        "search attributes",
        "warn",
        f"namespace {namespace!r} lacks {', '.join(missing)}: a worker registers them at its "
        "start where its credentials may (a dev server, a self-hosted cluster), else refuses "
        f"to start; to register them once by hand: {commands}",
    )


def certificate_check(connection: TemporalConnection | None, now: datetime | None = None) -> Check:
    """The client certificate's end of validity: an expired one is refused at the worker's
    next connection, and every run it serves stalls (`hosting/cert_expiry.py`)."""
    pem = connection.client_cert if connection is not None else None
    if connection is None or pem is None:
        return Check("client certificate", "ok", "none configured (no mTLS)")
    source = connection.client_cert_source or "the client certificate"
    expires = not_after(pem)
    if expires is None:
        return Check(
            "client certificate",
            "warn",
            f"cannot read the end of validity of {source} (TEMPORAL_TLS_CLIENT_CERT_PATH)",
        )
    left = expires - (now or datetime.now(UTC))
    when = expires.strftime("%Y-%m-%d %H:%M UTC")
    if left <= timedelta(0):
        return Check(
            "client certificate",
            "fail",
            f"{source} expired at {when}: renew the file TEMPORAL_TLS_CLIENT_CERT_PATH names",
        )
    if left <= EXPIRY_WARNING:
        hours = int(left.total_seconds() // 3600)
        return Check(
            "client certificate",
            "warn",
            f"{source} expires at {when} (in {hours} h): renew it before then "
            "(TEMPORAL_TLS_CLIENT_CERT_PATH; workers take renewed files without a restart)",
        )
    return Check("client certificate", "ok", f"{source} valid until {when}")


# -- Postgres ------------------------------------------------------------------------------------


async def postgres_checks(targets: Targets, seconds: float) -> list[Check]:
    """Reachable, every schema migration applied, and the role may write the agents' tables:
    `postgres`, `schema` and `database writes`, read-only."""
    if targets.database is None:
        why = f"no DATABASE_URL (nor DATABASE_URL_FILE) {NO_DEV_STACK}: set it"
        return [
            Check("postgres", "fail", why),
            not_checked("schema", "no database"),
            not_checked("database writes", "no database"),
        ]
    setting = targets.database_setting
    try:
        store = await within(
            seconds, Store.open(targets.database, max_size=1, migrate=False), "Postgres"
        )
    except (StoreUnavailable, Late) as err:
        return [
            Check("postgres", "fail", f"{err} (check {setting})"),
            not_checked("schema", "Postgres is unreachable"),
            not_checked("database writes", "Postgres is unreachable"),
        ]
    try:
        return [Check("postgres", "ok", f"reached ({setting})"), *await _schema(store, seconds)]
    finally:
        await within(seconds, store.close(), "closing the Postgres pool")


async def _schema(store: Store, seconds: float) -> list[Check]:
    """The `schema` and `database writes` rows: the second needs the first's tables."""
    try:
        missing = await within(seconds, store.missing_migrations(), "Postgres")
    except (StoreUnavailable, Late, psycopg.Error) as err:
        return [Check("schema", "fail", str(err)), not_checked("database writes", "no schema")]
    if missing:
        said = (
            "has none of the agents' tables"
            if len(missing) == len(MIGRATIONS)
            else f"lacks schema migrations {', '.join(map(str, missing))}"
        )
        return [
            Check(
                "schema",
                "fail",
                f"the database {said}: run `python starter.py migrate` with a DATABASE_URL "
                "whose role owns the schema",
            ),
            not_checked("database writes", "the schema is not up to date"),
        ]
    schema = Check("schema", "ok", f"all {len(MIGRATIONS)} migrations applied")
    try:
        problem = await within(seconds, store.unwritable(), "Postgres")
    except (Late, psycopg.Error) as err:
        return [schema, Check("database writes", "fail", " ".join(str(err).split()))]
    if problem is not None:
        return [schema, Check("database writes", "fail", problem)]
    return [schema, Check("database writes", "ok", "the role may insert and update")]
