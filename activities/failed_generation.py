"""A tool call the endpoint refused to parse, taken from what the model wrote (Groq's 400
`tool_use_failed` and its `failed_generation`), when it reads unambiguously.

The refusal is an `ApplicationError` like any 400 that is retried (`RefusedGeneration`, from
`llm_errors`), carrying what the model wrote and the usage the body reported, if any. A step
that offered tools reads the calls out of it (`reactive_temporal.failed_calls`) and takes
them as its reply, the way calls read from a reply's text are taken (ids `text_<seq>_<n>`,
counted as an adaptation, said once per model); the call's usage is billed when the body
reported one. A generation that does not read, or that copies what a tool returned (a page
planting calls), is refused as before: retried, against the agent's attempts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from openai.types.chat import ChatCompletion
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.completion import Completion
from activities.llm_usage import usage_of
from activities.reply_calls import tool_results
from reactive_temporal.contracts.run import SeqMessage, Usage
from reactive_temporal.failed_calls import calls_of_failed_generation
from reactive_temporal.model_quirks import error_code, failed_generation
from reactive_temporal.pricing import ModelPrice, cost_of
from reactive_temporal.telemetry.metrics import record_adaptation
from reactive_temporal.text_calls import copied

TOOL_USE_FAILED = "tool_use_failed"
_SAID: set[str] = set()
"""Models whose refused calls this worker said it reads (once per model)."""


class RefusedGeneration(ApplicationError):
    """The endpoint refused the model's tool call as unparsable (`tool_use_failed`): the same
    failure as any such 400 (retried, against the agent's attempts), with what the model
    wrote and the usage the body reported, for a step to read the calls from."""

    def __init__(self, refused: ApplicationError, written: str, usage: object) -> None:
        super().__init__(
            refused.message,
            *refused.details,
            type=refused.type,
            non_retryable=refused.non_retryable,
            next_retry_delay=refused.next_retry_delay,
        )
        self.written = written
        self.usage = usage
        """The body's `usage` (an object), when it had one."""


def refused_generation(
    refused: ApplicationError, error: object, whole: object = None
) -> ApplicationError:
    """`refused` (a 400's failure), as a `RefusedGeneration` when its error object is a tool
    call the endpoint could not parse, with what the model wrote and the usage the error, or
    the `whole` body around it, reported."""
    written = failed_generation(error)
    if written is None or error_code(error) != TOOL_USE_FAILED:
        return refused
    return RefusedGeneration(refused, written, _body_usage(error, whole))


def _body_usage(error: object, whole: object) -> object:
    """The usage an error reported: inside the error object, beside it in the body, or under
    Groq's `x_groq`; None when it reported none."""
    places: list[object] = [error, whole]
    if isinstance(whole, Mapping):
        places.append(whole.get("x_groq"))
    for place in places:
        usage = place.get("usage") if isinstance(place, Mapping) else None
        if isinstance(usage, Mapping) and usage:
            return dict(usage)
    return None


def recovered_reply(
    refused: RefusedGeneration,
    request: dict[str, Any],
    real_names: Mapping[str, str],
    seq: int,
    transcript: Sequence[SeqMessage],
    prices: dict[str, ModelPrice] | None = None,
) -> Completion | None:
    """The reply the refused generation is, its calls made the reply's (ids
    `text_<seq>_<n>`), billed for the usage the body reported (priced with `prices`); None
    when it does not read as calls of offered tools (`real_names`: wire name → the tool's
    name), or copies what a tool in `transcript` returned."""
    calls = calls_of_failed_generation(refused.written, real_names)
    if calls is None or copied(refused.written, tool_results(transcript)):
        return None
    model = str(request.get("model"))
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"text_{seq}_{n}",
                "type": "function",
                "function": {"name": name, "arguments": args},
            }
            for n, (name, args) in enumerate(calls)
        ],
    }
    body: dict[str, Any] = {  # built without validation, as the client builds a reply
        "id": "",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": refused.usage,
    }
    response = ChatCompletion.model_construct(**body)
    usage = usage_of(response, request) if refused.usage is not None else Usage()
    cost = cost_of(
        model,
        usage.prompt_tokens,
        usage.completion_tokens,
        prices,
        cached_tokens=usage.cached_tokens,
    )
    record_adaptation(model, "refused_calls_read")
    if model not in _SAID:
        _SAID.add(model)
        activity.logger.warning(
            "model %s wrote tool calls its endpoint refused to parse (%s); this worker reads "
            "them from what the model wrote when they name offered tools with JSON arguments, "
            "and asks again otherwise",
            model,
            TOOL_USE_FAILED,
        )
    return Completion(response=response, usage=usage, cost=cost)
