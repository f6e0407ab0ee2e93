"""An activity's expected failure, logged as one line.

The SDK logs every failed attempt with its traceback ("Completing activity as failed"). For
the failures our activities raise on purpose (`ApplicationError`: an LLM endpoint that cannot
be reached, a tool that does not exist), the traceback says nothing the message does not,
and a run against a mistyped endpoint printed 1,100 lines of them in `run`'s terminal and
in a Python program's stderr. They are one line each, with the first cause's words; anything
else keeps its traceback.
"""

from __future__ import annotations

import logging

from temporalio.exceptions import ApplicationError

from reactive_temporal.errors import root_cause

FAILED = "Completing activity as failed"


class OneLineFailures(logging.Filter):
    """Turns an `ApplicationError`'s failed-attempt record into one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, ApplicationError) and str(record.msg).startswith(FAILED):
            kind = error.type or type(error).__name__
            cause = root_cause(error)
            because = f" ({cause})" if cause not in (error.message, str(error)) else ""
            record.msg = f"{record.msg}: {kind}: {error.message}{because}"
            record.args = None
            record.exc_info = record.exc_text = None
        return True


def one_line_activity_failures() -> None:
    """Install the filter on the SDK's activity logger (once per process)."""
    activity_logger = logging.getLogger("temporalio.activity")
    if not any(isinstance(f, OneLineFailures) for f in activity_logger.filters):
        activity_logger.addFilter(OneLineFailures())
