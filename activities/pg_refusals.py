"""What Postgres refuses for good, and what it refuses only for now.

A store activity is retried until it lands (`workflows/activity_options.py`, STORE), so that
an outage delays a run and never loses it. That is right for an outage and wrong for a value
Postgres will never take: retried, the same value is refused again, forever, with the run
"running" and its attempt counter climbing. So every error a store activity raises is sorted:

- an outage (`store.is_outage`: unreachable, restarting, read-only, grants revoked): retried;
- a schema problem (a table, column or function the code expects is missing: SQLSTATE class
  42, as in a rolling deploy before `migrate` ran): retried, since an operator can fix it,
  and said once in the worker's log with what to do;
- refused data (class 22, data exceptions: a number out of range, text that is not a valid
  value, a string too long, a character the encoding lacks; class 23, integrity: not-null,
  check, unique, foreign key): the activity fails *non-retryably*, as a `StoreDataError`
  that names the activity, the table and constraint when Postgres names them, and
  Postgres's own message and SQLSTATE. A unique, exclusion or foreign-key violation can also
  be a race with another writer, which a retry wins; those are refused from attempt
  RACE_ATTEMPTS on.

Everything else keeps Temporal's ordinary retries. The workflows decide what a refusal means
for a run, a debrief or a chat turn (`workflows/store_refusals.py`).
"""

from __future__ import annotations

import enum
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

import psycopg
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.store import is_outage
from reactive_temporal.contracts import names
from reactive_temporal.sanitize import clip

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

RACE_ATTEMPTS = 3
"""The attempt from which a unique, exclusion or foreign-key violation counts as refused data:
two attempts before it (a second or two apart) let a writer that lost a race try again."""
REFUSAL_MAX_CHARS = 1_000
"""A refusal's message at most: Postgres quotes the refused value in some (`invalid input
syntax for type integer: "…"`), and the message goes into the run's result and debrief."""
_RACY = (
    psycopg.errors.UniqueViolation,
    psycopg.errors.ExclusionViolation,
    psycopg.errors.ForeignKeyViolation,
)


class Refusal(enum.Enum):
    OUTAGE = "outage"
    SCHEMA = "schema"
    DATA = "data"


def classify(err: BaseException, *, attempt: int = RACE_ATTEMPTS) -> Refusal | None:
    """How Postgres refused, when `err` (or what it was raised from) is its refusal; None when
    it is not Postgres's. `attempt` is the activity's: a racy violation counts as data only
    from RACE_ATTEMPTS on (before, None: retried like any other failure)."""
    cause = _postgres_cause(err)
    if cause is None:
        return None
    if is_outage(cause):
        return Refusal.OUTAGE
    if isinstance(cause, _RACY):
        return Refusal.DATA if attempt >= RACE_ATTEMPTS else None
    # DataError without a SQLSTATE too: psycopg's own refusal to send a value (a NUL in text)
    if isinstance(cause, psycopg.DataError | psycopg.IntegrityError):
        return Refusal.DATA
    if (cause.sqlstate or "").startswith("42"):
        return Refusal.SCHEMA
    return None


def _postgres_cause(err: BaseException) -> psycopg.Error | None:
    """`err` when it is psycopg's, else the first psycopg error it was raised from."""
    seen: BaseException | None = err
    for _ in range(10):
        if seen is None:
            return None
        if isinstance(seen, psycopg.Error):
            return seen
        seen = seen.__cause__
    return None


def refusal_message(err: psycopg.Error, operation: str) -> str:
    """`operation` and Postgres's own words: its message (without the failing row it may
    detail, which quotes the data whole), what it names (table, column, constraint) and the
    SQLSTATE, clipped to REFUSAL_MAX_CHARS."""
    diag = err.diag
    text = str(err).strip()
    said = diag.message_primary or (text.splitlines()[0] if text else type(err).__name__)
    where = [
        f"{label} {value}"
        for label, value in (
            ("table", diag.table_name),
            ("column", diag.column_name),
            ("constraint", diag.constraint_name),
        )
        if value
    ]
    named = f" ({', '.join(where)})" if where else ""
    sqlstate = err.sqlstate or "none, refused by psycopg before sending"
    return clip(
        f"Postgres refused the data of {operation}{named}: {said} [SQLSTATE {sqlstate}]",
        REFUSAL_MAX_CHARS,
    )


def store_data_error(err: psycopg.Error, operation: str) -> ApplicationError:
    """The activity's non-retryable failure for refused data (type `names.STORE_DATA_ERROR`)."""
    return ApplicationError(
        refusal_message(err, operation), type=names.STORE_DATA_ERROR, non_retryable=True
    )


_schema_problems_said: set[tuple[str, str]] = set()


def say_schema_problem_once(err: psycopg.Error, operation: str) -> None:
    """A schema problem in the worker's log, once per SQLSTATE and message in this process:
    each attempt's failure is logged anyway, and the cause is the same until someone acts."""
    key = (err.sqlstate or "", err.diag.message_primary or str(err))
    if key in _schema_problems_said:
        return
    _schema_problems_said.add(key)
    log.warning(
        "%s: Postgres lacks part of the schema this worker expects (%s [SQLSTATE %s]). "
        "Retrying until it is there: run `python starter.py migrate` against this database "
        "(a rolling deploy whose migration has not run yet), or deploy code that matches it.",
        operation,
        key[1],
        key[0],
    )


def refused_data(err: BaseException) -> ApplicationError | None:
    """The activity's `StoreDataError` when `err` is Postgres refusing its data for good;
    None for an outage, a schema problem (said once in the log) or any other failure."""
    if isinstance(err, ApplicationError) and err.type == names.STORE_DATA_ERROR:
        return err  # sorted already, by the activity itself (with details of its own)
    info = activity.info()
    cause = _postgres_cause(err)
    refusal = classify(cause, attempt=info.attempt) if cause is not None else None
    if cause is None or refusal is None or refusal is Refusal.OUTAGE:
        return None
    if refusal is Refusal.SCHEMA:
        say_schema_problem_once(cause, info.activity_type)
        return None
    return store_data_error(cause, info.activity_type)


def refused_data_fails(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """An activity whose refused data fails it for good (`StoreDataError`) instead of being
    retried forever; outages, schema problems and everything else raise as they were.
    Goes under `@activity.defn`, on every activity that reads or writes Postgres."""

    @functools.wraps(fn)
    async def activity_(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except Exception as err:
            refused = refused_data(err)
            if refused is None or refused is err:
                raise
            raise refused from err

    return activity_
