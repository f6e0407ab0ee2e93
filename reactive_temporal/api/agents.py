"""The Python API's connected agent: run tasks on it durably, chat about them.

    agent = await ReactiveAgents.create().with_name("my-agent").build()  # api/builder.py
    result = await agent.run("What is (17 * 23) + 4?")
    await agent.dispose()

Each `run` is an AgentRunWorkflow on Temporal. With no TEMPORAL_ADDRESS and no `starter.py
dev` running, `build()` starts the embedded stack and a worker inside this process.

`Agent` is the one object a user holds, so it only gathers: what each method does lives in
the module it calls (`api.run_results`, `api.control`, `api.watching`, `api.debriefs`,
`api.entity_handle`, …), which the CLI calls too, so the two cannot drift apart.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

from temporalio.client import WorkflowHandle
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError

from reactive_temporal import search_attributes as sa
from reactive_temporal.api.approval_listing import PendingCall, pending_calls
from reactive_temporal.api.arguments import waiting_seconds
from reactive_temporal.api.bulk_cancel import CancelledRuns, cancel_running
from reactive_temporal.api.chat_refusals import chat_request
from reactive_temporal.api.control import cancel_recorded, decide, request_cancel
from reactive_temporal.api.debriefs import wait_for_rich_debriefs
from reactive_temporal.api.entity_handle import AgentEntity
from reactive_temporal.api.entity_reset import EntityReset, reset_entity
from reactive_temporal.api.progress import run_progress
from reactive_temporal.api.run_inputs import build_run_input
from reactive_temporal.api.run_results import RunResult, run_result
from reactive_temporal.api.runs import require_run
from reactive_temporal.api.sessions import Session
from reactive_temporal.api.unserved import while_served
from reactive_temporal.api.watching import follow_events, stream_events
from reactive_temporal.contracts import names
from reactive_temporal.contracts.approvals import ApprovalOutcome
from reactive_temporal.contracts.debrief import AgentDebrief
from reactive_temporal.contracts.entity import DEFAULT_SESSION, ChatReply
from reactive_temporal.contracts.events import RunEvent
from reactive_temporal.contracts.result import AgentResult
from reactive_temporal.contracts.run import AgentConfig, AgentRunInput, RunProgress
from reactive_temporal.hosting.runtime import Runtime
from reactive_temporal.refusals import while_busy
from reactive_temporal.ui_text import literal
from workflows.agent_run import AgentRunWorkflow

DISPOSE_DEBRIEF_TIMEOUT_SECONDS = 60.0


class Agent:
    """A connected agent: run tasks, chat about them, read their debriefs.

    Made by `AgentBuilder.build()`; release it with `dispose()`.
    """

    def __init__(self, config: AgentConfig, runtime: Runtime, *, configured: bool = True) -> None:
        """An agent with this configuration on this runtime (see AgentBuilder.build).

        `configured`: this configuration is the agent's (built in code) and goes with each
        chat turn; otherwise (the CLI's defaults) chat uses what the agent's runs and builder
        last set.
        """
        self.config = config
        self.runtime = runtime
        self._pending_debriefs: set[str] = set()
        self.entity = AgentEntity(
            runtime.client,
            runtime.task_queue,
            config,
            send_config=configured,
            unreachable_for=runtime.unreachable_patience,
        )

    @property
    def name(self) -> str:
        """The agent's name."""
        return self.config.agent_id

    async def start(
        self,
        task: str,
        *,
        max_iterations: int | None = None,
        required_tools: list[str] | None = None,
    ) -> WorkflowHandle[Any, AgentResult]:
        """Start a run and return its handle (poll `progress`, await `result()`).

        The start is sent again through a Temporal server out of reach for the runtime's
        `unreachable_patience`, as waits for results are, under one run id: a start that
        landed before its answer was lost is that run, never a second one.
        """
        self.runtime.require_usable()
        run_input = build_run_input(
            self.config, task, max_iterations=max_iterations, required_tools=required_tools
        )
        run_id = names.run_workflow_id(self.name, uuid.uuid4())

        async def start() -> WorkflowHandle[Any, AgentResult]:
            try:
                return await self._start(run_id, run_input)
            except WorkflowAlreadyStartedError:  # an earlier try landed, and the run is over
                return self.runtime.client.get_workflow_handle_for(AgentRunWorkflow.run, run_id)

        return await while_busy(
            start, f"the start of run {run_id}", unreachable_for=self.runtime.unreachable_patience
        )

    async def _start(
        self, run_id: str, run_input: AgentRunInput
    ) -> WorkflowHandle[Any, AgentResult]:
        return await self.runtime.client.start_workflow(
            AgentRunWorkflow.run,
            run_input,
            id=run_id,
            # sent again after a lost answer: the run that try started, not a second one
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            task_queue=self.runtime.task_queue,
            static_summary=literal(run_input.task[:400]),  # shown as text, never rendered
            memo={names.TASK_MEMO: run_input.task[:200]},
            # the Web UI renders details as markdown: a model name is one line, no code fence
            static_details=f"agent `{self.name}` · model `{_inline(run_input.agent.model)}` · "
            f"max {run_input.agent.max_iterations} iterations",
            # set at the start: free, where a workflow's upsert is an event and a billed action
            search_attributes=TypedSearchAttributes(
                [SearchAttributePair(sa.AGENT_NAME, self.name)]
            ),
        )

    async def run(
        self,
        task: str,
        *,
        max_iterations: int | None = None,
        required_tools: list[str] | None = None,
    ) -> RunResult:
        """Run a task to its end, durably (the run survives this process).

        Args:
            task: what the agent should do.
            max_iterations: this run's cap, instead of the agent's.
            required_tools: tools the agent must call before it may finish.

        Returns:
            The result; `success` is False for a run that ended without an answer.

        Cancelling this call (or `asyncio.wait_for` giving up on it) stops the waiting, not
        the run, which goes on durably: bound a run with the agent's `timeout_seconds`, or
        `start()` it, wait for `result(handle)` and `cancel(run_id)` it.

        Raises:
            ValueError: the task or an option is not valid.
            AgentRunError: the run failed instead of producing a result.
            RuntimeError: the agent was disposed, or is used on another event loop than the
                one it was built on (with an in-process worker).
        """
        handle = await self.start(
            task, max_iterations=max_iterations, required_tools=required_tools
        )
        result = await self.result(handle)
        if result.debrief is not None:
            self._pending_debriefs.add(result.run_id)
        return result

    async def result(self, run: WorkflowHandle[Any, AgentResult] | str) -> RunResult:
        """Await a started run's result: its handle (`start`'s), or its run id.

        Raises:
            ValueError: no run with that id.
            AgentRunError: when the run failed instead of producing a result.
        """
        if not isinstance(run, WorkflowHandle):  # a run id ('str' has no attribute 'result')
            await require_run(self.runtime.client, run)
            run = self.runtime.client.get_workflow_handle_for(AgentRunWorkflow.run, run)
        return await run_result(
            self.runtime.client, run, unreachable_for=self.runtime.unreachable_patience
        )

    async def progress(self, run_id: str) -> RunProgress:
        """A run's progress: iteration, tool, tokens, approvals waiting, what it retries.

        `retrying` is the step it is stuck on (an LLM endpoint down, Postgres unreachable),
        with its attempt, since when and its last failure.

        Raises:
            ValueError: no such run.
            ProgressUnavailable: no worker answered (its `retrying` is the server's view).
        """
        return await run_progress(self.runtime.client, run_id)

    async def cancel(self, run_id: str, *, reason: str | None = None) -> RunResult:
        """Cancel a running run and return its result.

        The run ends as `cancelled` with its last text, its debrief and its agent told (the
        same as the Web UI's cancel button).

        Raises:
            ValueError: no such run, or it is not running.
            RunUnserved: no worker can end it now (none polls its task queue, or its workflow
                task keeps failing); the cancel is recorded, and it ends once one runs it.
        """
        handle = await request_cancel(self.runtime.client, run_id, reason)
        return await while_served(
            self.runtime.client, run_id, self.result(handle), cancel_recorded(run_id)
        )

    async def cancel_running(self, *, reason: str | None = None) -> CancelledRuns:
        """Cancel every running run of this agent and wait for each to end.

        Each as `cancel` does it (`starter.py cancel --agent`): for an agent gone wrong. Runs
        started in the last seconds may not be listed yet by Temporal's visibility; call it
        again for them.

        Raises:
            ValueError: the reason cannot be kept.
        """
        return await cancel_running(
            self.runtime.client,
            self.config.agent_id,
            reason,
            unreachable_for=self.runtime.unreachable_patience,
        )

    def events(self, run_id: str, *, from_offset: int = 0) -> AsyncIterator[RunEvent]:
        """The run's live output, from the start (or `from_offset`) until it ends.

        `iteration`, `text` (its `delta`, as the model writes), `tool_start`, `tool_end`,
        `approval`, then `finished` with the result; works for a finished run too.

        Raises:
            ValueError: no such run.
            LiveOutputUnavailable: this process has no Postgres to read it from.
        """
        return follow_events(
            self.runtime.client,
            self.runtime.database_url,
            run_id,
            from_offset=from_offset,
            unreachable_for=self.runtime.unreachable_patience,
        )

    async def run_stream(
        self,
        task: str,
        *,
        max_iterations: int | None = None,
        required_tools: list[str] | None = None,
    ) -> AsyncIterator[RunEvent]:
        """Start a run and yield its live output as it happens, ending with `finished`."""
        handle = await self.start(
            task, max_iterations=max_iterations, required_tools=required_tools
        )
        async for event in self.events(handle.id):
            if event.type == "finished" and event.result is not None and event.result.debrief:
                self._pending_debriefs.add(event.result.run_id)
            yield event

    async def approvals(self) -> list[PendingCall]:
        """This agent's tool calls waiting for approval, oldest first.

        Raises:
            ApprovalsUnavailable: one of its waiting runs could not say which calls wait
                (no worker up for it, its workflow task failing); it carries the calls the
                others named (`pending`) and those runs (`unanswered`).
        """
        return await pending_calls(self.runtime.client, self.name)

    async def approve(
        self, run_id: str, *call_ids: str, by: str | None = None, reason: str | None = None
    ) -> ApprovalOutcome:
        """Approve a run's waiting calls (all of them when no call id is given).

        Raises:
            ValueError: the run refused (an unknown or already decided call), saying why.
            RunUnserved: no worker can take it (not sent), or none took it in time (it may
                still be delivered).
        """
        return await decide(
            self.runtime.client, run_id, list(call_ids), approve=True, reason=reason, by=by
        )

    async def deny(
        self, run_id: str, *call_ids: str, reason: str, by: str | None = None
    ) -> ApprovalOutcome:
        """Deny a run's waiting calls; the model reads `reason` as each call's result.

        Raises:
            ValueError: the run refused (an unknown or already decided call), saying why.
            RunUnserved: as `approve`.
        """
        return await decide(
            self.runtime.client, run_id, list(call_ids), approve=False, reason=reason, by=by
        )

    async def wait_for_debriefs(
        self, seconds: float = DISPOSE_DEBRIEF_TIMEOUT_SECONDS
    ) -> list[str]:
        """Wait for this agent's rich debriefs still in flight, up to `seconds`.

        0 does not wait; `math.inf` waits until every one has finished (or failed).

        Returns:
            The run ids whose debrief did not finish in time (it finishes later, durably, on
            any worker).

        Raises:
            TypeError: `seconds` is not a number (a bool, a string, None).
            ValueError: `seconds` is negative or nan (nan returned [] at once, and forgot
                the debriefs in flight).
        """
        seconds = waiting_seconds("seconds", seconds)  # before the pending ones are taken
        pending = sorted(self._pending_debriefs)
        self._pending_debriefs.clear()
        return await wait_for_rich_debriefs(self.runtime.client, pending, seconds)

    async def chat(
        self,
        message: str,
        *,
        use_tools: bool | None = None,
        max_iterations: int | None = None,
        stream_id: str | None = None,
    ) -> ChatReply:
        """One turn in the agent's default session; routed to tools or not by intent.

        With `stream_id` (from `new_chat_stream_id()`), the turn's live output (the reply
        as generated, or the tool path's run) can be read with `chat_events`.

        Raises:
            ChatError: the turn was refused (an empty or too long message, one that is not
                UTF-8 text, a bad option), saying why; before anything is sent when it is
                the message's own fault. An argument of the wrong type (`b"hi"`,
                `max_iterations=True`) is a ChatArgumentError, a TypeError too.
        """
        self.runtime.require_usable()
        return await self.entity.chat(
            chat_request(
                message=message,
                session_id=DEFAULT_SESSION,
                use_tools=use_tools,
                max_iterations=max_iterations,
                stream_id=stream_id,
            )
        )

    def new_chat_stream_id(self) -> str:
        """A fresh id for one chat turn's live output."""
        return names.chat_run_workflow_id(self.name, uuid.uuid4())

    def chat_events(self, stream_id: str, turn: asyncio.Future[Any]) -> AsyncIterator[RunEvent]:
        """A chat turn's live output while `turn` (the awaited `chat`) runs.

        Raises:
            LiveOutputUnavailable: this process has no Postgres to read it from.
        """
        return stream_events(self.runtime.database_url or "", stream_id, until=turn)

    def session(self, id: str | None = None) -> Session:
        """A new session, or the saved or open one with this id."""
        return Session(self.entity, id)

    async def get_last_debrief(self) -> AgentDebrief | None:
        """The last run's debrief: the instant one, upgraded when the rich one is ready."""
        return await self.entity.last_debrief()

    async def reset_entity(self, *, force: bool = False, reason: str | None = None) -> EntityReset:
        """End the agent's stuck chat workflow and start a fresh one with what it knew.

        For an entity whose workflow task keeps failing (chat raises `EntityWedged`); its
        sessions and last run are in Postgres. `force` resets a healthy one too.

        `reason` is held to a cancel's rules (text, at most 500 characters, no NUL).

        Raises:
            ValueError: nothing was done, saying why (no entity runs, it is not stuck, the
                reason cannot be kept, …).
            TypeError: the reason is not text.
        """
        client, queue = self.runtime.client, self.runtime.task_queue
        return await reset_entity(client, queue, self.config, force=force, reason=reason)

    async def dispose(self, debrief_wait_seconds: float = DISPOSE_DEBRIEF_TIMEOUT_SECONDS) -> None:
        """Wait (bounded) for this agent's rich debriefs, then release what `build()` started.

        `debrief_wait_seconds` as `wait_for_debriefs` takes it (checked before anything is
        released: a TypeError or ValueError leaves the agent as it was).
        """
        waiting_seconds("debrief_wait_seconds", debrief_wait_seconds)
        await self.wait_for_debriefs(debrief_wait_seconds)
        await self.runtime.close()


def _inline(text: str) -> str:
    """`text` as one line of inline code: whitespace runs as a space, backticks as quotes.

    A model name with a newline and a "## " made a heading in the Web UI's details.
    """
    return " ".join(text.split()).replace("`", "'")
