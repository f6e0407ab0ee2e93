"""How the LLM endpoint's failures map to Temporal's retries, and what each says.

HTTP 408, 409, 429 and 5xx, timeouts and dropped connections are retried (honouring
`retry-after` and a body's own delay); any other 4xx is the request's fault and fails for good,
but a 401/403 of a key its file replaced while the request was on its way (`key_files`);
a certificate the worker cannot trust fails for good too, saying how to trust it. Every
failure but a rate limit counts against the agent's `llm_max_attempts` and its last attempt's
failure is final; a rate limit (429, 529) is waited out for RATE_LIMIT_PATIENCE_SECONDS. The
provider's own words, in whichever shape it sent them, are in the error.
"""

from __future__ import annotations

import contextlib
import html
import math
import random
import re
import socket
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any, NoReturn

import aiohttp
import openai
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.failed_generation import refused_generation
from reactive_temporal.errors import causes, root_cause
from reactive_temporal.key_files import renewed_since
from reactive_temporal.model_quirks import (
    body_retry_delay,
    error_code,
    error_message,
    failed_generation,
)
from reactive_temporal.reply_errors import RateLimited, read_rate_limit

RETRYABLE_STATUS = {408, 409, 429}
NEVER_RETRIED_CODES = {"insufficient_quota"}
"""Error codes that no retry can change (OpenAI's 429 for an account out of credit)."""
RETRIED_CODES = {"tool_use_failed"}
"""Error codes of a reply the model may well get right when asked again (Groq's 400 for a
tool call it generated wrong), counted against the LLM's attempts."""
FAILED_GENERATION_MAX_CHARS = 150
"""How much of a refused generation the error shows (it is cut at 500 characters whole)."""
MAX_RETRY_DELAY_SECONDS = 120.0
RATE_LIMITED_STATUS = {429, 529}
"""A provider asking to be called later: a rate limit (429, but `insufficient_quota`),
Anthropic's "overloaded" (529)."""
CREDENTIALS_REFUSED = {401, 403}
RATE_LIMIT_PATIENCE_SECONDS = 600.0
"""How long from a step's first attempt a rate limit is waited out without counting against
the agent's `llm_max_attempts`: a burst of runs over a tokens-per-minute limit waits for the
next minute instead of ending `llm_error` after five quick tries (about 15 s)."""
RATE_LIMITED_BACKOFF_SECONDS = (0.5, 30.0)
"""A rate-limited attempt waits at least this, doubling from the first to the cap, whatever
`retry-after` says (a `0` had a crowd retry all at once, over and over), plus up to half again
at random, so runs limited together do not come back together."""


def _seconds_until(value: str, headers: Any) -> float | None:
    """How long until `retry-after`'s HTTP date (RFC 9110: a proxy's or a load balancer's
    503 may send one), counted from the response's own `date` when it sent one (the
    server's clock says when that is), else from now; None when it is no date or has passed
    (the retry policy's backoff decides then)."""
    try:
        until = parsedate_to_datetime(value)
        sent = headers.get("date") if headers is not None else None
        now = parsedate_to_datetime(sent) if sent else datetime.now(UTC)
        seconds = (until - now).total_seconds()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None  # not a date, or one without a zone against one with
    return seconds if seconds > 0 else None


def retry_delay(headers: Any, body: object = None) -> timedelta | None:
    """The server's requested wait, from `retry-after-ms` or `retry-after` (seconds, or an
    HTTP date), else from the error body (`body_retry_delay`)."""
    waits: list[float] = []
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name) if headers is not None else None
        if value is None:
            continue
        try:
            waits.append(float(value) * scale)
        except ValueError:
            if name == "retry-after" and (until := _seconds_until(value, headers)) is not None:
                waits.append(until)  # was ignored: a 503 "back at 14:05" retried at once
    if (in_body := body_retry_delay(body)) is not None:
        waits.append(in_body)
    for seconds in waits:
        if math.isnan(seconds):
            continue  # `nan`: no wait at all (timedelta refused it, and the step failed)
        return timedelta(seconds=min(max(seconds, 0.0), MAX_RETRY_DELAY_SECONDS))
    return None


def raise_for_status(
    err: openai.APIStatusError,
    *,
    last_attempt: bool = False,
    limited: RateLimitWait | None = None,
) -> NoReturn:
    """The HTTP error as Temporal should treat it: retryable or not, after how long. A rate
    limit is waited out as `limited` says (from inside an activity), whatever the attempt."""
    status = err.status_code
    code = error_code(err.body)
    retryable = status in RETRYABLE_STATUS or status >= 500 or code in RETRIED_CODES
    should = err.response.headers.get("x-should-retry") if err.response is not None else None
    if should in ("true", "false"):
        retryable = should == "true"
    if code in NEVER_RETRIED_CODES:
        retryable = False
    renewed = status in CREDENTIALS_REFUSED and renewed_since(_sent_authorization(err))
    if renewed:  # the key was rotated while the request was on its way: ask again, at once
        retryable = True
    # what the provider said, in whichever shape (the client reads only OpenAI's, and said
    # "Error code: 400" for Gemini's, TGI's, a `detail` or a plain-text body)
    detail = error_message(err.body) or (err.message if isinstance(err.message, str) else "")
    detail = page_text(detail)  # a proxy's or a load balancer's page (408, 502, 504)
    if (written := failed_generation(err.body)) is not None:  # Groq's: what the model wrote
        detail = f"{detail[:300]} (the model wrote: {written[:FAILED_GENERATION_MAX_CHARS]!r})"
    asked = retry_delay(err.response.headers if err.response is not None else None, err.body)
    final, gave_up = last_attempt, " (attempts exhausted)"
    if retryable and status in RATE_LIMITED_STATUS and limited is not None:
        final = limited.waited >= RATE_LIMIT_PATIENCE_SECONDS
        gave_up = f" (rate limited for {limited.waited:.0f} s)"
        asked = None if final else limited.delay(asked)
    said = gave_up if retryable and final else ""
    if renewed:
        asked, said = timedelta(0), f" (sent with a key its file has replaced since){said}"
    raise ApplicationError(
        f"LLM endpoint answered HTTP {status}: {(detail or str(err))[:500]}{said}",
        type="LlmHttpError" if retryable else "LlmRequestRejected",
        non_retryable=not retryable or final,
        next_retry_delay=asked,
    ) from None  # not chained: the client's error holds the whole body (megabytes, maybe), and
    # a failure past Temporal's size limit arrives as "Failure exceeds size limit", its cause lost


def rate_limited_reply(
    said: str,
    limit: RateLimited,
    *,
    last_attempt: bool = False,
    limited: RateLimitWait | None = None,
    details: object = None,
) -> ApplicationError:
    """An error object a 200 carried in place of (the rest of) its reply that is a rate
    limit (`reply_errors.read_rate_limit`): waited out as a 429 is (`raise_for_status`),
    after the wait it asked for, rather than counted against the model's attempts as a
    reply that broke off. `details`: what the caller carries with it (the bill)."""
    asked = (
        timedelta(seconds=min(limit.retry_after, MAX_RETRY_DELAY_SECONDS))
        if limit.retry_after is not None
        else None
    )
    final, gave_up = last_attempt, " (attempts exhausted)"
    if limited is not None:
        final = limited.waited >= RATE_LIMIT_PATIENCE_SECONDS
        gave_up = f" (rate limited for {limited.waited:.0f} s)"
        asked = None if final else limited.delay(asked)
    return ApplicationError(
        f"LLM endpoint said it is rate limited, in a 200 in place of its reply: {said[:500]}"
        f"{gave_up if final else ''}",
        *(() if details is None else (details,)),
        type="LlmHttpError",
        non_retryable=final,
        next_retry_delay=asked,
    )


_TAG = re.compile(r"<(script|style)\b.*?</\1\s*>|<[^>]*>", re.I | re.S)
_TITLE = re.compile(r"<title[^>]*>(.*?)</title", re.I | re.S)


def page_text(detail: str) -> str:
    """An error that is an HTML page (nginx's, a cloud load balancer's 504 "Gateway
    Time-out") as its words: its title and text without markup, which the run's error
    showed as 500 characters of tags and styles; anything else as it is."""
    head = detail.lstrip()[:200].lower()
    if not head.startswith("<") or not ("<html" in head or "<!doctype" in head):
        return detail
    title = _TITLE.search(detail)
    text = " ".join(html.unescape(_TAG.sub(" ", detail)).split())
    named = " ".join(html.unescape(title.group(1)).split()) if title else ""
    if named and text.startswith(named):
        text = text[len(named) :].strip()
    return f"{named}: {text}" if named and text else named or text or detail


def _whole_body(err: openai.APIStatusError) -> object:
    """The refusal's body as it came (the client keeps only its `error` in `err.body`), None
    when it was no JSON."""
    try:
        return err.response.json()
    except (ValueError, RuntimeError, AttributeError):
        return None


def _sent_authorization(err: openai.APIStatusError) -> str | None:
    """The `Authorization` header the refused request carried."""
    try:
        return err.response.request.headers.get("authorization")
    except (AttributeError, RuntimeError):  # a response made without its request
        return None


@dataclass(frozen=True)
class RateLimitWait:
    """Where a step stands against rate limits: how long since its first attempt, and which
    attempt this is."""

    waited: float
    attempt: int

    @classmethod
    def now(cls) -> RateLimitWait | None:
        """This attempt's standing, from inside an activity (None outside one)."""
        if not activity.in_activity():
            return None
        info = activity.info()
        first = info.scheduled_time
        if first.tzinfo is None:  # a test environment's; the server's are UTC
            first = first.replace(tzinfo=UTC)
        waited = (datetime.now(UTC) - first).total_seconds()
        return cls(waited=max(waited, 0.0), attempt=info.attempt)

    def delay(self, asked: timedelta | None) -> timedelta:
        """The wait before the next attempt: what the provider asked, at least the backoff
        for this attempt, plus up to half again at random (RATE_LIMITED_BACKOFF_SECONDS)."""
        first, cap = RATE_LIMITED_BACKOFF_SECONDS
        floor = min(cap, first * 2 ** min(self.attempt - 1, 16))
        seconds = max(asked.total_seconds() if asked else 0.0, floor)
        seconds += random.uniform(0, seconds / 2)
        return timedelta(seconds=min(seconds, MAX_RETRY_DELAY_SECONDS))


CONNECT_FAILURES = (
    aiohttp.ClientConnectorError,  # its certificate and TLS handshake errors too
    ssl.SSLCertVerificationError,
    ConnectionRefusedError,
    socket.gaierror,
)
"""Errors of a connection never made (refused, no such host, a certificate not trusted)."""


def never_connected(err: BaseException) -> bool:
    """Whether `err` is a request that never reached the endpoint, so was not billed: openai's
    aiohttp transport reports every connection error as a connect timeout ("Request timed
    out."), a refused connection too, and each was counted as a request the provider may have
    answered in full (its prompt's estimate in the unreported-usage metrics, every retry)."""
    return any(isinstance(c, CONNECT_FAILURES) for c in causes(err))


def untrusted_reason(err: BaseException) -> str | None:
    """Why the endpoint's TLS certificate was not trusted, when that is what failed `err`."""
    untrusted = [c for c in causes(err) if isinstance(c, ssl.SSLCertVerificationError)]
    if not untrusted:
        return None
    # aiohttp's own error is one too, without OpenSSL's words: the innermost has them
    return getattr(untrusted[-1], "verify_message", None) or str(untrusted[-1])


def refuse_untrusted(err: BaseException) -> None:
    """A connection that failed because the endpoint's TLS certificate was not trusted, as a
    final error saying so: the client reported it as "Request timed out." (aiohttp's
    certificate error under a connect timeout), and each attempt was retried as an outage,
    which no retry ends. A certificate from a private CA (a company's vLLM, a gateway that
    inspects TLS) is trusted through SSL_CERT_FILE."""
    reason = untrusted_reason(err)
    if reason is None:
        return
    private = any(w in reason for w in ("issuer", "self-signed", "self signed"))
    hint = (
        ": a certificate from a private CA is trusted once SSL_CERT_FILE names a bundle that "
        "holds the CA (SSL_CERT_DIR, a directory of them)"
        if private
        else ""
    )
    raise ApplicationError(
        f"LLM endpoint's TLS certificate was not trusted ({reason}){hint}",
        type="LlmCertificateError",
        non_retryable=True,
    ) from None


def attempts_exhausted(max_attempts: int | None) -> bool:
    """This attempt is the LLM's last (`max_attempts`, the agent's cap): its failure is final."""
    return max_attempts is not None and activity.info().attempt >= max_attempts


def unreadable_reply(
    err: Exception, max_attempts: int | None, details: object = None
) -> ApplicationError:
    """A reply the endpoint sent (and billed) that cannot be read, as the model's failure:
    counted against its attempts (`LlmBadReply`), where a plain error was retried as an
    outage, a billed call each time, up to every infrastructure retry. `details`: what the
    caller carries with it (the bill)."""
    last = attempts_exhausted(max_attempts)
    return ApplicationError(
        f"LLM endpoint sent a reply that could not be read: {type(err).__name__}: "
        f"{str(err)[:300]}{' (attempts exhausted)' if last else ''}",
        *(() if details is None else (details,)),
        type="LlmBadReply",
        non_retryable=last,
    )


@contextlib.contextmanager
def llm_errors(max_attempts: int | None = None) -> Iterator[None]:
    """Map the openai client's failures to Temporal's retry semantics.

    LLM failures count against `max_attempts` (the agent's cap); the activity's own retry
    policy is looser, so a Postgres or worker outage does not use up the LLM's attempts. A
    rate limit does not count either: it is waited out for RATE_LIMIT_PATIENCE_SECONDS from
    the step's first attempt.
    """
    last = attempts_exhausted(max_attempts)
    try:
        yield
    except openai.APIStatusError as err:
        try:
            raise_for_status(err, last_attempt=last, limited=RateLimitWait.now())
        except ApplicationError as refused:  # with the model's refused calls, when it is that
            raise refused_generation(refused, err.body, _whole_body(err)) from None
    except (openai.APIConnectionError, openai.APITimeoutError) as err:
        refuse_untrusted(err)
        cause = root_cause(err)  # the machine's words: "Name or service not known"
        because = f" ({cause[:300]})" if cause != str(err) else ""
        raise ApplicationError(
            f"LLM endpoint unreachable: {err}{because}{' (attempts exhausted)' if last else ''}",
            type="LlmConnectionError",
            non_retryable=last,
        ) from err
    except openai.APIError as err:  # an error object in a 200's stream (a gateway's, mid-reply)
        said = error_message(err.body) or str(err.message)
        if (limit := read_rate_limit(err.body, now=time.time())) is not None:
            raise rate_limited_reply(
                said, limit, last_attempt=last, limited=RateLimitWait.now()
            ) from None
        raise ApplicationError(
            f"LLM endpoint sent an error in place of the rest of its reply: {said[:500]}"
            f"{' (attempts exhausted)' if last else ''}",
            type="LlmBadReply",  # the model failing, as any reply that breaks off
            non_retryable=last,
        ) from None  # the client's error holds the body: the words above are what it said
    except TimeoutError as err:
        raise ApplicationError(
            "LLM endpoint did not finish its reply in time"
            f"{' (attempts exhausted)' if last else ''}",
            type="LlmConnectionError",
            non_retryable=last,
        ) from err
    except ApplicationError:
        raise
    except Exception as err:
        # A reply the client could not read (a page of HTML, an error object mid-stream, a
        # shape it does not know) is the model failing too: counted against its attempts,
        # where it was retried as an outage, 20 billed calls more.
        raise unreadable_reply(err, max_attempts) from None  # its text may hold the whole body
