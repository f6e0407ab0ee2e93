"""One hook per real LLM request and per real tool call: a span and the metrics, together.

    with observe_llm_call(model) as call:
        response = await ...                       # the request that really goes out
        call.succeeded(input_tokens=…, output_tokens=…, cost_usd=…, response_model=…)

    with observe_tool_call("calculator", call_id) as call:
        result = await ...
        call.failed()                              # when the tool's result is an error

Used only where the request or the tool really runs (inside activities), so replays, which
never run activities, and recorded replies, which never call again, are not counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from temporalio.exceptions import ApplicationError

from reactive_temporal.context_window import CHARS_PER_TOKEN, wire_prompt_tokens
from reactive_temporal.telemetry.metrics import (
    record_llm_call,
    record_tool_call,
    record_unreported_usage,
)
from reactive_temporal.telemetry.tracing import LlmSpan, llm_span, tool_span


class LlmCall:
    def __init__(self, span: LlmSpan) -> None:
        self.span = span
        self.input_tokens = self.output_tokens = 0
        self.cost_usd = 0.0
        self.ok = False
        self.request: Mapping[str, Any] | None = None
        self.streamed_chars = 0
        self.timed_out = False

    def sent(self, request: Mapping[str, Any]) -> None:
        """The request goes out: from here the provider may bill it."""
        self.request = request

    def streamed(self, text: str) -> None:
        """Reply text that arrived (generated, so billed, whether or not the reply ends)."""
        self.streamed_chars += len(text)

    def unreported(self, outcome: str) -> tuple[int, int] | None:
        """(input, output) tokens, estimated, of a request that went out and ended without
        the endpoint's usage in a way that is likely billed: stopped, timed out, or cut off
        after text arrived (not refused: a 4xx, or a connection never made)."""
        if self.ok or self.request is None:
            return None
        if outcome != "cancelled" and not self.timed_out and not self.streamed_chars:
            return None
        output = math.ceil(self.streamed_chars / CHARS_PER_TOKEN)
        return wire_prompt_tokens(self.request), output

    def succeeded(
        self,
        *,
        input_tokens: int,
        output_tokens: int,
        cost_usd: float,
        response_model: str | None = None,
    ) -> None:
        self.ok = True
        self.input_tokens, self.output_tokens, self.cost_usd = input_tokens, output_tokens, cost_usd
        self.span.record_usage(
            input_tokens=input_tokens, output_tokens=output_tokens, response_model=response_model
        )


@contextlib.contextmanager
def observe_llm_call(
    model: str,
    *,
    provider: str = "openai",
    priced: Callable[[int, int], float] = lambda _input, _output: 0.0,
) -> Iterator[LlmCall]:
    """Time one LLM request; record its outcome (ok, retryable_error, error, cancelled) and
    usage, or an estimate of it (`priced` in US dollars) when the endpoint never said."""
    started = time.monotonic()
    outcome = "error"
    call: LlmCall | None = None
    try:
        with llm_span(model, provider=provider) as span:
            call = LlmCall(span)
            try:
                yield call
            except ApplicationError as err:
                outcome = "error" if err.non_retryable else "retryable_error"
                raise
            except asyncio.CancelledError:
                outcome = "cancelled"  # its run stopped, or the worker: not the model's failing
                raise
            outcome = "ok" if call.ok else "error"
    finally:
        record_llm_call(
            model,
            outcome=outcome,
            seconds=time.monotonic() - started,
            input_tokens=call.input_tokens if call else 0,
            output_tokens=call.output_tokens if call else 0,
            cost_usd=call.cost_usd if call else 0.0,
        )
        unreported = call.unreported(outcome) if call else None
        if unreported is not None:
            record_unreported_usage(
                model,
                input_tokens=unreported[0],
                output_tokens=unreported[1],
                cost_usd=priced(*unreported),
            )


class ToolCall:
    def __init__(self) -> None:
        self.ok = True

    def failed(self) -> None:
        self.ok = False


@contextlib.contextmanager
def observe_tool_call(tool: str, call_id: str | None = None) -> Iterator[ToolCall]:
    """One tool execution: a span, a count by outcome (an exception counts as error, a
    cancel as cancelled) and its duration."""
    call = ToolCall()
    outcome = "error"
    started = time.monotonic()
    try:
        with tool_span(tool, call_id=call_id):
            yield call
        outcome = "ok" if call.ok else "error"
    except asyncio.CancelledError:
        outcome = "cancelled"
        raise
    finally:
        record_tool_call(tool, outcome=outcome, seconds=time.monotonic() - started)
