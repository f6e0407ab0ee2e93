"""The `llm_step` activity: one chat-completions call over the run's transcript.

The openai client never retries (`max_retries=0`): Temporal owns retries. HTTP 408, 409,
429 and 5xx, timeouts and dropped connections are retryable (honouring `retry-after`);
any other 4xx is the request's fault and fails the step for good.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any, NoReturn

import openai
from openai.types.chat import ChatCompletion, ChatCompletionMessageFunctionToolCall
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.store import Store, to_openai
from reactive_temporal.config import ModelPrice
from reactive_temporal.contracts import names
from reactive_temporal.contracts.run import (
    LlmStepInput,
    LlmStepResult,
    Message,
    SeqMessage,
    ToolCall,
    Usage,
)
from reactive_temporal.pricing import cost_of
from reactive_temporal.rationale import parse_rationale_blocks, strip_rationale_blocks
from reactive_temporal.tools import ToolRegistry, wire_name

RETRYABLE_STATUS = {408, 409, 429}
MAX_RETRY_DELAY_SECONDS = 120.0


def retry_delay(headers: Any) -> timedelta | None:
    """The server's requested wait, from `retry-after-ms` or `retry-after` (seconds)."""
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue  # an HTTP date: let the retry policy's backoff decide
        return timedelta(seconds=min(max(seconds, 0.0), MAX_RETRY_DELAY_SECONDS))
    return None


def raise_for_status(err: openai.APIStatusError, *, last_attempt: bool = False) -> NoReturn:
    status = err.status_code
    retryable = status in RETRYABLE_STATUS or status >= 500
    should = err.response.headers.get("x-should-retry") if err.response is not None else None
    if should in ("true", "false"):
        retryable = should == "true"
    detail = err.message if isinstance(err.message, str) else str(err)
    gave_up = " (attempts exhausted)" if retryable and last_attempt else ""
    raise ApplicationError(
        f"LLM endpoint answered HTTP {status}: {detail[:500]}{gave_up}",
        type="LlmHttpError" if retryable else "LlmRequestRejected",
        non_retryable=not retryable or last_attempt,
        next_retry_delay=retry_delay(err.response.headers if err.response is not None else None),
    ) from err


@contextlib.contextmanager
def llm_errors(max_attempts: int | None = None) -> Iterator[None]:
    """Map the openai client's failures to Temporal's retry semantics.

    LLM failures count against `max_attempts` (the agent's cap); the activity's own retry
    policy is looser, so a Postgres or worker outage does not use up the LLM's attempts.
    """
    last = max_attempts is not None and activity.info().attempt >= max_attempts
    try:
        yield
    except openai.APIStatusError as err:
        raise_for_status(err, last_attempt=last)
    except (openai.APIConnectionError, openai.APITimeoutError) as err:
        raise ApplicationError(
            f"LLM endpoint unreachable: {err}{' (attempts exhausted)' if last else ''}",
            type="LlmConnectionError",
            non_retryable=last,
        ) from err


@contextlib.asynccontextmanager
async def heartbeating() -> AsyncIterator[None]:
    """Heartbeat while a long call is awaited, so a dead worker is noticed in seconds.

    Without it Temporal only retries an LLM call lost with its worker when the call's whole
    start-to-close timeout has passed.
    """
    timeout = activity.info().heartbeat_timeout
    if not timeout:
        yield
        return
    interval = max(timeout.total_seconds() / 3, 0.2)

    async def beat() -> None:
        while True:  # a call that ends before the first interval never heartbeats
            await asyncio.sleep(interval)
            activity.heartbeat()

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def client_timeout(activity_timeout: timedelta) -> float:
    """Give up on the HTTP call a little before Temporal gives up on the activity, so a hung
    call is seen here and counted against the LLM's attempts."""
    seconds = activity_timeout.total_seconds()
    return max(seconds - 2, seconds * 0.8)


class LlmActivities:
    def __init__(
        self,
        store: Store,
        client: openai.AsyncOpenAI,
        registry: ToolRegistry,
        prices: dict[str, ModelPrice] | None = None,
    ) -> None:
        self.store = store
        self.client = client
        self.registry = registry
        self.prices = prices or {}

    @activity.defn(name=names.LLM_STEP)
    async def llm_step(self, input: LlmStepInput) -> LlmStepResult:
        transcript = await self.store.load_messages(input.run_id, before_seq=input.seq)
        request: dict[str, Any] = {
            "model": input.model,
            "messages": [to_openai(m) for m in transcript],
        }
        tools = self.registry.schemas(input.tool_names)
        if tools:
            request["tools"] = tools
        if input.temperature is not None:
            request["temperature"] = input.temperature
        info = activity.info()
        timeout = info.start_to_close_timeout or timedelta(seconds=120)
        with llm_errors(input.max_attempts):
            async with heartbeating():
                # The same request `chat.completions.create` sends, minus its per-call walk
                # over every message (7–36 ms of CPU per step at 40–200 messages, measured in
                # bench/overhead.py): our dicts are already in the wire shape.
                response = await self.client.post(
                    "/chat/completions",
                    body=request,
                    cast_to=ChatCompletion,
                    options={"timeout": client_timeout(timeout)},
                )

        if not response.choices:
            raise ApplicationError("LLM answered with no choices", type="LlmEmptyResponse")
        choice = response.choices[0]
        real_names = {wire_name(n): n for n in input.tool_names}
        calls = [
            ToolCall(
                id=c.id,
                name=real_names.get(c.function.name, c.function.name),
                arguments=c.function.arguments or "{}",
            )
            for c in (choice.message.tool_calls or [])
            if isinstance(c, ChatCompletionMessageFunctionToolCall)
        ]
        content = choice.message.content
        rationale = {}
        if input.audit_rationale:
            rationale = parse_rationale_blocks(content)
            content = strip_rationale_blocks(content) or None
        await self.store.put_messages(
            input.run_id,
            [
                SeqMessage(
                    seq=input.seq,
                    message=Message(role="assistant", content=content, tool_calls=calls),
                )
            ],
        )
        usage = Usage(
            prompt_tokens=response.usage.prompt_tokens if response.usage else 0,
            completion_tokens=response.usage.completion_tokens if response.usage else 0,
        )
        return LlmStepResult(
            content=content,
            tool_calls=calls,
            finish_reason=choice.finish_reason,
            usage=usage,
            cost=cost_of(input.model, usage.prompt_tokens, usage.completion_tokens, self.prices),
            rationale=rationale,
        )
