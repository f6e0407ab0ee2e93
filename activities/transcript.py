"""Activities that start and extend a run's transcript in Postgres."""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.debrief_store import DebriefStore, StoredDebrief
from activities.lesson_store import LessonStore
from activities.store import Store
from reactive_temporal.contracts import names
from reactive_temporal.contracts.approvals import APPROVE_ALL
from reactive_temporal.contracts.run import (
    Message,
    PrepareRunInput,
    PrepareRunResult,
    RecordMessagesInput,
    SeqMessage,
)
from reactive_temporal.memory import PRIOR_LESSONS, PriorRun, run_notes
from reactive_temporal.prompts import run_system_prompt
from reactive_temporal.tools import ToolRegistry

PRIOR_RUN_MAX_AGE_HOURS = 72
"""The last run is remembered for this long (the reference's Prior Session)."""


def prior_run(last: StoredDebrief) -> PriorRun:
    d = last.debrief
    return PriorRun(last.run_id, d.outcome, d.summary, last.age_hours, d.errors_encountered)


class TranscriptActivities:
    def __init__(
        self,
        store: Store,
        debriefs: DebriefStore,
        registry: ToolRegistry,
    ) -> None:
        self.store = store
        self.debriefs = debriefs
        self.lessons = LessonStore(store)
        self.registry = registry

    @activity.defn(name=names.PREPARE_RUN)
    async def prepare_run(self, input: PrepareRunInput) -> PrepareRunResult:
        """Resolve the agent's tools and seed the transcript: the system prompt, the task, and
        (with memory) the notes from earlier runs as a quoted user-role message after it."""
        agent = input.agent
        wanted = self.registry.names if agent.tools is None else agent.tools
        approve = [t for t in agent.approve_tools if t != APPROVE_ALL]
        named = [*wanted, *agent.required_tools, *approve]
        unknown = [t for t in named if self.registry.get(t) is None]
        if unknown:
            # A typo in --approve must not let the real tool run unapproved: refuse the run.
            raise ApplicationError(
                f"agent {agent.agent_id!r} names tools this worker does not have: "
                f"{', '.join(sorted(set(unknown)))}. "
                f"Worker tools: {', '.join(self.registry.names)}",
                type="UnknownToolError",
                non_retryable=True,
            )
        names = list(dict.fromkeys([*wanted, *agent.required_tools]))
        prompt = run_system_prompt(agent.agent_id, agent.system_prompt, audit=agent.audit_rationale)
        seed = [
            Message(role="system", content=prompt),
            Message(role="user", content=input.task),
        ]
        if agent.memory:
            notes = await self._notes(input)
            if notes is not None:
                seed.append(Message(role="user", content=notes))
        await self.store.put_messages(
            input.run_id, [SeqMessage(seq=i, message=m) for i, m in enumerate(seed)]
        )
        timeouts = {n: tool.timeout_seconds for n in names if (tool := self.registry.get(n))}
        marked = [t for t in self.registry.approval_names if t in names]
        return PrepareRunResult(
            tool_names=names, next_seq=len(seed), tool_timeouts=timeouts, approval_tools=marked
        )

    async def _notes(self, input: PrepareRunInput) -> str | None:
        """What the agent remembers for this task: its last run (if recent) and the lessons
        most relevant to the task, as quoted data."""
        agent_id = input.agent.agent_id
        async with self.store.connection() as conn:
            async with conn.pipeline():  # both queries in one round trip
                reading_last = await self.debriefs.begin_latest(
                    conn, agent_id, PRIOR_RUN_MAX_AGE_HOURS
                )
                reading_lessons = await self.lessons.begin_relevant(
                    conn, agent_id, input.task, limit=PRIOR_LESSONS, exclude_run=input.run_id
                )
            last, lessons = await reading_last(), await reading_lessons()
        if last is not None and last.run_id == input.run_id:
            last = None  # a rerun does not remember itself
        return run_notes(prior_run(last) if last else None, lessons)

    @activity.defn(name=names.RECORD_MESSAGES)
    async def record_messages(self, input: RecordMessagesInput) -> None:
        await self.store.put_messages(input.run_id, input.messages)
