"""Activities that start and extend a run's transcript in Postgres."""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.store import DebriefStore, Store, StoredDebrief
from reactive_temporal.contracts import names
from reactive_temporal.contracts.run import (
    Message,
    PrepareRunInput,
    PrepareRunResult,
    RecordMessagesInput,
    SeqMessage,
)
from reactive_temporal.prompts import run_system_prompt
from reactive_temporal.tools import ToolRegistry

PRIOR_RUN_MAX_AGE_HOURS = 72
PRIOR_RUN_MAX_CHARS = 2_000
PRIOR_LESSONS = 5


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def prior_run_block(last: StoredDebrief, lessons: list[str]) -> str:
    """What the agent should remember of its last run (the reference's "Prior Session")."""
    d = last.debrief
    lines = [
        "--- Prior Session ---",
        f"Last run ({round(last.age_hours)}h ago): {d.outcome}",
        _clip(d.summary, 600),
    ]
    if lessons:
        lines.append("Lessons: " + "; ".join(_clip(lesson, 200) for lesson in lessons))
    if d.errors_encountered:
        lines.append("Prior errors: " + "; ".join(_clip(e, 200) for e in d.errors_encountered[:5]))
    return _clip("\n".join(lines), PRIOR_RUN_MAX_CHARS)


class TranscriptActivities:
    def __init__(
        self,
        store: Store,
        debriefs: DebriefStore,
        registry: ToolRegistry,
    ) -> None:
        self.store = store
        self.debriefs = debriefs
        self.registry = registry

    @activity.defn(name=names.PREPARE_RUN)
    async def prepare_run(self, input: PrepareRunInput) -> PrepareRunResult:
        """Resolve the agent's tools and seed the transcript with the system prompt and task."""
        agent = input.agent
        wanted = self.registry.names if agent.tools is None else agent.tools
        unknown = [t for t in [*wanted, *agent.required_tools] if self.registry.get(t) is None]
        if unknown:
            raise ApplicationError(
                f"agent {agent.agent_id!r} names tools this worker does not have: "
                f"{', '.join(sorted(set(unknown)))}. "
                f"Worker tools: {', '.join(self.registry.names)}",
                type="UnknownToolError",
                non_retryable=True,
            )
        names = list(dict.fromkeys([*wanted, *agent.required_tools]))
        prompt = run_system_prompt(agent.agent_id, agent.system_prompt, audit=agent.audit_rationale)
        if agent.memory:
            last = await self.debriefs.latest(agent.agent_id, PRIOR_RUN_MAX_AGE_HOURS)
            if last is not None and last.run_id != input.run_id:
                lessons = await self.debriefs.recent_lessons(agent.agent_id, PRIOR_LESSONS)
                prompt += "\n\n" + prior_run_block(last, lessons)
        seed = [
            Message(role="system", content=prompt),
            Message(role="user", content=input.task),
        ]
        await self.store.put_messages(
            input.run_id, [SeqMessage(seq=i, message=m) for i, m in enumerate(seed)]
        )
        return PrepareRunResult(tool_names=names, next_seq=len(seed))

    @activity.defn(name=names.RECORD_MESSAGES)
    async def record_messages(self, input: RecordMessagesInput) -> None:
        await self.store.put_messages(input.run_id, input.messages)
