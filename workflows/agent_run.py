"""AgentRunWorkflow: one durable ReAct run.

The loop, as it runs:
  1. `prepare_run` seeds the transcript (system prompt, task) in Postgres and resolves tools.
  2. `llm_step` sends the transcript so far, with the tools visible at this iteration
     (`final-answer` only once the gate opens), and records the model's reply.
  3. The reply decides the turn (`workflows.turns.decide_turn`): run its tool calls as
     activities (bounded concurrency, failures become observations), judge a `final-answer`
     call, finish on `FINAL ANSWER:` text or a plain reply (`end_turn`), or nudge and go on.
  4. Stop at the iteration cap (`max_iterations`) or when the LLM fails for good (`llm_error`).
     An operator's `final_answer` signal ends the run at once, cancelling an LLM call in flight.

Only references cross into activities: each message is written to Postgres by the activity
that produced it and appears once in this workflow's history, so history grows linearly.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from reactive_temporal import search_attributes as sa
    from reactive_temporal.contracts import names
    from reactive_temporal.contracts.debrief import (
        AgentDebrief,
        DebriefWorkflowInput,
        RationaleEntry,
        ToolCallRecord,
    )
    from reactive_temporal.contracts.entity import NotifyAgentInput, RunFinished
    from reactive_temporal.contracts.result import AgentResult, RunMetadata
    from reactive_temporal.contracts.run import (
        FINAL_ANSWER_TOOL,
        AgentRunInput,
        FinalAnswerCapture,
        LlmStepInput,
        LlmStepResult,
        Message,
        PrepareRunInput,
        PrepareRunResult,
        RecordMessagesInput,
        RunProgress,
        RunToolInput,
        SeqMessage,
        TerminatedBy,
        ToolCall,
        ToolResult,
    )
    from workflows.activity_options import AGENT_SIGNAL, STORE, llm_options, tool_options
    from workflows.agent_debrief import DebriefWorkflow
    from workflows.chat_rules import analysis_observation, keep_recent, tool_observation
    from workflows.debrief_rules import (
        build_fallback,
        collect_debrief_input,
        derive_outcome,
        errors_from_loop,
        is_trivial,
    )
    from workflows.final_answer import (
        META_TOOLS,
        has_tool_work,
        judge_final_answer,
        should_show_final_answer,
        validate_output,
    )
    from workflows.turns import Act, Finish, Nudge, decide_turn, is_success

OBSERVATION_PREVIEW_CHARS = 500


def _short(text: str, limit: int = OBSERVATION_PREVIEW_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


@workflow.defn(name=names.AGENT_RUN_WORKFLOW)
class AgentRunWorkflow:
    @workflow.init
    def __init__(self, input: AgentRunInput) -> None:
        self.input = input
        self.agent = input.agent
        self.run_id = workflow.info().workflow_id
        self.iteration = 0
        self.seq = 0
        self.tool_names: list[str] = []
        self.tools_used: list[str] = []
        self.tool_calls: list[ToolCallRecord] = []
        self.rationale: list[RationaleEntry] = []
        self.observations: list[str] = []
        """What chat may quote of this run: tool results and the analysis after them."""
        self.last_turn_ran_tools = False
        self.has_errors = False
        self.gap_check_done = False
        self.steps = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cost = 0.0
        self.last_text = ""
        self.current_tool: str | None = None
        self.last_observation: str | None = None
        self.operator_answer: FinalAnswerCapture | None = None
        self.ending: tuple[TerminatedBy, str, FinalAnswerCapture | None] | None = None
        self.error: str | None = None
        self.local_store_steps = False

    @workflow.run
    async def run(self, input: AgentRunInput) -> AgentResult:
        started = workflow.now()
        workflow.upsert_search_attributes([sa.AGENT_NAME.value_set(self.agent.agent_id)])
        self.local_store_steps = workflow.patched(names.LOCAL_STORE_STEPS_PATCH)
        prepared: PrepareRunResult = await self._store_step(
            names.PREPARE_RUN,
            PrepareRunInput(
                run_id=self.run_id, task=input.task, agent=self.agent, started_at=started
            ),
            result_type=PrepareRunResult,
            summary="prepare run",
        )
        self.tool_names = prepared.tool_names
        self.seq = prepared.next_seq

        while self.ending is None and self.iteration < self.agent.max_iterations:
            self._publish_details()
            step = await self._llm_step()
            if step is None:  # ended by the operator or the LLM failed for good
                break
            await self._take_turn(step)
            if self.ending is None and self.operator_answer is not None:
                self._end_by_operator()
        if self.ending is None and self.operator_answer is not None:
            self._end_by_operator()
        return await self._finish(started)

    async def _take_turn(self, step: LlmStepResult) -> None:
        """Account for the model's reply, then act on it: finish, nudge, or run its tools."""
        self.seq += 1
        self.steps += 1
        self.prompt_tokens += step.usage.prompt_tokens
        self.completion_tokens += step.usage.completion_tokens
        self.cost += step.cost
        if step.content and step.content.strip():
            self.last_text = step.content.strip()
        if self.last_turn_ran_tools:
            self.observations = keep_recent(self.observations, [analysis_observation(step.content)])
        self.rationale += [
            RationaleEntry(iteration=self.iteration + 1, tool_name=call.name, rationale=why)
            for position, call in enumerate(step.tool_calls, start=1)
            if (why := step.rationale.get(position)) is not None
        ]
        decision = decide_turn(
            step.content,
            step.tool_calls,
            task=self.input.task,
            tools_used=self.tools_used,
            available_tools=self.tool_names,
            gap_check_done=self.gap_check_done,
        )
        if isinstance(decision, Finish):
            self.ending = (decision.terminated_by, decision.output, None)
        elif isinstance(decision, Nudge):
            self.has_errors = self.has_errors or decision.is_error
            self.gap_check_done = self.gap_check_done or decision.gap_check_rejected
            await self._record([Message(role="user", content=decision.note)])
        elif isinstance(decision, Act):
            await self._act(decision)
        self.last_turn_ran_tools = isinstance(decision, Act)
        self.iteration += 1
        workflow.upsert_search_attributes(
            [
                sa.ITERATIONS.value_set(self.iteration),
                sa.TOKENS_USED.value_set(self.prompt_tokens + self.completion_tokens),
            ]
        )

    async def _finish(self, started: datetime) -> AgentResult:
        """The result, the agent told, the debrief started, the search attributes set."""
        terminated_by, output, capture = self.ending or ("max_iterations", self.last_text, None)
        if self.error is not None:
            terminated_by, output = "llm_error", self.last_text
        self.current_tool = None
        self._publish_details(terminated_by)
        result = AgentResult(
            output=output,
            success=is_success(terminated_by, output),
            run_id=self.run_id,
            agent_id=self.agent.agent_id,
            format=capture.format if capture else "text",
            terminated_by=terminated_by,
            final_answer=capture,
            tools_used=[t for t in self.tools_used if t not in META_TOOLS],
            error=self.error,
            metadata=RunMetadata(
                duration_ms=int((workflow.now() - started).total_seconds() * 1000),
                tokens_used=self.prompt_tokens + self.completion_tokens,
                prompt_tokens=self.prompt_tokens,
                completion_tokens=self.completion_tokens,
                cost=round(self.cost, 8),
                steps_count=self.steps,
                iterations=self.iteration,
            ),
        )
        if self.agent.memory:
            result.debrief = build_fallback(
                collect_debrief_input(result, self.input.task, self.tool_calls, self.rationale)
            )
        await workflow.execute_local_activity(
            names.NOTIFY_AGENT,
            NotifyAgentInput(
                agent=self.agent,
                signal=names.RUN_FINISHED_SIGNAL,
                run_finished=RunFinished(
                    run_id=self.run_id,
                    started_at=started,
                    agent=self.agent,
                    debrief=result.debrief,
                    observations=self.observations,
                ),
            ),
            **AGENT_SIGNAL,
            summary="tell the agent the run finished",
        )
        if result.debrief is not None:
            await self._start_debrief(result, result.debrief)
        outcome = (
            result.debrief.outcome
            if result.debrief
            else derive_outcome(result.terminated_by, errors_from_loop(self.tool_calls))
        )
        workflow.upsert_search_attributes(
            [
                sa.TERMINATED_BY.value_set(result.terminated_by),
                sa.OUTCOME.value_set(outcome),
                sa.DEBRIEF_STATUS.value_set("pending" if result.debrief else "none"),
            ]
        )
        return result

    async def _start_debrief(self, result: AgentResult, fallback: AgentDebrief) -> None:
        """The rich debrief, in an abandoned child the run does not wait for."""
        debrief_input = collect_debrief_input(
            result, self.input.task, self.tool_calls, self.rationale
        )
        try:
            await workflow.start_child_workflow(
                DebriefWorkflow.run,
                DebriefWorkflowInput(
                    input=debrief_input,
                    fallback=fallback,
                    synthesize=not is_trivial(debrief_input),
                    model=self.agent.debrief_model or self.agent.model,
                    llm_timeout_seconds=self.agent.llm_timeout_seconds,
                    agent_workflow_id=names.agent_workflow_id(self.agent.agent_id),
                ),
                id=names.debrief_workflow_id(self.run_id),
                parent_close_policy=ParentClosePolicy.ABANDON,
                static_summary=f"debrief of {self.run_id}",
            )
        except WorkflowAlreadyStartedError:
            workflow.logger.info("debrief of %s already started (a reset run)", self.run_id)

    @workflow.signal(name=names.FINAL_ANSWER_SIGNAL)
    def final_answer(self, answer: FinalAnswerCapture) -> None:
        """An operator ends the run with this answer (same payload as the tool)."""
        problem = validate_output(answer.output, answer.format)
        if problem is not None:
            workflow.logger.warning("final_answer signal ignored: %s", problem)
            return
        self.operator_answer = answer

    @workflow.query(name=names.PROGRESS_QUERY)
    def progress(self) -> RunProgress:
        return RunProgress(
            run_id=self.run_id,
            agent_id=self.agent.agent_id,
            status="completed" if self.ending or self.error else "running",
            iteration=self.iteration,
            max_iterations=self.agent.max_iterations,
            current_tool=self.current_tool,
            tools_called=list(self.tools_used),
            tokens=self.prompt_tokens + self.completion_tokens,
            last_observation=self.last_observation,
            terminated_by=self.ending[0] if self.ending else None,
        )

    # -- one LLM step -------------------------------------------------------------------

    def _visible_tools(self) -> list[str]:
        show = should_show_final_answer(
            required_tools=self.agent.required_tools,
            tools_used=self.tools_used,
            iteration=self.iteration,
            has_errors=self.has_errors,
            has_non_meta_tool_called=has_tool_work(self.tools_used, self.agent.required_tools),
        )
        return self.tool_names + ([FINAL_ANSWER_TOOL] if show else [])

    async def _llm_step(self) -> LlmStepResult | None:
        """The model's next reply; None when the operator ended the run or the LLM failed."""
        self.current_tool = None
        tokens = self.prompt_tokens + self.completion_tokens
        handle = workflow.start_activity(
            names.LLM_STEP,
            LlmStepInput(
                run_id=self.run_id,
                seq=self.seq,
                iteration=self.iteration,
                model=self.agent.model,
                tool_names=self._visible_tools(),
                temperature=self.agent.temperature,
                audit_rationale=self.agent.audit_rationale,
                max_attempts=self.agent.llm_max_attempts,
            ),
            result_type=LlmStepResult,
            **llm_options(self.agent.llm_timeout_seconds, self.agent.llm_max_attempts),
            summary=f"llm · iteration {self.iteration + 1} · {_tokens(tokens)} tokens so far",
        )
        await workflow.wait_condition(lambda: handle.done() or self.operator_answer is not None)
        if not handle.done():
            handle.cancel()
        try:
            return await handle
        except ActivityError as err:
            if self.operator_answer is None:
                self.error = _failure_message(err)
            return None
        except asyncio.CancelledError:
            return None

    # -- acting on a turn ---------------------------------------------------------------

    async def _act(self, act: Act) -> None:
        """Run the turn's tools, then judge any final-answer call in it."""
        first_seq = self.seq
        self.seq += len(act.tool_calls)
        regular = [(first_seq + i, c) for i, c in enumerate(act.tool_calls)]
        finals = [(s, c) for s, c in regular if c.name == FINAL_ANSWER_TOOL]
        regular = [(s, c) for s, c in regular if c.name != FINAL_ANSWER_TOOL]

        limit = asyncio.Semaphore(self.agent.max_parallel_tools)
        results = await asyncio.gather(
            *(self._call_tool(seq, call, limit) for seq, call in regular)
        )
        for result in results:
            self.tool_calls.append(
                ToolCallRecord(
                    name=result.name,
                    success=result.success,
                    duration_ms=result.duration_ms,
                    iteration=self.iteration + 1,
                    error=None if result.success else result.content,
                )
            )
            if result.name in self.tool_names and result.name not in self.tools_used:
                self.tools_used.append(result.name)
            self.has_errors = self.has_errors or not result.success
            self.last_observation = _short(result.content)
        self.observations = keep_recent(
            self.observations, [tool_observation(r.content, r.success) for r in results]
        )

        notes: list[SeqMessage] = []
        for seq, call in finals:
            if FINAL_ANSWER_TOOL not in self.tools_used:
                self.tools_used.append(FINAL_ANSWER_TOOL)
            if self.ending is not None:  # a second call in the same turn: already done
                continue
            verdict = judge_final_answer(
                call.arguments,
                task=self.input.task,
                required_tools=self.agent.required_tools,
                tools_used=self.tools_used,
                available_tools=self.tool_names,
                gap_check_done=self.gap_check_done,
            )
            self.gap_check_done = self.gap_check_done or verdict.gap_check_rejected
            if verdict.accepted and verdict.capture is not None:
                self.ending = ("final_answer_tool", verdict.capture.output, verdict.capture)
                observation = f"✓ final-answer accepted: {_short(verdict.capture.output)}"
            else:
                self.has_errors = True
                observation = f"⚠️ {verdict.error}"
            self.last_observation = observation
            notes.append(SeqMessage(seq=seq, message=_tool_message(call, observation)))
        if notes:
            await self._record_at(notes)
        if self.ending is None and act.final_text:
            self.ending = ("final_answer", act.final_text, None)

    async def _call_tool(self, seq: int, call: ToolCall, limit: asyncio.Semaphore) -> ToolResult:
        if call.name not in self.tool_names:
            available = ", ".join(self.tool_names) or "none"
            content = f"[Tool error: unknown tool {call.name!r}. Available tools: {available}]"
            await self._record_at([SeqMessage(seq=seq, message=_tool_message(call, content))])
            return ToolResult(call_id=call.id, name=call.name, success=False, content=content)
        async with limit:
            self.current_tool = call.name
            self.steps += 1
            try:
                return await workflow.execute_activity(
                    names.RUN_TOOL,
                    RunToolInput(run_id=self.run_id, seq=seq, call=call),
                    result_type=ToolResult,
                    **tool_options(self.agent),
                    summary=_tool_summary(call),
                )
            except ActivityError as err:
                content = f"[Tool error: {call.name} failed: {_failure_message(err)}]"
                await self._record_at([SeqMessage(seq=seq, message=_tool_message(call, content))])
                return ToolResult(call_id=call.id, name=call.name, success=False, content=content)

    def _end_by_operator(self) -> None:
        answer = self.operator_answer
        assert answer is not None
        self.ending = ("final_answer_tool", answer.output, answer)

    # -- transcript -----------------------------------------------------------------------

    async def _record(self, messages: list[Message]) -> None:
        entries = [SeqMessage(seq=self.seq + i, message=m) for i, m in enumerate(messages)]
        self.seq += len(messages)
        await self._record_at(entries)

    async def _record_at(self, entries: list[SeqMessage]) -> None:
        await self._store_step(
            names.RECORD_MESSAGES,
            RecordMessagesInput(run_id=self.run_id, messages=entries),
            summary="record observation",
        )

    async def _store_step(
        self, name: str, arg: object, *, summary: str, result_type: type | None = None
    ) -> Any:
        """A short Postgres write. New runs make it a local activity (no task-queue round trip:
        6–14 ms less per call, bench/overhead.py); runs started before that change replay as
        the full activities they recorded."""
        execute = (
            workflow.execute_local_activity if self.local_store_steps else workflow.execute_activity
        )
        return await execute(
            name,
            arg,
            result_type=result_type,
            **STORE,
            summary=summary,
        )

    def _publish_details(self, terminated_by: str | None = None) -> None:
        tokens = _tokens(self.prompt_tokens + self.completion_tokens)
        state = f"ended: {terminated_by}" if terminated_by else "running"
        workflow.set_current_details(
            f"**{state}** · iteration {self.iteration}/{self.agent.max_iterations} · "
            f"last tool: {self.tools_used[-1] if self.tools_used else '—'} · {tokens} tokens"
        )


def _tool_message(call: ToolCall, content: str) -> Message:
    return Message(role="tool", content=content, tool_call_id=call.id, name=call.name)


def _tool_summary(call: ToolCall, limit: int = 80) -> str:
    args = call.arguments.strip()
    if args.startswith("{") and args.endswith("}"):
        args = args[1:-1]
    args = args if len(args) <= limit else args[:limit] + "…"
    return f"tool {call.name}({args})"


def _tokens(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def _failure_message(err: ActivityError) -> str:
    cause: BaseException = err
    while not isinstance(cause, ApplicationError) and isinstance(cause.__cause__, BaseException):
        cause = cause.__cause__
    return str(cause)
