"""What an error object sent inside a 200 says it is: a rate limit, read with the wait it asks.

A gateway that has started a 200 cannot change its status when its provider fails part-way:
OpenRouter streams `data: {"error": {"code": 429, "message": "...", "metadata": {...}}}` in
place of the rest of the reply, or puts the error in the choice (`finish_reason: "error"`).
Such a reply is the model failing (`activities.completion.Completion.broke_off`), except when
the object says what a status would have: a context window passed (read as a 400's is,
`model_quirks.read_context_overflow`) or a rate limit, read here, which is waited out as a
429 is rather than counted against the model's attempts.

Pure: no I/O; the clock comes in as `now` (epoch seconds).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from reactive_temporal.model_quirks import PROVIDER_RAW_MAX_CHARS, body_retry_delay, error_message

RATE_LIMITED_CODES = {429, 529}
"""Status codes a gateway puts in the object's `code` for a provider's rate limit (429) or
Anthropic's "overloaded" (529)."""
RATE_LIMITED_NAMES = {
    "rate_limit_exceeded",  # OpenAI, Groq, Together
    "rate_limit_error",  # Anthropic
    "overloaded_error",  # Anthropic's 529
    "resource_exhausted",  # Gemini's status
    "too_many_requests",
    "throttlingexception",  # Bedrock, through gateways
}
NEVER_WAITED_NAMES = {"insufficient_quota"}
"""A 429 that no wait ends (OpenAI's account out of credit): not a rate limit here."""
_RATE_LIMIT_WORDS = re.compile(r"rate[ _-]?limit|too many requests|resource[ _]exhausted", re.I)
"""A rate limit's words. Not "overloaded" alone: a server that failed mid-reply says it too,
and that is the model failing (Anthropic's own is named, `overloaded_error`)."""
_TRY_AGAIN = re.compile(
    r"try again in (?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)(ms|s))?",
    re.I,
)
"""OpenAI's and Groq's words for the wait: "Please try again in 7.66s", "in 2m59.56s",
"in 250ms"."""


@dataclass(frozen=True)
class RateLimited:
    """An error object that is a rate limit."""

    retry_after: float | None = None
    """The wait it asked for, in seconds, when it said one."""


def _names(error: Mapping[str, object]) -> set[str]:
    """The object's `code`, `type` and `status` as lower-case names, and a code that is a
    status number as its digits."""
    named: set[str] = set()
    for key in ("code", "type", "status"):
        value = error.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, int | str):
            named.add(str(value).strip().lower())
    return named


def _objects(error: object) -> list[Mapping[str, object]]:
    """The error object, and the provider's own that a gateway passed on in `metadata.raw`
    (as JSON text), when it did."""
    if isinstance(error, Mapping) and isinstance(error.get("error"), Mapping):
        error = error["error"]
    if not isinstance(error, Mapping):
        return []
    found = [error]
    metadata = error.get("metadata")
    raw = metadata.get("raw") if isinstance(metadata, Mapping) else None
    if isinstance(raw, str) and raw.strip():
        try:
            provider = json.loads(raw[:PROVIDER_RAW_MAX_CHARS])
        except (ValueError, RecursionError):
            provider = None
        if isinstance(provider, Mapping):
            inner = provider.get("error", provider)
            if isinstance(inner, Mapping):
                found.append(inner)
    return found


def read_rate_limit(error: object, *, now: float) -> RateLimited | None:
    """A rate limit, when the error object says it is one: a code of 429 or 529, a name of
    one (`rate_limit_exceeded`, `rate_limit_error`, …), or its words ("Rate limit exceeded",
    "Too Many Requests"), in the object or in the provider's own under `metadata.raw`; None
    for any other error, and for `insufficient_quota`, which no wait ends."""
    objects = _objects(error)
    if not objects:
        return None
    names = set().union(*(_names(o) for o in objects))
    if names & NEVER_WAITED_NAMES:
        return None
    numbered = {int(n) for n in names if n.isdigit() and len(n) <= 3}
    said = error_message(objects[0])
    if not (
        numbered & RATE_LIMITED_CODES
        or names & RATE_LIMITED_NAMES
        or _RATE_LIMIT_WORDS.search(said)
    ):
        return None
    return RateLimited(_asked_wait(objects, said, now))


def _asked_wait(objects: list[Mapping[str, object]], said: str, now: float) -> float | None:
    """The wait an error object asks for, in seconds: a `retry_after` (or `retry_after_ms`)
    of its own; the headers a gateway passed on in `metadata.headers` (`Retry-After`,
    `retry-after-ms`, OpenRouter's `X-RateLimit-Reset`, epoch milliseconds); Gemini's
    `RetryInfo`; or its words ("try again in 2m59.56s")."""
    for error in objects:
        for key, scale in (("retry_after_ms", 0.001), ("retry_after", 1.0)):
            if (seconds := _number(error.get(key))) is not None:
                return seconds * scale
        metadata = error.get("metadata")
        headers = metadata.get("headers") if isinstance(metadata, Mapping) else None
        if isinstance(headers, Mapping):
            lower = {str(k).lower(): v for k, v in headers.items()}
            for key, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
                if (seconds := _number(lower.get(key))) is not None:
                    return seconds * scale
            if (reset := _number(lower.get("x-ratelimit-reset"))) is not None:
                at = reset / 1000 if reset > 1e11 else reset  # milliseconds, or seconds
                return max(at - now, 0.0)
        if (delay := body_retry_delay(error)) is not None:
            return delay
    match = _TRY_AGAIN.search(said)
    if match is None or not any(match.group(i) for i in (1, 2, 3)):
        return None
    hours, minutes, amount, unit = match.groups()
    seconds = float(amount or 0) * (0.001 if unit and unit.lower() == "ms" else 1.0)
    return float(hours or 0) * 3600 + float(minutes or 0) * 60 + seconds


def _number(value: object) -> float | None:
    """A finite, non-negative number, as a number or as its text."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if number >= 0 and number != float("inf") else None
