"""How a run acts on a turn: its tool calls run, its final answers judged.

A mixin of AgentRunWorkflow, kept apart so the run loop in workflows/agent_run.py stays a
loop. Each tool call is an activity, at most `max_parallel_tools` at once; calls past the
per-turn cap or with arguments too large to carry are refused as observations; a call
needing approval waits for its person (workflows/run_controls.py); a failed call becomes an
observation the model reads next turn; each `final-answer` call meets the hard gate.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from reactive_temporal.contracts import names
    from reactive_temporal.contracts.llm_payloads import BilledReplies
    from reactive_temporal.contracts.run import (
        FINAL_ANSWER_TOOL,
        AgentConfig,
        AgentRunInput,
        Message,
        RunToolInput,
        SeqMessage,
        ToolCall,
        ToolResult,
    )
    from reactive_temporal.prompts import unfinished_nudge
    from reactive_temporal.ui_text import literal
    from workflows.activity_options import tool_options
    from workflows.final_answer import missing_required_tools
    from workflows.run_controls import tool_message
    from workflows.run_limits import (
        admitted_tool_calls,
        oversized_arguments_observation,
        too_many_calls_observation,
    )
    from workflows.run_state import RunState
    from workflows.turns import Act, Ending


class RunTools:
    """The tools of AgentRunWorkflow's turns (which provides the state, the patch flags and
    the transcript writes declared here)."""

    input: AgentRunInput
    agent: AgentConfig
    run_id: str
    state: RunState
    limit_tool_calls: bool
    """Calls past the per-turn cap are refused (the tool-call-limits patch)."""
    reply_cut_off: bool
    """The reply being acted on was cut off at the output token limit (its last call may be)."""
    approvals_on: bool
    honest_endings: bool
    """Every ending waits for the agent's required tools (the honest-endings patch)."""

    async def _record(self, messages: list[Message]) -> None:
        raise NotImplementedError

    async def _record_at(self, entries: list[SeqMessage]) -> None:
        raise NotImplementedError

    async def _await_approvals(
        self, calls: list[tuple[int, ToolCall]]
    ) -> list[tuple[int, ToolCall]]:
        raise NotImplementedError

    def _stopping(self) -> bool:
        raise NotImplementedError

    def patched(self, patch_id: str) -> bool:
        raise NotImplementedError

    async def _act(self, act: Act) -> None:
        """Run the turn's tool calls, then judge its final-answer calls; a `FINAL ANSWER:` in
        the same reply ends the run when no call did."""
        first = self.state.claim_seqs(len(act.tool_calls))
        placed = [(first + i, call) for i, call in enumerate(act.tool_calls)]
        if self.limit_tool_calls:
            placed = await self._refuse_over_limits(placed)
        runnable = [(s, c) for s, c in placed if c.name != FINAL_ANSWER_TOOL]
        if self.approvals_on:
            runnable = await self._await_approvals(runnable)
        await self._run_tools(runnable)
        await self._judge_final_answers([(s, c) for s, c in placed if c.name == FINAL_ANSWER_TOOL])
        if act.final_text and not self.state.ended:
            missing = missing_required_tools(self._required_tools(), self.state.tools_used)
            if missing:
                await self._record([Message(role="user", content=unfinished_nudge(missing))])
            else:
                self.state.end(Ending("final_answer", act.final_text))

    def _required_tools(self) -> list[str]:
        """The tools every ending waits for (only the final-answer tool did, before)."""
        return self.agent.required_tools if self.honest_endings else []

    async def _refuse_over_limits(
        self, placed: list[tuple[int, ToolCall]]
    ) -> list[tuple[int, ToolCall]]:
        """The calls that may run; the rest (past the per-turn cap, or with arguments too
        large to carry) are refused as observations and count as failed calls."""
        admitted, over = admitted_tool_calls([c for _, c in placed])
        notes = {id(c): too_many_calls_observation(c, len(placed), len(admitted)) for c in over}
        notes |= {id(c): n for c in admitted if (n := oversized_arguments_observation(c))}
        if not notes:
            return placed
        refused = [(s, c, notes[id(c)]) for s, c in placed if id(c) in notes]
        await self._record_at(
            [SeqMessage(seq=s, message=tool_message(c, n)) for s, c, n in refused]
        )
        self.state.record_tool_results(
            [ToolResult(call_id=c.id, name=c.name, success=False, content=n) for _, c, n in refused]
        )
        return [(s, c) for s, c in placed if id(c) not in notes]

    async def _run_tools(self, calls: list[tuple[int, ToolCall]]) -> None:
        """Each call an activity, at most `max_parallel_tools` at once; failures become
        observations the model reads next turn, a result Postgres refused for good too
        (workflows/store_refusals.py)."""
        limit = asyncio.Semaphore(self.agent.max_parallel_tools)
        results = await asyncio.gather(*(self._call_tool(seq, call, limit) for seq, call in calls))
        self.state.record_tool_results(results)

    async def _call_tool(self, seq: int, call: ToolCall, limit: asyncio.Semaphore) -> ToolResult:
        if call.name not in self.state.tool_names:
            available = ", ".join(self.state.tool_names) or "none"
            content = f"[Tool error: unknown tool {call.name!r}. Available tools: {available}]"
            await self._record_at([SeqMessage(seq=seq, message=tool_message(call, content))])
            return ToolResult(call_id=call.id, name=call.name, success=False, content=content)
        async with limit:
            self.state.current_tool = call.name
            self.state.steps += 1
            try:
                return await workflow.execute_activity(
                    names.RUN_TOOL,
                    RunToolInput(
                        run_id=self.run_id,
                        seq=seq,
                        call=call,
                        live_output=self.agent.live_output,
                        cut_off=self.reply_cut_off,
                    ),
                    result_type=ToolResult,
                    **tool_options(self.agent, self.state.tool_timeouts.get(call.name)),
                    summary=_tool_summary(call),
                )
            except ActivityError as err:
                if self._stopping() and is_cancelled_exception(err):
                    raise  # cancelled because the run is stopping, not a failed tool
                content = f"[Tool error: {call.name} failed: {failure_message(err)}]"
                await self._record_at([SeqMessage(seq=seq, message=tool_message(call, content))])
                return ToolResult(call_id=call.id, name=call.name, success=False, content=content)

    async def _judge_final_answers(self, calls: list[tuple[int, ToolCall]]) -> None:
        """The hard gate on each `final-answer` call; the verdict is the call's observation."""
        notes: list[SeqMessage] = []
        for seq, call in calls:
            observation = self.state.judge_final_answer(
                call,
                task=self.input.task,
                agent=self.agent,
                limit_answer=self.limit_tool_calls,
                nulls_allowed=lambda: self.patched(names.NULL_ANSWER_FIELDS_PATCH),
                budgeted=lambda: self.patched(names.PAYLOAD_BUDGET_PATCH),
            )
            if observation is not None:
                notes.append(SeqMessage(seq=seq, message=tool_message(call, observation)))
        if notes:
            await self._record_at(notes)


def _tool_summary(call: ToolCall, limit: int = 80) -> str:
    args = call.arguments.strip()
    if args.startswith("{") and args.endswith("}"):
        args = args[1:-1]
    args = args if len(args) <= limit else args[:limit] + "…"
    return f"tool {literal(call.name)}({literal(args)})"  # the model's: shown, never rendered


def _application_cause(err: BaseException) -> BaseException:
    cause: BaseException = err
    while not isinstance(cause, ApplicationError) and isinstance(cause.__cause__, BaseException):
        cause = cause.__cause__
    return cause


def failure_message(err: BaseException) -> str:
    """The words of the first ApplicationError in a failure's causes (an activity's or a
    child workflow's own error), else of its innermost cause."""
    return str(_application_cause(err))


def failure_type(err: ActivityError) -> str | None:
    """The activity's ApplicationError type (e.g. `UnknownToolError`), if it raised one."""
    cause = _application_cause(err)
    return cause.type if isinstance(cause, ApplicationError) else None


def failure_billed(err: BaseException) -> BilledReplies | None:
    """What an LLM step's failure says it was billed for (`BilledReplies`, its
    ApplicationError's first detail); None when it says nothing, as failures from before it."""
    cause = _application_cause(err)
    details = cause.details if isinstance(cause, ApplicationError) else ()
    if not details or not isinstance(details[0], dict):
        return None
    try:
        return BilledReplies.model_validate(details[0])
    except ValidationError:
        return None
