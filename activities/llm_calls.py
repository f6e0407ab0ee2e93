"""The one way activities call the LLM: the request, the call, its usage and cost, its errors.

`llm_step` (the run), `chat_direct` (chat) and `synthesize_debrief` (the rich debrief) all
go through `LlmEndpoint.complete`:

- the request is a plain dict in the chat-completions wire shape
  (`llm_request.chat_request`), posted as it is: the request `chat.completions.create`
  sends, minus its per-call walk over every message (7–36 ms of CPU per call at 40–200
  messages, measured in bench/overhead.py);
- the HTTP call gives up a little before the activity does (`llm_request.client_timeout`),
  so a hung call is seen here and counted against the LLM's attempts, and the activity
  heartbeats while it waits;
- the openai client never retries (`max_retries=0`): Temporal owns retries. HTTP 408, 409,
  429 and 5xx, timeouts and dropped connections are retryable (honouring `retry-after`); any
  other 4xx is the request's fault and fails for good (`activities.llm_errors`);
- what the model accepts decides the parameters (`reactive_temporal.capabilities`): a
  reasoning model gets `max_completion_tokens` and no sampling parameters; a 400 that names a
  parameter the model refuses makes the call go again without it, and this worker leaves it
  out for that model from then on (`ModelQuirks`), so nobody sees a failed run or chat for it;
  a 400 that says the request is longer than the window raises `ContextWindowExceeded`;
- the reply comes back with its token usage (reasoning tokens too, `activities.llm_usage`) and
  its cost (`Completion`);
- with `on_text`, the call streams (`stream: true`, `stream_options.include_usage`) and
  hands each text delta to `on_text` as it arrives (and thinking sent apart to
  `on_thinking`); the chunks are put back together
  (`activities.llm_stream`, as plain dicts) into the same `ChatCompletion` an unstreamed
  call returns, so nothing downstream knows. An endpoint that refuses to stream is asked again
  without it, and this worker stops asking it to stream for that model.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import openai
from openai.types.chat import ChatCompletion
from temporalio import activity

from activities import status_in_reply as statuses
from activities.completion import Completion
from activities.heartbeat import heartbeating
from activities.llm_errors import llm_errors, never_connected
from activities.llm_request import client_timeout
from activities.llm_stream import Added, StreamedReply, whole_reply_as_chunk
from activities.llm_usage import prompt_count_low, usage_of
from activities.prompted_tools import tools_in_prompt
from activities.request_messages import for_strict_templates, thinking_back
from reactive_temporal.capabilities import (
    ModelCapabilities,
    WantedParams,
    capabilities_for,
    request_params,
)
from reactive_temporal.llm_endpoints import endpoint_for
from reactive_temporal.model_quirks import (
    SHAPE_WORDS,
    ModelQuirks,
    read_rejection,
    read_shape_refusal,
    read_stream_refusal,
)
from reactive_temporal.pricing import ModelPrice, cost_of
from reactive_temporal.schema_subset import SubsetSchemas
from reactive_temporal.telemetry.metrics import record_adaptation
from reactive_temporal.telemetry.observe import observe_llm_call

DEFAULT_ACTIVITY_TIMEOUT = timedelta(seconds=120)
MAX_LEARNED_PER_CALL = 4
MODELS_REMEMBERED = 1_024
"""Models whose capabilities a worker keeps worked out (a run names its model: any string)."""
"""Parameters one call may learn to leave out before its 400 stands (each 400 names one)."""
WANTED = ("max_tokens", "temperature", "top_p", "reasoning_effort")
"""Request keys that say what the caller wants, adapted to the model before sending."""
TextSink = Callable[[str], None]
"""Takes each text delta of a streamed reply, as it arrives (it must not block)."""


def _also(first: TextSink, then: TextSink) -> TextSink:
    def both(text: str) -> None:
        first(text)
        then(text)

    return both


def _hand_on(added: Added, on_text: TextSink, on_thinking: TextSink | None) -> None:
    """A chunk's thinking, then its text, to the sinks that take them."""
    if added.thinking and on_thinking is not None:
        on_thinking(added.thinking)
    if added.text:
        on_text(added.text)


class LlmEndpoint:
    """An OpenAI-compatible endpoint as activities use it (one per worker, shared)."""

    def __init__(
        self,
        client: openai.AsyncOpenAI,
        prices: dict[str, ModelPrice] | None = None,
        *,
        capabilities: dict[str, ModelCapabilities] | None = None,
        context_tokens: int | None = None,
        routes: Mapping[str, openai.AsyncOpenAI] | None = None,
    ) -> None:
        self.client = client
        self.routes = dict(routes or {})
        """Other endpoints' clients, by the pattern of the models they serve
        (AGENT_LLM_ENDPOINTS, `reactive_temporal.llm_endpoints`)."""
        self._chosen: dict[str, openai.AsyncOpenAI] = {}
        self.prices = prices or {}
        self.overrides = capabilities or {}
        self.context_tokens = context_tokens
        self.quirks = ModelQuirks()
        self._capabilities: dict[str, tuple[int, ModelCapabilities]] = {}
        self.no_streaming: set[str] = set()
        """Models whose endpoint refused to stream: asked without it from then on."""
        self.no_stream_usage: set[str] = set()
        """Models whose endpoint refused `stream_options` alone (Azure OpenAI's older API
        versions, some local servers): streamed without asking for usage (estimated)."""
        self.low_counts: set[str] = set()
        """Models whose endpoint counted a prompt too low for it: said once (`llm_usage`)."""
        self.subset_schemas = SubsetSchemas()
        """Tool schemas in Gemini's subset, converted once for every step that sends them."""

    def client_for(self, model: str) -> openai.AsyncOpenAI:
        """The client of the endpoint that serves `model` (chosen once per model)."""
        chosen = self._chosen.get(model)
        if chosen is None:
            pattern = endpoint_for(model, self.routes)
            chosen = self._chosen[model] = self.client if pattern is None else self.routes[pattern]
        return chosen

    def capabilities(self, model: str) -> ModelCapabilities:
        """What `model` accepts: the table, the configuration, then what this worker learned.
        Worked out once per model until the worker learns something (a step asks five
        times, 15 µs each); the same object each time: read it, never change it."""
        known = self._capabilities.get(model)
        if known is not None and known[0] == self.quirks.lessons:
            return known[1]
        table = capabilities_for(model, self.overrides, context_tokens=self.context_tokens)
        caps = self.quirks.apply(model, table)
        if len(self._capabilities) >= MODELS_REMEMBERED:
            self._capabilities.clear()  # a worker asked for that many models: start again
        self._capabilities[model] = (self.quirks.lessons, caps)
        return caps

    def adapt(self, request: dict[str, Any], *, streamed: bool = False) -> dict[str, Any]:
        """The request with its wishes (`WANTED`) in the form the model accepts, streamed or not,
        its messages and tool schemas in the shape the model wants."""
        wanted = WantedParams(
            max_output_tokens=request.get("max_tokens"),
            temperature=request.get("temperature"),
            top_p=request.get("top_p"),
            reasoning_effort=request.get("reasoning_effort"),
        )
        base = {k: v for k, v in request.items() if k not in WANTED}
        model = str(request["model"])
        caps = self.capabilities(model)
        if caps.tools_in_prompt:  # its server takes no tools: described, calls as text
            base = tools_in_prompt(base)
        if (caps.strict_roles or caps.nine_char_call_ids) and base.get("messages"):
            base["messages"] = for_strict_templates(
                base["messages"],
                strict_roles=caps.strict_roles,
                nine_char_call_ids=caps.nine_char_call_ids,
            )
        if caps.thinking_sent_back and base.get("messages"):
            base["messages"] = thinking_back(base["messages"])
        if caps.thinking_off_unstreamed and not streamed:
            base["enable_thinking"] = False
        if caps.tool_schema_subset and base.get("tools"):
            base["tools"] = self.subset_schemas.tools(base["tools"])
        params = request_params(caps, wanted)
        return base | self.quirks.without_refused_values(model, params)

    async def complete(
        self,
        request: dict[str, Any],
        *,
        max_attempts: int | None,
        on_text: TextSink | None = None,
        on_thinking: TextSink | None = None,
    ) -> Completion:
        """Send one chat-completions request from inside an activity; LLM failures raise
        ApplicationErrors that Temporal retries (or not), counted against `max_attempts`.
        With `on_text`, the reply streams and each text delta goes to it as it arrives, and
        each delta of thinking its endpoint sends apart to `on_thinking`.

        A model seen thinking before its answer is learned as one that does
        (`ModelCapabilities.thinks`): its output cap gets room to think from then on. A reply
        that its cap cut off while the model was still thinking, asked without that room, is
        asked again once with it (both calls counted): a chat turn of a model served under a
        name the table cannot know was "(no answer)", its debrief never synthesized."""
        model = str(request["model"])
        had_room = self.capabilities(model).thinks or self.capabilities(model).reasoning
        completion = await self._complete_once(request, max_attempts, on_text, on_thinking)
        if had_room or not completion.thought():
            return completion
        self.quirks.learn_thinks(model)
        record_adaptation(model, "thinks_learned")
        activity.logger.info("model %s thinks before it answers: its output cap gets room", model)
        if not (completion.cut_while_thinking and request.get("max_tokens")):
            return completion
        again = await self._complete_once(request, max_attempts, on_text, on_thinking)
        return again.after(completion)

    async def _complete_once(
        self,
        request: dict[str, Any],
        max_attempts: int | None,
        on_text: TextSink | None,
        on_thinking: TextSink | None = None,
    ) -> Completion:
        timeout = activity.info().start_to_close_timeout or DEFAULT_ACTIVITY_TIMEOUT
        model = str(request["model"])
        priced = functools.partial(cost_of, model, overrides=self.prices)
        with observe_llm_call(model, priced=priced) as observed:  # a span and metrics per request
            observed.sent(request)
            if on_text is not None:
                on_text = _also(observed.streamed, on_text)
            deadline = client_timeout(timeout)
            with llm_errors(max_attempts):
                async with heartbeating():
                    try:
                        # the whole reply, however it trickles: the transport's timeout is
                        # per read, and a token a second kept a call going past the
                        # activity's timeout (retried as an outage, two calls at once)
                        async with asyncio.timeout(deadline):
                            response = await self._send_adapted(
                                request, deadline, on_text, on_thinking
                            )
                    except (openai.APITimeoutError, TimeoutError) as err:
                        # the endpoint may have answered it in full, if it ever had it
                        observed.timed_out = not never_connected(err)
                        raise
                if not isinstance(response, ChatCompletion):  # a 200 that is not JSON
                    raise ValueError(f"not a chat completion: {str(response)[:200]!r}")
                error = getattr(response, "error", None)  # a 200 whose body is an error
                if error and not getattr(response, "choices", None):
                    statuses.raise_if_status_in(self.quirks, model, error, max_attempts)
                    raise ValueError(f"the endpoint answered with an error: {str(error)[:300]}")
                usage = usage_of(response, request)
            prompt_count_low(model, usage, request, self.low_counts)  # billed as reported
            cost = cost_of(
                model,
                usage.prompt_tokens,
                usage.completion_tokens,
                self.prices,
                cached_tokens=usage.cached_tokens,
            )
            observed.succeeded(
                input_tokens=usage.prompt_tokens,
                output_tokens=usage.completion_tokens,
                cost_usd=cost,
                response_model=response.model,
            )
        completion = Completion(response=response, usage=usage, cost=cost)
        statuses.raise_if_failed_as_status(self.quirks, model, completion, max_attempts)
        return completion

    async def _send_adapted(
        self,
        request: dict[str, Any],
        http_timeout: float,
        on_text: TextSink | None = None,
        on_thinking: TextSink | None = None,
    ) -> ChatCompletion:
        """Send the request as the model accepts it; learn from a 400 that names a parameter
        it refuses and go again without it."""
        model = str(request["model"])
        for learned in range(MAX_LEARNED_PER_CALL + 1):
            stream = on_text is not None and model not in self.no_streaming
            body = self.adapt(request, streamed=stream)
            try:
                if stream and on_text is not None:
                    return await self._stream(body, http_timeout, on_text, on_thinking)
                return await self._send(body, http_timeout)
            except openai.APIStatusError as err:
                # a 422 is read as a 400 is: Mistral refuses a field it does not know with
                # one, TGI a request past its window ("inputs tokens + max_new_tokens …")
                if not isinstance(err, openai.BadRequestError | openai.UnprocessableEntityError):
                    if err.status_code == 413:  # may be the context window too
                        self._raise_if_overflow(model, err)
                    raise
                refused = read_stream_refusal(err.body) if stream else None
                if refused is not None:
                    if refused == "stream_options" and model not in self.no_stream_usage:
                        self.no_stream_usage.add(model)
                        how = "streamed without asking for usage (estimated)"
                    else:  # `stream` itself (or `stream_options` again: streaming, then)
                        self.no_streaming.add(model)
                        how = "without streaming"
                    activity.logger.warning(
                        "model %s refused %r in a streamed call; this worker asks it %s from "
                        "now on (%s)",
                        model,
                        refused,
                        how,
                        str(err.message)[:200],
                    )
                    continue
                self._raise_if_overflow(model, err)
                if learned < MAX_LEARNED_PER_CALL and self._learned_shape(model, err):
                    continue
                rejection = read_rejection(err.body, body.keys())
                if rejection is None or learned == MAX_LEARNED_PER_CALL:
                    raise
                self.quirks.learn(model, rejection, body.get(rejection.param))
                record_adaptation(model, "parameter_left_out")
                activity.logger.warning(
                    "model %s refused %r%s; this worker leaves it out for that model from now "
                    "on%s (%s)",
                    model,
                    rejection.param,
                    f"={body.get(rejection.param)!r}" if rejection.value_only else "",
                    f" and sends {rejection.use_instead!r}" if rejection.use_instead else "",
                    str(err.message)[:200],
                )
            except openai.APIError as err:  # an error object in place of the rest of a stream
                self._raise_if_overflow(model, err)  # a context window passed, said late
                raise
        raise AssertionError("unreachable")  # the loop returns or raises

    def _learned_shape(self, model: str, err: openai.APIStatusError) -> bool:
        """Whether the 400 refused the request's shape in a way this worker did not know the
        model wants (`read_shape_refusal`): learned, and the call goes again in that shape."""
        shape = read_shape_refusal(err.body)
        if shape is None or getattr(self.capabilities(model), shape):
            return False
        self.quirks.learn_shape(model, shape)
        record_adaptation(model, "shape_learned")
        activity.logger.warning(
            "model %s refused the request's shape; this worker sends it %s from now on (%s)",
            model,
            SHAPE_WORDS[shape],
            str(err.message)[:200],
        )
        return True

    def _raise_if_overflow(self, model: str, err: openai.APIError) -> None:
        """ContextWindowExceeded when the refusal says the request was too long."""
        statuses.raise_if_overflow(self.quirks, model, err.body, str(err.message), cause=err)

    async def _send(self, body: dict[str, Any], http_timeout: float) -> ChatCompletion:
        """One HTTP call, the request as it is."""
        return await self.client_for(str(body.get("model"))).post(
            "/chat/completions",
            body=body,
            cast_to=ChatCompletion,
            options={"timeout": http_timeout},
        )

    async def _stream(
        self,
        body: dict[str, Any],
        http_timeout: float,
        on_text: TextSink,
        on_thinking: TextSink | None = None,
    ) -> ChatCompletion:
        """One streamed HTTP call: each content delta to `on_text`, each delta of thinking
        sent apart to `on_thinking`, the reply reassembled."""
        stream = await self.client_for(str(body.get("model"))).post(
            "/chat/completions",
            body={**body, "stream": True, **self._usage_asked(str(body.get("model")))},
            cast_to=ChatCompletion,
            stream=True,
            stream_cls=openai.AsyncStream[object],  # chunks as decoded JSON: no model per chunk
            options={"timeout": http_timeout},
        )
        reply = StreamedReply()
        async with stream:
            kind = stream.response.headers.get("content-type", "")
            if kind.startswith("text/html"):  # a proxy's error page, with status 200
                page = (await stream.response.aread())[:200].decode("utf-8", "replace")
                raise ValueError(f"not a stream of a chat completion ({kind}): {page!r}")
            if kind.startswith("application/json"):
                # an endpoint that ignores `stream` and answers the whole reply as JSON: read
                # as one chunk (it was read as an empty stream: a billed reply thrown away)
                whole = whole_reply_as_chunk(await stream.response.aread())
                if isinstance(whole, dict) and whole.get("error") and not whole.get("choices"):
                    statuses.raise_if_status_in(self.quirks, str(body.get("model")), whole["error"])
                    raise ValueError(f"the endpoint answered with an error: {whole['error']}"[:400])
                _hand_on(reply.merge(whole), on_text, on_thinking)
                return reply.completion()
            async for chunk in stream:
                _hand_on(reply.merge(chunk), on_text, on_thinking)
        return reply.completion()

    def _usage_asked(self, model: str) -> dict[str, Any]:
        """How a streamed call asks for its usage (a last chunk): not at all of an endpoint
        that refused `stream_options` (`no_stream_usage`)."""
        return {} if model in self.no_stream_usage else {"stream_options": {"include_usage": True}}

    async def close(self) -> None:
        for client in (self.client, *self.routes.values()):
            await client.close()
