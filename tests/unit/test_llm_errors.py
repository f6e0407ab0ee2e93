"""How LLM endpoint failures map to Temporal retries."""

from __future__ import annotations

from datetime import timedelta

import openai

try:  # openai 3 speaks httpx2; older releases httpx
    import httpx2 as httpx
except ImportError:  # pragma: no cover
    import httpx  # type: ignore[no-redef]
import pytest
from temporalio.exceptions import ApplicationError

from activities.llm_errors import (
    RATE_LIMIT_PATIENCE_SECONDS,
    RateLimitWait,
    raise_for_status,
    retry_delay,
)
from activities.llm_request import chat_request


def status_error(status: int, headers: dict[str, str] | None = None) -> openai.APIStatusError:
    request = httpx.Request("POST", "http://llm/v1/chat/completions")
    response = httpx.Response(status, headers=headers or {}, request=request, json={"error": {}})
    return openai.APIStatusError(f"status {status}", response=response, body=None)


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504])
def test_retryable_statuses(status):
    with pytest.raises(ApplicationError) as info:
        raise_for_status(status_error(status))
    assert info.value.non_retryable is False
    assert f"HTTP {status}" in str(info.value)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_other_4xx_fail_for_good(status):
    with pytest.raises(ApplicationError) as info:
        raise_for_status(status_error(status))
    assert info.value.non_retryable is True
    assert info.value.type == "LlmRequestRejected"


def test_retry_after_is_honoured():
    with pytest.raises(ApplicationError) as info:
        raise_for_status(status_error(429, {"retry-after": "7"}))
    assert info.value.next_retry_delay == timedelta(seconds=7)


def test_retry_after_ms_wins_and_is_capped():
    assert retry_delay(httpx.Headers({"retry-after-ms": "250", "retry-after": "9"})) == timedelta(
        milliseconds=250
    )
    assert retry_delay(httpx.Headers({"retry-after": "86400"})) == timedelta(seconds=120)
    assert retry_delay(httpx.Headers({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) is None
    dated = {
        "retry-after": "Wed, 21 Oct 2015 07:28:30 GMT",
        "date": "Wed, 21 Oct 2015 07:28:00 GMT",
    }
    assert retry_delay(httpx.Headers(dated)) == timedelta(seconds=30)  # by the server's clock
    assert retry_delay(httpx.Headers({"retry-after": "Wed, 21 Oct 2015 07:28:30"})) is None
    assert retry_delay(None) is None


def test_x_should_retry_overrides_the_status():
    with pytest.raises(ApplicationError) as info:
        raise_for_status(status_error(400, {"x-should-retry": "true"}))
    assert info.value.non_retryable is False


def test_a_request_sends_only_the_parameters_it_was_given():
    messages = [{"role": "user", "content": "hi"}]
    assert chat_request("m", messages) == {"model": "m", "messages": messages}
    assert chat_request("m", messages, tools=[], temperature=0.0, max_tokens=5) == {
        "model": "m",
        "messages": messages,
        "temperature": 0.0,
        "max_tokens": 5,
    }


def test_a_wait_asked_for_in_the_body_is_honoured():
    """Gemini's 429 says how long to wait in its body (`RetryInfo`), with no header: the
    retries came sooner and the run failed before the wait it was asked for."""
    gemini = [
        {
            "error": {
                "code": 429,
                "status": "RESOURCE_EXHAUSTED",
                "details": [
                    {"@type": "type.googleapis.com/google.rpc.QuotaFailure"},
                    {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "20s"},
                ],
            }
        }
    ]
    assert retry_delay(None, gemini) == timedelta(seconds=20)
    assert retry_delay(httpx.Headers({"retry-after": "3"}), gemini) == timedelta(seconds=3)
    assert retry_delay(None, [{"error": {"details": [{"retryDelay": "soon"}]}}]) is None


def test_a_rate_limit_is_waited_out_whatever_the_attempt_until_its_patience():
    """A 429 or 529 on the agent's last LLM attempt goes on being retried while the step is
    within its patience, waiting at least the backoff for its attempt plus up to half again;
    past it, it is final and says for how long it was limited."""
    for status in (429, 529):
        with pytest.raises(ApplicationError) as info:
            raise_for_status(
                status_error(status, {"retry-after": "0"}),
                last_attempt=True,
                limited=RateLimitWait(waited=30.0, attempt=9),
            )
        assert info.value.non_retryable is False
        delay = info.value.next_retry_delay
        assert delay is not None and timedelta(seconds=30) <= delay <= timedelta(seconds=45)
    with pytest.raises(ApplicationError) as info:
        raise_for_status(
            status_error(429),
            limited=RateLimitWait(waited=RATE_LIMIT_PATIENCE_SECONDS + 1, attempt=3),
        )
    assert info.value.non_retryable is True and info.value.next_retry_delay is None
    assert info.value.message.endswith(
        f"(rate limited for {RATE_LIMIT_PATIENCE_SECONDS + 1:.0f} s)"
    )


def test_other_failures_on_the_last_attempt_stay_final():
    with pytest.raises(ApplicationError) as info:
        raise_for_status(
            status_error(503), last_attempt=True, limited=RateLimitWait(waited=1.0, attempt=5)
        )
    assert info.value.non_retryable is True
    assert info.value.message.endswith("(attempts exhausted)")


def test_runs_limited_together_come_back_apart():
    """`retry-after: 0` to a crowd: each waits at least the first backoff, and up to half again."""
    delays = set()
    for _ in range(50):
        with pytest.raises(ApplicationError) as info:
            raise_for_status(
                status_error(429, {"retry-after": "0"}),
                limited=RateLimitWait(waited=0.0, attempt=1),
            )
        assert info.value.next_retry_delay is not None
        delays.add(info.value.next_retry_delay.total_seconds())
    assert min(delays) >= 0.5 and max(delays) <= 0.75 and len(delays) > 40
