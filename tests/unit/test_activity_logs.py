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
