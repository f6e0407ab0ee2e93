"""The rich debrief's activities: one LLM synthesis call, and persistence.

`synthesize_debrief` never fails on a bad answer: an answer that is not usable JSON comes
back as `parsed=None`, with what the call was billed, and the deterministic debrief stands
with that bill. HTTP failures are raised like `llm_step`'s (the call is
`activities.llm_calls`'), so Temporal retries them; a reply that cannot be read at all fails
the attempt as `llm_step`'s does (`LlmBadReply`, against the LLM's attempts, its bill in the
failure's details: it was retried as an outage, up to 53 billed calls, none of them counted).
The DebriefWorkflow falls back when retries end. The prompt is `prompts.synthesis_prompt`.

The answer comes back without credentials (`activities/memory_redaction.py`): the model read
the run's tool output, and a key it wrote into a finding or a lesson would reach every later
run's prompt.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.completion import Completion
from activities.debrief_store import DebriefStore
from activities.heartbeat import last_heartbeat
from activities.llm_calls import LlmEndpoint
from activities.llm_errors import unreadable_reply
from activities.llm_request import ContextWindowExceeded, chat_request
from activities.memory_redaction import redacted
from activities.pg_refusals import refused_data_fails
from reactive_temporal.context_window import (
    CHARS_PER_TOKEN,
    estimate_tokens,
    fit_text,
    prompt_budget,
    reserved_output,
)
from reactive_temporal.contracts import names
from reactive_temporal.contracts.debrief import (
    PersistDebriefInput,
    SynthesisFields,
    SynthesisRequest,
    SynthesisResult,
    SynthesisTokens,
)
from reactive_temporal.contracts.llm_payloads import BilledReplies
from reactive_temporal.limits import bound_synthesis
from reactive_temporal.prompts import SYNTHESIS_SYSTEM_PROMPT, synthesis_prompt
from reactive_temporal.secrets_scan import redact

SYNTHESIS_MAX_TOKENS = 800

_FENCE_OPEN = re.compile(r"^\s*```(?:json)?\s*", re.IGNORECASE)
_FENCE_CLOSE = re.compile(r"\s*```\s*$")


def parse_synthesis(text: str | None) -> SynthesisFields | None:
    """The JSON object in the answer, plain, fenced or wrapped in prose; None if there is none."""
    cleaned = _FENCE_CLOSE.sub("", _FENCE_OPEN.sub("", (text or "").strip()))
    candidates = [cleaned]
    start, end = cleaned.find("{"), cleaned.rfind("}")
    if start != -1 and end > start:
        candidates.append(cleaned[start : end + 1])  # upstream does not look inside prose
    for candidate in candidates:
        try:
            value: Any = json.loads(candidate)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            try:
                return SynthesisFields.model_validate(value)
            except ValidationError:
                return None
    return None


def _with_bill(err: ApplicationError, earlier: BilledReplies) -> ApplicationError:
    """`err` (the call failing: an outage, a refusal) carrying what earlier attempts were
    billed for replies that could not be read, in its details and in this attempt's last
    heartbeat, so neither the next attempt nor the debrief, when it is the last, loses it."""
    details = earlier.model_dump(mode="json")
    activity.heartbeat(details)  # this attempt's beats during the call said nothing
    return ApplicationError(
        err.message,
        details,
        type=err.type,
        non_retryable=err.non_retryable,
        next_retry_delay=err.next_retry_delay,
    )


class DebriefActivities:
    def __init__(self, debriefs: DebriefStore, llm: LlmEndpoint) -> None:
        self.debriefs = debriefs
        self.llm = llm

    @activity.defn(name=names.SYNTHESIZE_DEBRIEF)
    async def synthesize_debrief(self, request: SynthesisRequest) -> SynthesisResult:
        """One LLM call over the run's signals, fitted to the debrief model's window (a long
        task or answer is shortened in the middle; a refusal as too long shortens it more).

        Every reply is billed, so its usage always comes back: with an answer that is not
        usable JSON too (`parsed=None`), and added to what earlier attempts were billed for
        replies that could not be read (`BilledReplies`, carried in their heartbeat). A
        failure of this attempt carries that bill in its details, so a synthesis that fails
        for good still says what it cost (the DebriefWorkflow records it)."""
        earlier = last_heartbeat(BilledReplies) or BilledReplies()
        try:
            completion = await self._complete(request)
        except ApplicationError as err:
            if earlier.usage.total_tokens <= 0:
                raise
            raise _with_bill(err, earlier) from None
        billed = BilledReplies(
            usage=earlier.usage + completion.usage, cost=earlier.cost + completion.cost
        )
        owner = f"run {request.input.run_id}"
        try:  # whatever the endpoint put in its reply: an error here is the model's
            if (broke_off := completion.broke_off) is not None:  # half a reply: half its JSON
                raise ValueError(f"the reply broke off part-way: {broke_off}")
            content = completion.content
            # before bounding (a cut must not leave half a key) and after (control
            # characters taken out must not join the halves of one)
            parsed = redacted(
                bound_synthesis(redacted(parse_synthesis(content), where="synthesis", owner=owner)),
                where="synthesis",
                owner=owner,
            )
        except Exception as err:
            activity.heartbeat(billed.model_dump(mode="json"))  # the next attempt adds to it
            # the debrief counts the bill when this fails for good
            bill = billed.model_dump(mode="json")
            raise unreadable_reply(err, request.max_attempts, bill) from None
        if parsed is None:
            activity.logger.warning(
                "debrief synthesis answer was not usable JSON; keeping fallback (its %d tokens "
                "counted)",
                billed.usage.total_tokens,
            )
        return SynthesisResult(
            parsed=parsed,
            raw_excerpt=redact(content or "")[:500],  # the same keys as `parsed`: counted there
            tokens=SynthesisTokens.billed(billed),
        )

    async def _complete(self, request: SynthesisRequest) -> Completion:
        """The model's answer to the synthesis prompt, sent shorter when refused as too long."""
        prompt = synthesis_prompt(request.input)
        limit = self._prompt_chars(request.model)
        for attempt in range(2):
            messages = [
                {"role": "system", "content": SYNTHESIS_SYSTEM_PROMPT},
                {"role": "user", "content": fit_text(prompt, limit)},
            ]
            try:
                return await self.llm.complete(
                    chat_request(
                        request.model,
                        messages,
                        temperature=0.2,
                        max_tokens=SYNTHESIS_MAX_TOKENS,
                        reasoning_effort=request.reasoning_effort,
                    ),
                    max_attempts=request.max_attempts,
                )
            except ContextWindowExceeded:
                if attempt == 1:
                    raise
                # the window it learned from the refusal, or half of what was refused
                limit = min(self._prompt_chars(request.model), min(limit, len(prompt)) // 2)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _prompt_chars(self, model: str) -> int:
        """How much of the synthesis prompt fits the model's window, in characters."""
        caps = self.llm.capabilities(model)
        budget = prompt_budget(
            caps.context_tokens, reserved_output(caps.context_tokens, SYNTHESIS_MAX_TOKENS)
        )
        room = budget - estimate_tokens(SYNTHESIS_SYSTEM_PROMPT) - 50
        return max(2_000, int(room * CHARS_PER_TOKEN))

    @activity.defn(name=names.PERSIST_DEBRIEF)
    @refused_data_fails
    async def persist_debrief(self, input: PersistDebriefInput) -> None:
        await self.debriefs.save(input.input, input.debrief)
