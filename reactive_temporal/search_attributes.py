"""The search attributes runs carry, so they can be filtered in the Web UI and with
`temporal workflow list --query "AgentName = 'billing' AND Outcome = 'partial'"`.

The worker registers them on whatever server it connects to before it starts; a workflow
that upserts an attribute the server does not know fails its workflow task, so a worker
that cannot register them refuses to start, saying how to register them by hand.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.common import SearchAttributeKey
from temporalio.service import RPCError, RPCStatusCode

from reactive_temporal.refusals import while_busy

if TYPE_CHECKING:  # workflows import the keys; they must not import the client
    from temporalio.client import Client

log = logging.getLogger(__name__)

AGENT_NAME = SearchAttributeKey.for_keyword("AgentName")
TERMINATED_BY = SearchAttributeKey.for_keyword("TerminatedBy")
OUTCOME = SearchAttributeKey.for_keyword("Outcome")
ITERATIONS = SearchAttributeKey.for_int("Iterations")
TOKENS_USED = SearchAttributeKey.for_int("TokensUsed")
DEBRIEF_STATUS = SearchAttributeKey.for_keyword("DebriefStatus")
WAITING_FOR = SearchAttributeKey.for_keyword("WaitingFor")
"""`approval` while a run is parked on tool calls waiting for a person; unset otherwise."""

ALL: dict[str, IndexedValueType.ValueType] = {
    AGENT_NAME.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    TERMINATED_BY.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    OUTCOME.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    ITERATIONS.name: IndexedValueType.INDEXED_VALUE_TYPE_INT,
    TOKENS_USED.name: IndexedValueType.INDEXED_VALUE_TYPE_INT,
    DEBRIEF_STATUS.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    WAITING_FOR.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
}
_TYPE_NAMES = {
    IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD: "Keyword",
    IndexedValueType.INDEXED_VALUE_TYPE_INT: "Int",
}


class SearchAttributesMissing(RuntimeError):
    """The server lacks our search attributes and would not let us add them (or would not
    say which it has)."""


def dev_server_flags() -> list[str]:
    """`temporal server start-dev` flags that register every attribute at start."""
    flags: list[str] = []
    for name, kind in ALL.items():
        flags += ["--search-attribute", f"{name}={_TYPE_NAMES[kind]}"]
    return flags


LISTING_PATIENCE_SECONDS = 120.0
"""How long a worker's start sends the listing again while the server cancels it."""


async def ensure_registered(client: Client, namespace: str) -> list[str]:
    """Register the attributes the server does not have yet; returns the names added.

    Both calls are retried as the SDK retries its own (`retry=True`: the server unavailable or
    busy), and a listing the server cancelled is sent again: a loaded dev server once answered
    the listing "operation was canceled" and a test's worker refused to start. A server that
    cancels it for LISTING_PATIENCE_SECONDS gets a clear error instead of a worker waiting at
    its start for ever. Adding what is there already is no error (workers starting together
    on a new namespace all add them).
    """
    from reactive_temporal.access_calls import mapped_refusals  # the client's: when called

    missing = await _missing(client, namespace)
    if not missing:
        return []
    try:
        with mapped_refusals(client, "add search attributes", "AddSearchAttributes"):
            await client.operator_service.add_search_attributes(
                AddSearchAttributesRequest(search_attributes=missing, namespace=namespace),
                retry=True,
            )
    except Exception as err:
        commands = "\n".join(f"  {command}" for command in create_commands(namespace, missing))
        raise SearchAttributesMissing(
            f"namespace {namespace!r} lacks the search attributes {', '.join(missing)} and this "
            f"worker may not add them ({err}). Register them once, then restart:\n{commands}"
        ) from err
    log.info("registered search attributes %s", ", ".join(missing))
    return list(missing)


def create_commands(namespace: str, names: Iterable[str]) -> list[str]:
    """The `temporal` CLI commands that register `names` (of ALL) on `namespace` by hand."""
    return [
        f"temporal operator search-attribute create --namespace {namespace} "
        f"--name {name} --type {_TYPE_NAMES[ALL[name]]}"
        for name in names
    ]


async def unregistered(client: Client, namespace: str) -> list[str]:
    """The attributes `namespace` lacks, registering none (`starter.py check` only reads);
    RPCError when the server will not list them."""
    return list(await _missing(client, namespace))


async def _missing(client: Client, namespace: str) -> dict[str, IndexedValueType.ValueType]:
    from reactive_temporal.access_calls import mapped_refusals  # the client's: when called

    action = "list the namespace's search attributes"
    try:
        with mapped_refusals(client, action, "ListSearchAttributes"):
            listed = await while_busy(
                lambda: client.operator_service.list_search_attributes(
                    ListSearchAttributesRequest(namespace=namespace), retry=True
                ),
                f"the listing of namespace {namespace!r}'s search attributes",
                passing=lambda err: (
                    isinstance(err, RPCError) and err.status == RPCStatusCode.CANCELLED
                ),
                give_up_after=LISTING_PATIENCE_SECONDS,
            )
    except RPCError as err:
        if err.status != RPCStatusCode.CANCELLED:
            raise
        raise SearchAttributesMissing(
            f"Temporal cancelled every listing of namespace {namespace!r}'s search attributes "
            f"for {LISTING_PATIENCE_SECONDS:.0f} s ({err.message}), so this worker cannot "
            "tell whether its runs' attributes are registered. Check the server's health "
            "(`temporal operator cluster health`) and start the worker again."
        ) from err
    known = set(listed.custom_attributes) | set(listed.system_attributes)
    return {name: kind for name, kind in ALL.items() if name not in known}
