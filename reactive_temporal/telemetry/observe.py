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
import time
from collections.abc import Iterator

from temporalio.exceptions import ApplicationError

from reactive_temporal.telemetry.metrics import record_llm_call, record_tool_call
from reactive_temporal.telemetry.tracing import LlmSpan, llm_span, tool_span


class LlmCall:
    def __init__(self, span: LlmSpan) -> None:
        self.span = span
        self.input_tokens = self.output_tokens = 0
        self.cost_usd = 0.0
        self.ok = False

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
def observe_llm_call(model: str, *, provider: str = "openai") -> Iterator[LlmCall]:
    """Time one LLM request; record its outcome (ok, retryable_error, error) and usage."""
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


class ToolCall:
    def __init__(self) -> None:
        self.ok = True

    def failed(self) -> None:
        self.ok = False


@contextlib.contextmanager
def observe_tool_call(tool: str, call_id: str | None = None) -> Iterator[ToolCall]:
    """One tool execution: a span, and a count by outcome (an exception counts as error, a
    cancel as cancelled)."""
    call = ToolCall()
    outcome = "error"
    try:
        with tool_span(tool, call_id=call_id):
            yield call
        outcome = "ok" if call.ok else "error"
    except asyncio.CancelledError:
        outcome = "cancelled"
        raise
    finally:
        record_tool_call(tool, outcome=outcome)
