"""The two paths a chat turn takes once routed (workflows.chat_rules.route).

A mixin of AgentWorkflow, kept apart so the entity's module holds its state, its handlers
and its sessions:
- direct: one LLM activity with the agent's persona in the system prompt, what the agent
  knows of its runs as quoted notes, and the windowed session history;
- tool: a capped child AgentRunWorkflow, whose run gets its own debrief like any run.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from reactive_temporal import prompts
    from reactive_temporal import search_attributes as sa
    from reactive_temporal.contracts import names
    from reactive_temporal.contracts.entity import (
        ChatDirectInput,
        ChatDirectResult,
        ChatMessage,
        ChatReply,
        ChatRequest,
    )
    from reactive_temporal.contracts.result import AgentResult
    from reactive_temporal.contracts.run import AgentConfig, AgentRunInput
    from reactive_temporal.memory import chat_notes
    from reactive_temporal.ui_text import literal
    from workflows.activity_options import llm_options
    from workflows.agent_run import AgentRunWorkflow
    from workflows.chat_rules import TOOL_PATH_DEFAULT_ITERATIONS, tool_path_task, window_history
    from workflows.entity_patches import EntityPatches
    from workflows.run_tools import failure_message
    from workflows.session_turns import SessionTurns


class ChatPaths(EntityPatches):
    """A chat turn's reply, by the direct path or a tool-path run."""

    turns: SessionTurns

    async def _direct(
        self,
        agent: AgentConfig,
        message: str,
        context: str,
        history: list[ChatMessage],
        stream_id: str | None = None,
        session_id: str | None = None,
    ) -> ChatReply:
        direct = self._direct_input(agent, message, context, history)
        if stream_id is not None and agent.live_output:
            direct.stream_id = stream_id
        # data the activity records with the call's cost, not a decision: replays the same
        direct.session_id = session_id
        result: ChatDirectResult = await workflow.execute_activity(
            names.CHAT_DIRECT,
            direct,
            result_type=ChatDirectResult,
            # The activity counts LLM failures against llm_max_attempts; Temporal leaves room
            # beyond them for failures that are not the LLM's (it used to cap both at once).
            **llm_options(agent.llm_timeout_seconds, agent.llm_max_attempts),
            summary="chat · direct",
        )
        return ChatReply(
            message=result.message, routed_via="direct-llm", tokens=result.tokens, cost=result.cost
        )

    def _direct_input(
        self, agent: AgentConfig, message: str, context: str, history: list[ChatMessage]
    ) -> ChatDirectInput:
        """The persona in the system prompt; what the agent knows of its runs as quoted notes
        in a user-role message (entities started before that had it in the system prompt)."""
        notes = self._chat_notes_as_data()
        return ChatDirectInput(
            # the model's settings only: the persona is in `context` already (a 100,000-character
            # prompt went into the entity's history twice a turn)
            agent=agent.model_copy(update={"system_prompt": None}),
            context=prompts.direct_chat_system_prompt(
                agent.agent_id, agent.system_prompt, "" if notes else context
            ),
            history=window_history(history),
            message=message,
            notes=chat_notes(context) if notes else None,
        )

    async def _with_tools(
        self, agent: AgentConfig, request: ChatRequest, context: str, history: list[ChatMessage]
    ) -> ChatReply:
        agent = agent.model_copy(
            update={"max_iterations": request.max_iterations or TOOL_PATH_DEFAULT_ITERATIONS}
        )
        run_id = request.stream_id or names.chat_run_workflow_id(agent.agent_id, workflow.uuid4())
        try:
            with self.turns.tool_run(request.session_id, run_id):  # for the session_busy query
                result: AgentResult = await self._tool_run(agent, request, context, history, run_id)
        except Exception as err:  # the child's failure becomes the update's clear error
            # its own words (a refusal of its data, a bug), not "Child Workflow execution failed"
            raise ApplicationError(
                f"the tool-path run {run_id} failed: {failure_message(err)}"
            ) from err
        return ChatReply(
            message=result.output or "(the run produced no answer)",
            routed_via="react-loop",
            tools_used=result.tools_used,
            tokens=result.metadata.tokens_used,
            steps=result.metadata.steps_count,
            cost=result.metadata.cost,
            run_id=result.run_id,
        )

    async def _tool_run(
        self,
        agent: AgentConfig,
        request: ChatRequest,
        context: str,
        history: list[ChatMessage],
        run_id: str,
    ) -> AgentResult:
        """The tool-path turn's child run, to its result."""
        return await workflow.execute_child_workflow(
            AgentRunWorkflow.run,
            AgentRunInput(
                task=tool_path_task(
                    request.message, context, history, quoted=self._chat_notes_as_data()
                ),
                agent=agent,
                patch_bundle=names.RUN_PATCH_BUNDLE,
            ),
            id=run_id,
            # an id used before is refused, not run again: the new run took the old one's
            # stored transcript (its model answered the old task) and wrote over it
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            static_summary=f"chat: {literal(request.message[:200])}",
            memo={names.TASK_MEMO: f"chat: {request.message[:190]}"},
            search_attributes=TypedSearchAttributes(
                [SearchAttributePair(sa.AGENT_NAME, agent.agent_id)]
            ),
        )
