"""Which error objects in a 200 are rate limits, and the wait each asks for
(`reactive_temporal.reply_errors`)."""

from __future__ import annotations

import json

import pytest

from reactive_temporal.reply_errors import read_rate_limit

NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("error", "wait"),
    [
        ({"code": 429, "message": "Rate limit exceeded"}, None),
        ({"code": "429", "message": "litellm.RateLimitError"}, None),
        ({"type": "rate_limit_error", "message": "slow down", "retry_after": 3}, 3.0),
        ({"code": "rate_limit_exceeded", "message": "Please try again in 2m59.56s."}, 179.56),
        ({"code": "rate_limit_exceeded", "message": "Please try again in 250ms."}, 0.25),
        (
            {"code": 529, "message": "Overloaded", "metadata": {"headers": {"Retry-After": "4"}}},
            4.0,
        ),
        (
            {
                "code": 429,
                "message": "x",
                "metadata": {"headers": {"X-RateLimit-Reset": "1700000012000"}},
            },
            12.0,
        ),
        (
            {
                "status": "RESOURCE_EXHAUSTED",
                "message": "Quota exceeded",
                "details": [{"retryDelay": "20s"}],
            },
            20.0,
        ),
        (
            {
                "code": 502,
                "message": "Provider returned error",
                "metadata": {
                    "raw": json.dumps({"error": {"type": "rate_limit_error", "message": "m"}})
                },
            },
            None,
        ),
    ],
)
def test_a_rate_limit_is_read_with_its_wait(error: dict[str, object], wait: float | None):
    limit = read_rate_limit(error, now=NOW)
    assert limit is not None
    assert limit.retry_after == (pytest.approx(wait) if wait is not None else None)


@pytest.mark.parametrize(
    "error",
    [
        {"code": 502, "message": "Provider disconnected unexpectedly"},
        {"message": "overloaded"},  # a server failing mid-reply: the model failing
        {"code": 429, "type": "insufficient_quota", "message": "You exceeded your current quota"},
        {"code": "context_length_exceeded", "message": "maximum context length is 8192"},
        "rate limit",  # no object: nothing to read
        {"code": True, "message": "oops"},
    ],
)
def test_other_errors_are_no_rate_limit(error: object):
    assert read_rate_limit(error, now=NOW) is None
