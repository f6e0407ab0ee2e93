"""The core's retry warnings while a server is gone: the first of each call at once, then one
a minute, saying how many were held back."""

from __future__ import annotations

import logging

import pytest

from reactive_temporal.hosting import core_log_quiet
from reactive_temporal.hosting.core_log_quiet import RetryWarnings

POLL = (
    "[sdk_core::temporalio_client::retry] gRPC call poll_workflow_task_queue retried 8 times "
    "{'error': 'Status { code: Unavailable, message: \"tcp connect error\" }'}"
)
RESULT = POLL.replace("poll_workflow_task_queue", "get_workflow_execution_history")


def record(message: str) -> logging.LogRecord:
    return logging.LogRecord("temporalio.core", logging.WARNING, "core", 0, message, None, None)


def test_each_call_s_retries_are_said_once_a_minute(monkeypatch: pytest.MonkeyPatch):
    now = [1000.0]
    monkeypatch.setattr(core_log_quiet.time, "monotonic", lambda: now[0])
    quiet = RetryWarnings(every=60)
    passed = []
    for second in range(0, 130, 1):  # a warning a second from each of two calls, 130 s
        now[0] = 1000.0 + second
        for message in (POLL, RESULT):
            r = record(message)
            if quiet.filter(r):
                passed.append((second, r.getMessage()))
    assert [s for s, _ in passed] == [0, 0, 60, 60, 120, 120]
    assert passed[2][1].endswith("(59 more such warnings since the last)")
    assert quiet.filter(record("[sdk_core::worker] something else went wrong"))
