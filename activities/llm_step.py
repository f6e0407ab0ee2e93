"""The `llm_step` activity: one turn of the run's model, over the transcript so far.

It reads the transcript from Postgres (the workflow passes only a reference), shows the model
a view of it that fits its context window (`activities.llm_context`), offers the tools visible
at this iteration, records the model's reply at its place in the transcript, and returns the
reply with its usage and cost. The call itself is `activities.llm_calls`'.

When the endpoint says the request was too long after all (`context_length_exceeded`), the
step compacts harder and goes again, up to `MAX_OVERFLOW_RETRIES` times, instead of ending
the run.

What a step costs stays flat as the run grows: the worker keeps each run's transcript between
steps and reads only what is new (`activities.transcripts`). A model call is made at most
once per step: the reply is recorded with the step's whole result as soon as it exists, and a
retried attempt returns that record instead of calling the model again
(`activities.step_records`); Postgres outages are waited out inside the attempt, heartbeating
from the step's start, and never count as the model's failures. A reply the attempt could not
record before its deadline goes to the next attempt in its heartbeat (`activities.held_reply`).
"""

from __future__ import annotations

import functools
from typing import Any

from psycopg import AsyncConnection
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.completion import Completion
from activities.debrief_store import DebriefStore
from activities.failed_generation import RefusedGeneration, recovered_reply
from activities.heartbeat import heartbeating, last_heartbeat
from activities.held_reply import held_reply, hold
from activities.llm_calls import LlmEndpoint
from activities.llm_context import ContextPlan, ContextRecord, StepContext, StepContexts
from activities.llm_errors import attempts_exhausted
from activities.llm_request import ContextWindowExceeded, chat_request
from activities.pg_refusals import refused_data, refused_data_fails
from activities.reply_calls import finish_reason_of, read_reply, recorded_thinking, with_thinking
from activities.reply_notes import note_reply
from activities.request_messages import view_messages
from activities.run_events import RunEvents
from activities.run_seed import RunSeeding, resolve_tools, seed_length, seed_messages
from activities.run_started import count_run_started
from activities.run_stops import RUN_STOPS
from activities.step_records import (
    STORE_UNAVAILABLE,
    StepRecords,
    record_step,
    recorded,
    seconds_to_spare,
    until_stored,
)
from activities.store import Store
from activities.text_stream import TextStream
from activities.transcript_rows import thinking_tokens
from activities.transcripts import Transcripts
from activities.turn_state import recorded_state
from reactive_temporal.contracts import names
from reactive_temporal.contracts.events import NewEvent, once_key
from reactive_temporal.contracts.llm_payloads import BilledReplies, LlmStepInput, LlmStepResult
from reactive_temporal.contracts.run import Message, PrepareRunResult, RunSeed, SeqMessage, Usage
from reactive_temporal.limits import bound_rationale, bound_reply
from reactive_temporal.pricing import price_for
from reactive_temporal.tool_registry import ToolRegistry, wire_name

MAX_OVERFLOW_RETRIES = 3
NO_RECORD = ContextRecord(previous=None, plan=ContextPlan())
"""A new run's context record: no plan, no earlier call."""


class LlmActivities:
    def __init__(
        self,
        store: Store,
        llm: LlmEndpoint,
        registry: ToolRegistry,
        records: StepRecords | None = None,
        seeding: RunSeeding | None = None,
    ) -> None:
        self.store = store
        self.records = records or StepRecords(store)
        self.llm = llm
        self.registry = registry
        self.seeding = seeding or RunSeeding(store, DebriefStore(store), registry)
        self.contexts = StepContexts(store)
        self.transcripts = Transcripts(store)
        self.events = RunEvents(store)

    @activity.defn(name=names.LLM_STEP)
    @refused_data_fails
    async def llm_step(self, input: LlmStepInput) -> LlmStepResult:
        """One model call over the transcript so far, recorded before it is returned; a run's
        first step seeds the transcript first; stopped with its run (`activities.run_stops`)."""
        async with RUN_STOPS.stoppable(), heartbeating():
            prepared = None
            if input.seed is not None:
                input, prepared, seeded = await self._seeded(input, input.seed)
                if seeded is not None:  # written only now: no reply can be recorded yet
                    return await self._step(input, prepared, seeded)
            earlier = await recorded(self.store, input.run_id, input.seq, LlmStepResult)
            if earlier is not None:
                return earlier
            if (held := held_reply(input.seq)) is not None:
                return await self._record_held(input, *held)
            return await self._step(input, prepared)

    async def _record_held(
        self, input: LlmStepInput, held: LlmStepResult, thinking: str | None, state: str | None
    ) -> LlmStepResult:
        """The reply an earlier attempt got and could not record (`activities.held_reply`),
        recorded now (with its thinking and state) instead of asking the model again."""
        reply = Message(role="assistant", content=held.content, tool_calls=held.tool_calls)
        await record_step(
            self.records, input.run_id, input.seq, reply, with_thinking(held, thinking, state),
            what="recording the model's reply an earlier attempt got",
        )  # fmt: skip
        self.transcripts.add(input.run_id, input.seq, reply, recorded_thinking(thinking), state)
        return held

    async def _seeded(
        self, input: LlmStepInput, seed: RunSeed
    ) -> tuple[LlmStepInput, PrepareRunResult, list[SeqMessage] | None]:
        """The first step's input once its run is seeded (`activities.run_seed`): at the
        reply's position, with the run's tools; and the seed when this attempt wrote it (an
        attempt after one that wrote it goes on after that seed, notes and all)."""
        prepared = resolve_tools(seed, self.registry)
        written, notes = await until_stored(
            functools.partial(self.seeding.written_or_notes, input.run_id, seed),
            what="reading the run's transcript and its agent's notes",
        )
        seeded = None
        if not written:
            written = seeded = seed_messages(seed, notes)
            await until_stored(
                functools.partial(self.store.put_messages, input.run_id, written),
                what="seeding the transcript",
            )
            self.transcripts.seed(input.run_id, written)
            count_run_started(seed.agent_id)
        prepared = prepared.model_copy(update={"next_seq": seed_length(written)})
        step = input.model_copy(
            update={
                "seq": prepared.next_seq,
                "tool_names": [*prepared.tool_names, *input.tool_names],
                "seed": None,
            }
        )
        return step, prepared, seeded

    async def _step(
        self,
        input: LlmStepInput,
        prepared: PrepareRunResult | None = None,
        seeded: list[SeqMessage] | None = None,
    ) -> LlmStepResult:
        if input.cost_budget and price_for(input.model, self.llm.prices) is None:
            raise ApplicationError(
                f"the run has a cost budget, but this worker has no price for model "
                f"{input.model!r}, so its calls would cost $0 and the budget would never end "
                "the run; the model was not called. Give it a price (AGENT_MODEL_PRICES, or "
                "`register_price` in the worker), or use a token budget",
                type=names.UNPRICED_MODEL_ERROR,
                non_retryable=True,
            )
        tools = self.registry.schemas(input.tool_names)

        async def read_inputs() -> tuple[list[SeqMessage], StepContext]:
            # one checkout and one round trip for both reads: both queries in a pipeline,
            # their answers read once it has ended (a read inside would sync it once more)
            async with self.store.connection() as conn:
                async with conn.pipeline():
                    reading = await self.transcripts.begin_read(input.run_id, input.seq, conn)
                    loading = await self.contexts.records.begin_load(input.run_id, input.seq, conn)
                transcript = await reading()
                context = await self._context(
                    input, transcript, tools, conn=conn, recorded=await loading()
                )
            return transcript, context

        if seeded is not None:  # this attempt wrote the transcript, and nothing else is stored
            transcript = seeded
            context = await until_stored(
                functools.partial(self._context, input, transcript, tools, recorded=NO_RECORD),
                what="planning the step's context",
            )
        else:
            transcript, context = await until_stored(
                read_inputs, what="reading the transcript and the step's context"
            )
        # the last text writes may not use the time the reply needs to be recorded (or its
        # failure named)
        async with self.events.streaming(
            input.run_id if input.stream else None,
            input.seq,
            time_left=seconds_to_spare,
            # the live output: the turn begins (written once, however retried)
            begins=NewEvent(
                type="iteration",
                step=input.seq,
                data={"iteration": input.iteration + 1},
                key=once_key("iteration", input.seq, activity.info().workflow_run_id),
            ),
            hand_over=True,  # the last text goes out with the reply's record, below
            calls_in_text=lambda: self.llm.capabilities(input.model).calls_in_text,
        ) as text:
            completion, context, overflows = await self._complete_within_window(
                input, transcript, tools, context, text
            )
        response = completion.response
        earlier_usage, earlier_cost = _billed_before()
        usage, cost = earlier_usage + completion.usage, earlier_cost + completion.cost
        if not response.choices:
            raise await self._billed_failure(
                input, text, BilledReplies(usage=usage, cost=cost),
                "LLM answered with no choices", "LlmEmptyResponse",
            )  # fmt: skip
        if (broke_off := completion.broke_off) is not None:  # half a reply, not the turn
            raise await self._billed_failure(
                input, text, BilledReplies(usage=usage, cost=cost),
                f"LLM endpoint's reply broke off part-way: {broke_off}", "LlmBadReply",
            )  # fmt: skip
        try:  # whatever the endpoint put in its reply: an error here is the model's
            choice = response.choices[0]
            caps = self.llm.capabilities(input.model)
            read = read_reply(
                choice.message,
                {wire_name(n): n for n in input.tool_names},
                audit_rationale=input.audit_rationale,
                id_prefix=f"text_{input.seq}",
                calls_in_text=caps.calls_in_text,
                transcript=transcript,
            )
            note_reply(input.model, input.run_id, read, tools_in_prompt=caps.tools_in_prompt)
            # Whatever the model sent, what is stored and returned fits every payload limit.
            content, calls = bound_reply(read.content, read.calls)
        except Exception as err:  # unreadable however often it is asked again as an outage
            raise await self._billed_failure(
                input, text, BilledReplies(usage=usage, cost=cost),
                f"LLM endpoint sent a reply that could not be read: {type(err).__name__}: "
                f"{str(err)[:300]}",
                "LlmBadReply",
            ) from None  # fmt: skip
        result = LlmStepResult(
            content=content,
            tool_calls=calls,
            finish_reason=finish_reason_of(choice.finish_reason),
            usage=usage,
            cost=cost,
            rationale=bound_rationale(read.rationale),
            context=context.report(overflows),
            prepared=prepared,
            unread_calls=read.unread_calls is not None,
        )
        reply = Message(role="assistant", content=content, tool_calls=calls)
        state = recorded_state(read.state, input.run_id)  # the endpoint's, for its next requests
        try:
            await record_step(
                self.records,
                input.run_id,
                input.seq,
                reply,
                with_thinking(result, read.thinking, state),
                events=text.last_of_reply(calls_only=read.calls_from_text and not read.content)
                if text is not None
                else (),
                also=self.contexts.sent(
                    input.run_id, input.seq, context, completion.usage.prompt_tokens
                ),
                what="recording the model's reply",
            )
        except ApplicationError as err:
            if err.type == STORE_UNAVAILABLE:  # the next attempt records it, not buys it again
                hold(input.run_id, input.seq, result, read.thinking, state)
            raise
        except Exception as err:  # a reply Postgres refuses: the run ends, and counts its bill
            refused = refused_data(err)
            if refused is None:
                raise
            billed = BilledReplies(usage=usage, cost=cost).model_dump(mode="json")
            raise ApplicationError(
                refused.message, billed, type=refused.type, non_retryable=True
            ) from err
        self.transcripts.add(
            input.run_id, input.seq, reply, recorded_thinking(read.thinking), state
        )
        return result

    async def _billed_failure(
        self,
        input: LlmStepInput,
        text: TextStream | None,
        billed: BilledReplies,
        message: str,
        kind: str,
    ) -> ApplicationError:
        """The model failing with a reply it was billed for: counted against its attempts,
        the reply's usage carried to the attempt that answers (in the heartbeat's details),
        the text that streamed written for watchers."""
        if text is not None:
            await self.events.try_append(input.run_id, text.last)
        activity.heartbeat(billed.model_dump(mode="json"))
        last = attempts_exhausted(input.max_attempts)
        return ApplicationError(
            f"{message}{' (attempts exhausted)' if last else ''}",
            billed.model_dump(mode="json"),  # the run counts it when the step fails for good
            type=kind,
            non_retryable=last,
        )

    async def _context(
        self,
        input: LlmStepInput,
        transcript: list[SeqMessage],
        tools: list[dict[str, Any]],
        *,
        refused: StepContext | None = None,
        conn: AsyncConnection[Any] | None = None,
        recorded: ContextRecord | None = None,
    ) -> StepContext:
        """The step's view of the transcript for its model (`StepContexts.prepare`)."""
        caps = self.llm.capabilities(input.model)
        return await self.contexts.prepare(
            input.run_id,
            input.seq,
            transcript,
            tools,
            caps,
            refused=refused,
            conn=conn,
            recorded=recorded,
            thinking=thinking_tokens(transcript) if caps.thinking_sent_back else None,
        )

    async def _complete_within_window(
        self,
        input: LlmStepInput,
        transcript: list[SeqMessage],
        tools: list[dict[str, Any]],
        context: StepContext,
        live: TextStream | None = None,
    ) -> tuple[Completion, StepContext, int]:
        """The model's reply to the step's view; a view the endpoint refuses as too long is
        compacted harder (within the window it named, when it named one) and sent again."""
        for overflows in range(MAX_OVERFLOW_RETRIES + 1):
            request = chat_request(
                input.model,
                view_messages(
                    context.view,
                    transcript,
                    context.plan.levels,
                    self.llm.capabilities(input.model).thinking_sent_back,
                ),
                tools=tools,
                temperature=input.temperature,
                reasoning_effort=input.reasoning_effort,
            )
            try:
                completion = await self.llm.complete(
                    request,
                    max_attempts=input.max_attempts,
                    on_text=live.add if live is not None else None,
                    on_thinking=live.add_thinking if live is not None else None,
                )
                return completion, context, overflows
            except RefusedGeneration as failed:  # Groq's: calls its parser refused, as written
                names = {wire_name(n): n for n in input.tool_names}
                recovered = recovered_reply(
                    failed, request, names, input.seq, transcript, self.llm.prices
                )
                if recovered is None:
                    raise
                return recovered, context, overflows
            except ContextWindowExceeded:
                if overflows == MAX_OVERFLOW_RETRIES:
                    raise
                refused = context
                context = await until_stored(
                    functools.partial(self._context, input, transcript, tools, refused=refused),
                    what="compacting the step's context",
                )
                if context.view == refused.view:
                    raise  # nothing left to compact: the head alone is too long
                activity.logger.warning(
                    "%s: request refused as too long for %s; sending %d messages compacted "
                    "(about %d tokens)",
                    input.run_id,
                    input.model,
                    context.plan.compacted,
                    context.estimated,
                )
        raise AssertionError("unreachable")


def _billed_before() -> tuple[Usage, float]:
    billed = last_heartbeat(BilledReplies) or BilledReplies()
    return billed.usage, billed.cost
