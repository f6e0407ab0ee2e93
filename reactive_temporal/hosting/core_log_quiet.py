"""The core's retry warnings, one line a minute per kind of call while a server is gone.

When the Temporal server goes away (a restart, a `dev` stack stopped), the core warns on every
retry of every call: each poller of a worker, and a command waiting on a result, printed
`[sdk_core::temporalio_client::retry] gRPC call poll_workflow_task_queue retried 8 times {…}`
several times a second, burying whatever the command or the operator's log had to say. The
first warning of a kind still goes out at once; the same kind is then held back for
RETRY_LOG_EVERY_SECONDS, and the next one says how many were.
"""

from __future__ import annotations

import logging
import re
import time

RETRY_LOG_EVERY_SECONDS = 60.0
_RETRIED = re.compile(r"gRPC call (\w+) retried")


class RetryWarnings(logging.Filter):
    """Passes the core's retry warnings at most once a RETRY_LOG_EVERY_SECONDS per call."""

    def __init__(self, every: float = RETRY_LOG_EVERY_SECONDS) -> None:
        super().__init__()
        self.every = every
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        found = _RETRIED.search(record.getMessage())
        if found is None:
            return True
        call, now = found.group(1), time.monotonic()
        last = self._last.get(call)
        if last is not None and now - last < self.every:
            self._held[call] = self._held.get(call, 0) + 1
            return False
        self._last[call] = now
        if held := self._held.pop(call, 0):
            record.msg = f"{record.getMessage()} ({held} more such warnings since the last)"
            record.args = None
        return True
