"""How failures are told to people: the field a validation error names, a failure's cause.

Shared by the CLI, the Python API and the worker's start-up, so the same bad input reads the
same everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from pydantic import ValidationError
from temporalio.service import RPCError, RPCStatusCode

MAX_CAUSES = 20
"""Links of a cause chain looked at: a chain is short, and a cycle must not hang the caller."""


def describe_validation_error(err: ValidationError, names: Callable[[str], str] = str) -> str:
    """`field.path: message` for each problem, joined with "; " (a field named as `names`
    says: a setting by its environment variable), without pydantic's "Value error, "."""

    def where(loc: tuple[int | str, ...]) -> str:
        return ".".join(names(str(p)) if i == 0 else str(p) for i, p in enumerate(loc)) or "input"

    return "; ".join(
        f"{where(e['loc'])}: {e['msg'].removeprefix('Value error, ')}" for e in err.errors()
    )


def root_cause(err: BaseException) -> str:
    """The innermost cause's message (a workflow failure wraps the activity's error), at most
    MAX_CAUSES down. A chain may come back on itself (`raise err from err`, a tool's or a
    library's): followed to its end, it held the worker's event loop for good, in the log
    filter that reads every activity failure (hosting/activity_logs.py)."""
    cause: BaseException = err
    seen = {id(err)}
    for _ in range(MAX_CAUSES):
        below = cause.__cause__
        if below is None or id(below) in seen:
            break
        seen.add(id(below))
        cause = below
    return str(cause) or type(cause).__name__


def causes(err: BaseException) -> Iterator[BaseException]:
    """`err`, then what caused it (`__cause__`, else the error being handled, `__context__`),
    and so on, at most MAX_CAUSES."""
    seen: BaseException | None = err
    for _ in range(MAX_CAUSES):
        if seen is None:
            return
        yield seen
        seen = seen.__cause__ or seen.__context__


def workflow_not_found(err: BaseException) -> bool:
    """The server has no such workflow: NOT_FOUND, but not the namespace's (a namespace that
    does not exist is NOT_FOUND too, and was told as "no run with id …")."""
    return (
        isinstance(err, RPCError)
        and err.status == RPCStatusCode.NOT_FOUND
        and not err.message.lower().startswith("namespace")
    )
