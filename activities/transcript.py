"""Activities that start and extend a run's transcript in Postgres."""

from __future__ import annotations

from temporalio import activity

from activities.debrief_store import DebriefStore
from activities.pg_refusals import refused_data_fails
from activities.run_seed import RunSeeding, resolve_tools, seed_messages
from activities.store import Store
from reactive_temporal.contracts import names
from reactive_temporal.contracts.run import (
    PrepareRunInput,
    PrepareRunResult,
    RecordMessagesInput,
    RunSeed,
)
from reactive_temporal.tool_registry import ToolRegistry


class TranscriptActivities:
    def __init__(self, store: Store, debriefs: DebriefStore, registry: ToolRegistry) -> None:
        self.store = store
        self.seeding = RunSeeding(store, debriefs, registry)

    @activity.defn(name=names.PREPARE_RUN)
    @refused_data_fails
    async def prepare_run(self, input: PrepareRunInput) -> PrepareRunResult:
        """Resolve the agent's tools and seed the transcript (`activities.run_seed`): what
        runs started before the first-step-seeds patch do before their first LLM step."""
        seed = RunSeed.of(input.task, input.agent)
        prepared = resolve_tools(seed, self.seeding.registry)
        entries = seed_messages(seed, await self.seeding.notes(input.run_id, seed))
        await self.store.put_messages(input.run_id, entries)
        return prepared.model_copy(update={"next_seq": len(entries)})

    @activity.defn(name=names.RECORD_MESSAGES)
    @refused_data_fails
    async def record_messages(self, input: RecordMessagesInput) -> None:
        await self.store.put_messages(input.run_id, input.messages)
