"""A refusal said in what the endpoint sent, not in its status: the context window passed, or
a rate limit, in a 400's body or in an error object a 200 carried in place of its reply.

A gateway that has started a 200 cannot change its status when its provider fails part-way:
OpenRouter streams `data: {"error": {"code": 429, ...}}` in place of the rest, or puts the
error in the choice (`finish_reason: "error"`). Such a reply is the model failing
(`Completion.broke_off`), but when the object says the request was too long it is the same
refusal a 400 makes (the step compacts and goes again, the chat shortens its history), and
when it says the provider is rate limited it is waited out as a 429 is.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from temporalio import activity

from activities.completion import Completion
from activities.heartbeat import last_heartbeat
from activities.llm_errors import RateLimitWait, attempts_exhausted, rate_limited_reply
from activities.llm_request import ContextWindowExceeded
from reactive_temporal.contracts.llm_payloads import BilledReplies
from reactive_temporal.model_quirks import ModelQuirks, error_message, read_context_overflow
from reactive_temporal.reply_errors import read_rate_limit


def raise_if_overflow(
    quirks: ModelQuirks,
    model: str,
    error: object,
    said: str,
    cause: BaseException | None = None,
) -> None:
    """ContextWindowExceeded when `error` (a body, or an error object) says the request was
    longer than the model's window; the window learned in `quirks` when it names one."""
    overflow = read_context_overflow(error)
    if overflow is not None:
        if overflow.limit is not None:
            quirks.learn_context(model, overflow.limit)
        raise ContextWindowExceeded(model, said, overflow.limit) from cause


def raise_if_status_in(
    quirks: ModelQuirks,
    model: str,
    error: object,
    max_attempts: int | None = None,
    bill: BilledReplies | None = None,
) -> None:
    """An error object a 200 carried (in or beside its choices, or as its whole body) that
    says what a status would have: a context window passed is ContextWindowExceeded, as a
    400's is; a rate limit is waited out as a 429 is (`llm_errors.rate_limited_reply`),
    with `bill` (the reply's) added to what earlier attempts were billed for
    (`BilledReplies`, in the heartbeat and the failure). Anything else returns."""
    dump = getattr(error, "model_dump", None)
    error = dump() if error and not isinstance(error, Mapping) and callable(dump) else error
    if not error:
        return
    said = error_message({"error": error} if isinstance(error, Mapping) else error)
    raise_if_overflow(quirks, model, error, said or "an error object in its reply")
    limit = read_rate_limit(error, now=time.time())
    if limit is None:
        return
    details = None
    if bill is not None:
        earlier = last_heartbeat(BilledReplies) or BilledReplies()
        details = BilledReplies(
            usage=earlier.usage + bill.usage, cost=earlier.cost + bill.cost
        ).model_dump(mode="json")
        activity.heartbeat(details)  # the next attempt counts it (`llm_step._billed_before`)
    raise rate_limited_reply(
        said or "rate limited",
        limit,
        last_attempt=max_attempts is not None and attempts_exhausted(max_attempts),
        limited=RateLimitWait.now(),
        details=details,
    )


def raise_if_failed_as_status(
    quirks: ModelQuirks, model: str, completion: Completion, max_attempts: int | None
) -> None:
    """A 200 whose reply broke off with an error object that says what a status would have
    (`Completion.error`, `raise_if_status_in`), billed for the reply, where both were
    counted against the model's attempts as a bad reply."""
    bill = BilledReplies(usage=completion.usage, cost=completion.cost)
    raise_if_status_in(quirks, model, completion.error, max_attempts, bill)
