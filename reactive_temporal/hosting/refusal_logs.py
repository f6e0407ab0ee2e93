"""A worker's log when Temporal refuses its credentials: said once, clearly, no traceback.

Measured with SDK 1.35 against an authorizer's front (tests/e2e/test_access_refused_cli.py):
a worker whose polls are refused (PERMISSION_DENIED, UNAUTHENTICATED) says nothing while its
core retries them for 60 s (`LONG_POLL_FATAL_GRACE` in sdk-core's client/src/retry.rs: a
refusal might be a proxy starting up), then its workflow or activity worker fails: the SDK
logs "Worker failed, shutting down" with two tracebacks, and the worker stops. Meanwhile its
heartbeat (RecordWorkerHeartbeat, about once a minute) is refused with a core warning that
names the status and nothing else.

In a `worker` process the first such warning becomes one line naming the call, the
credentials and what to do, and that the worker stops within a minute unless it is done;
repeats are dropped, and so are the core's warnings about the shutdown that follows (its
connections dropped: "shutdown_worker rpc errored during worker shutdown: Status { … }", seen
once in CI). The SDK's traceback is dropped too: the worker's exit says it, once
(`WorkerHost.stop`, `access_calls.worker_refusal`).
"""

from __future__ import annotations

import logging

from reactive_temporal.access import core_refusal, operation, refused
from reactive_temporal.connection import TemporalConnection
from reactive_temporal.errors import causes

LOGGERS = ("temporalio.core", "temporalio.worker._worker")
"""The core's forwarded log (`cli.terminal.core_logs_to_python`) and the SDK worker's."""


class RefusalLogs(logging.Filter):
    """One clear warning for the core's first access refusal; none of the rest."""

    def __init__(self, connection: TemporalConnection, task_queue: str) -> None:
        super().__init__()
        self.connection = connection
        self.task_queue = task_queue
        self.said = False

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:  # "Worker failed, …" and its trace
            return not any(core_refusal(str(c)) for c in causes(record.exc_info[1]))
        text = record.getMessage()
        if self.said and "during worker shutdown" in text:
            return False  # the stop the refusal said comes: its dropped connections are noise
        found = core_refusal(text)
        if found is None:
            return True
        if self.said:
            return False
        self.said = True
        if "heartbeat" in text:
            op = operation("record this worker's heartbeat", "RecordWorkerHeartbeat")
        else:
            op = operation(f"poll task queue {self.task_queue!r}", "PollWorkflowTaskQueue")
        said = refused(found.kind, op, self.connection, repr(found.message))
        record.msg = (
            f"{said}. Its polls are refused too: the worker stops within about a minute "
            "unless that is done"
        )
        record.args = None
        return True

    def install(self) -> None:
        for name in LOGGERS:
            logging.getLogger(name).addFilter(self)
