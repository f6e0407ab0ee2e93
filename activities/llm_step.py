"""The `llm_step` activity: one turn of the run's model, over the transcript so far.

It reads the transcript from Postgres (the workflow passes only a reference), offers the tools
visible at this iteration, records the model's reply at its place in the transcript, and
returns the reply with its usage and cost. The call itself is `activities.llm_calls`'.
"""

from __future__ import annotations

from openai.types.chat import ChatCompletionMessageFunctionToolCall
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.llm_calls import LlmEndpoint, chat_request
from activities.store import Store, to_openai
from reactive_temporal.contracts import names
from reactive_temporal.contracts.run import (
    LlmStepInput,
    LlmStepResult,
    Message,
    SeqMessage,
    ToolCall,
)
from reactive_temporal.limits import bound_reply
from reactive_temporal.rationale import parse_rationale_blocks, strip_rationale_blocks
from reactive_temporal.tools import ToolRegistry, wire_name


class LlmActivities:
    def __init__(self, store: Store, llm: LlmEndpoint, registry: ToolRegistry) -> None:
        self.store = store
        self.llm = llm
        self.registry = registry

    @activity.defn(name=names.LLM_STEP)
    async def llm_step(self, input: LlmStepInput) -> LlmStepResult:
        transcript = await self.store.load_messages(input.run_id, before_seq=input.seq)
        request = chat_request(
            input.model,
            [to_openai(m) for m in transcript],
            tools=self.registry.schemas(input.tool_names),
            temperature=input.temperature,
        )
        completion = await self.llm.complete(request, max_attempts=input.max_attempts)
        response = completion.response
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
        # Whatever the model sent, what is stored and returned fits every payload limit.
        content, calls = bound_reply(content, calls)
        await self.store.put_messages(
            input.run_id,
            [
                SeqMessage(
                    seq=input.seq,
                    message=Message(role="assistant", content=content, tool_calls=calls),
                )
            ],
        )
        return LlmStepResult(
            content=content,
            tool_calls=calls,
            finish_reason=choice.finish_reason,
            usage=completion.usage,
            cost=completion.cost,
            rationale=rationale,
        )
