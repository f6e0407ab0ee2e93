"""A failed activity attempt's log record: one line for the errors our activities raise on
purpose, the traceback kept for anything else."""

from __future__ import annotations

import logging
import sys

from temporalio.exceptions import ApplicationError

from reactive_temporal.hosting.activity_logs import FAILED, OneLineFailures


def _record(error: BaseException) -> logging.LogRecord:
    try:
        raise error
    except BaseException:
        info = sys.exc_info()
    return logging.LogRecord("temporalio.activity", logging.WARNING, "", 0, FAILED, None, info)


def test_an_application_error_is_one_line_with_its_first_cause():
    try:
        try:
            raise OSError("[Errno -2] Name or service not known")
        except OSError as cause:
            raise ApplicationError("LLM endpoint unreachable", type="LlmConnectionError") from cause
    except ApplicationError as err:
        record = _record(err)
    assert OneLineFailures().filter(record)
    assert record.exc_info is None
    assert record.getMessage() == (
        f"{FAILED}: LlmConnectionError: LLM endpoint unreachable "
        "([Errno -2] Name or service not known)"
    )


def test_anything_else_keeps_its_traceback():
    record = _record(KeyError("surprise"))
    assert OneLineFailures().filter(record)
    assert record.exc_info is not None and record.getMessage() == FAILED


def test_a_chain_of_causes_that_comes_back_on_itself_is_one_line_and_ends():
    """`raise err from err` (or two errors causing each other) was followed for ever: the
    filter held the worker's event loop on the activity's failure (CI hung on the failure
    budget's tangled cases once a worker in that process had installed the filter)."""
    looped = ApplicationError("tangled", type="Tangled")
    looped.__cause__ = looped
    first, second = ApplicationError("one", type="Pair"), ValueError("two")
    first.__cause__, second.__cause__ = second, first
    deep = ApplicationError("top", type="Deep")
    below: BaseException = deep
    for level in range(10_000):
        below.__cause__ = ValueError(f"level {level}")
        below = below.__cause__
    for error, line in (
        (looped, f"{FAILED}: Tangled: tangled"),
        (first, f"{FAILED}: Pair: one (two)"),
        (deep, f"{FAILED}: Deep: top (level 19)"),  # MAX_CAUSES down
    ):
        record = _record(error)
        assert OneLineFailures().filter(record)
        assert record.getMessage() == line
