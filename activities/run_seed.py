"""How a run begins: its tools resolved against the worker's registry, its transcript seeded.

The seed is the system prompt, the task and, with memory, the notes from earlier runs (a
quoted user-role message after the task). Runs started since the first-step-seeds patch seed
in their first LLM step (`activities.llm_step`); earlier ones in `prepare_run`
(`activities.transcript`). Both come here.

A seed is written once. A first step taken again (a retry, a worker lost mid-call) finds the
seed it wrote and goes on after it, rather than reading the notes again: a lesson learnt
between two attempts must not move where the reply goes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from psycopg import AsyncConnection
from temporalio.exceptions import ApplicationError

from activities.debrief_store import DebriefStore, StoredDebrief
from activities.lesson_store import LessonStore
from activities.store import Store
from reactive_temporal.contracts.approvals import APPROVE_ALL
from reactive_temporal.contracts.run import Message, PrepareRunResult, RunSeed, SeqMessage
from reactive_temporal.limits import TOOL_NAMES_MAX_BYTES, json_bytes
from reactive_temporal.memory import PRIOR_LESSONS, PriorRun, run_notes
from reactive_temporal.prompts import run_system_prompt
from reactive_temporal.tool_registry import ToolRegistry

PRIOR_RUN_MAX_AGE_HOURS = 72
"""The last run is remembered for this long (the reference's Prior Session)."""


def prior_run(last: StoredDebrief) -> PriorRun:
    d = last.debrief
    return PriorRun(last.run_id, d.outcome, d.summary, last.age_hours, d.errors_encountered)


def resolve_tools(seed: RunSeed, registry: ToolRegistry) -> PrepareRunResult:
    """The run's tools, their timeouts and those marked for approval (`next_seq` left 0);
    a run naming a tool the worker lacks, or more tools than a run carries (every tool of a
    worker that has too many: `limits.TOOL_NAMES_MAX_BYTES`), is refused (non-retryable
    `UnknownToolError`)."""
    wanted = registry.names if seed.tools is None else seed.tools
    approve = [t for t in seed.approve_tools if t != APPROVE_ALL]
    unknown = [t for t in [*wanted, *seed.required_tools, *approve] if registry.get(t) is None]
    if unknown:
        # A typo in --approve must not let the real tool run unapproved: refuse the run.
        raise ApplicationError(
            f"agent {seed.agent_id!r} names tools this worker does not have: "
            f"{', '.join(sorted(set(unknown)))}. "
            f"Worker tools: {', '.join(registry.names)}",
            type="UnknownToolError",
            non_retryable=True,
        )
    names = list(dict.fromkeys([*wanted, *seed.required_tools]))
    if (size := json_bytes(names)) > TOOL_NAMES_MAX_BYTES:
        # they travel in the run's state and every step's input: past the budget, a
        # continue-as-new or a step's result would be too large for Temporal
        raise ApplicationError(
            f"agent {seed.agent_id!r} would run with more tools than a run carries: their "
            f"names are {size:,} bytes as JSON; the limit is {TOOL_NAMES_MAX_BYTES:,}. "
            + ("Name the agent's tools." if seed.tools is None else "Name fewer tools."),
            type="UnknownToolError",
            non_retryable=True,
        )
    return PrepareRunResult(
        tool_names=names,
        next_seq=0,
        tool_timeouts={n: tool.timeout_seconds for n in names if (tool := registry.get(n))},
        approval_tools=[t for t in registry.approval_names if t in names],
    )


def seed_messages(seed: RunSeed, notes: str | None) -> list[SeqMessage]:
    """The transcript a run starts with, from position 0."""
    prompt = run_system_prompt(seed.agent_id, seed.system_prompt, audit=seed.audit_rationale)
    messages = [Message(role="system", content=prompt), Message(role="user", content=seed.task)]
    if notes is not None:
        messages.append(Message(role="user", content=notes))
    return [SeqMessage(seq=i, message=m) for i, m in enumerate(messages)]


def seed_length(transcript: list[SeqMessage]) -> int:
    """How long the seed already written is: everything before the first reply."""
    replies = (i for i, e in enumerate(transcript) if e.message.role == "assistant")
    return next(replies, len(transcript))


class RunSeeding:
    """Reads what a run's seed needs (the transcript so far, the agent's notes) and writes it."""

    def __init__(self, store: Store, debriefs: DebriefStore, registry: ToolRegistry) -> None:
        self.store = store
        self.debriefs = debriefs
        self.lessons = LessonStore(store)
        self.registry = registry

    async def notes(self, run_id: str, seed: RunSeed) -> str | None:
        """What the agent remembers for this task, in one round trip (None without memory)."""
        async with self.store.connection() as conn:
            async with conn.pipeline():  # both queries in one round trip
                reading = await self._begin_notes(conn, run_id, seed)
            return await reading()

    async def written_or_notes(
        self, run_id: str, seed: RunSeed
    ) -> tuple[list[SeqMessage], str | None]:
        """The run's transcript so far and the agent's notes, in one round trip."""
        async with self.store.connection() as conn:
            async with conn.pipeline():
                reading = await self.store.begin_transcript(run_id, None, 0, conn)
                reading_notes = await self._begin_notes(conn, run_id, seed)
            return await reading(), await reading_notes()

    async def _begin_notes(
        self, conn: AsyncConnection[Any], run_id: str, seed: RunSeed
    ) -> Callable[[], Awaitable[str | None]]:
        """The notes' queries sent on `conn` (in pipeline mode); what it returns reads them."""
        if not seed.memory:

            async def nothing() -> None:
                return None

            return nothing
        reading_last = await self.debriefs.begin_latest(
            conn, seed.agent_id, PRIOR_RUN_MAX_AGE_HOURS
        )
        reading_lessons = await self.lessons.begin_relevant(
            conn, seed.agent_id, seed.task, limit=PRIOR_LESSONS, exclude_run=run_id
        )

        async def notes() -> str | None:
            last, lessons = await reading_last(), await reading_lessons()
            if last is not None and last.run_id == run_id:
                last = None  # a rerun does not remember itself
            return run_notes(prior_run(last) if last else None, lessons)

        return notes
