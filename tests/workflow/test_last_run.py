"""Each agent's last run, as runs keep themselves in Postgres as they end (what chat quotes of
it, read by the agent instead of told by a signal). Real Postgres."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from activities.debrief_store import DebriefStore
from activities.store import Store
from reactive_temporal.contracts.debrief import AgentDebrief, DebriefInput
from reactive_temporal.contracts.entity import RunFinished
from reactive_temporal.contracts.run import AgentConfig

pytestmark = pytest.mark.workflow

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.fixture
async def debriefs(database_url: str) -> AsyncIterator[DebriefStore]:
    store = await Store.open(database_url, max_size=2)
    try:
        yield DebriefStore(store)
    finally:
        await store.close()


def finished(agent_id: str, run_id: str, started_at: datetime, summary: str) -> RunFinished:
    return RunFinished(
        run_id=run_id,
        started_at=started_at,
        agent=AgentConfig(agent_id=agent_id, model="m", system_prompt=f"as of {run_id}"),
        debrief=AgentDebrief(summary=summary, outcome="success", markdown=summary),
        observations=[f"[Tool result]: seen by {run_id}\x00"],
    )


async def test_the_agents_last_run_is_the_one_that_started_last(debriefs: DebriefStore):
    agent_id = f"last-{uuid.uuid4().hex[:8]}"
    assert await debriefs.last_run(agent_id) is None
    first = finished(agent_id, "run-1", T0, "first")
    second = finished(agent_id, "run-2", T0 + timedelta(seconds=5), "second")
    assert await debriefs.keep_last_run(second)
    assert not await debriefs.keep_last_run(first)  # older, finishing late: not kept
    last = await debriefs.last_run(agent_id)
    assert last is not None and last.run_id == "run-2"
    assert last.debrief is not None and last.debrief.summary == "second"
    assert last.agent.system_prompt == "as of run-2"
    assert last.observations == ["[Tool result]: seen by run-2\ufffd"]  # NUL kept as U+FFFD
    assert await debriefs.keep_last_run(second)  # the same run again (a retry): kept
    other = await debriefs.last_run(f"other-{agent_id}")
    assert other is None  # one row per agent


async def test_a_rich_debrief_reaches_the_last_run_only_when_it_is_that_runs(
    debriefs: DebriefStore,
):
    agent_id = f"rich-{uuid.uuid4().hex[:8]}"
    await debriefs.keep_last_run(finished(agent_id, "run-a", T0, "instant a"))

    def rich(run_id: str, summary: str) -> tuple[DebriefInput, AgentDebrief]:
        return (
            DebriefInput(run_id=run_id, agent_id=agent_id, task="t", terminated_by="final_answer"),
            AgentDebrief(summary=summary, outcome="success", markdown=summary, synthesized=True),
        )

    await debriefs.save(*rich("run-old", "rich of an older run"))
    last = await debriefs.last_run(agent_id)
    assert last is not None and last.debrief is not None
    assert last.debrief.summary == "instant a"
    await debriefs.save(*rich("run-a", "rich a"))
    last = await debriefs.last_run(agent_id)
    assert last is not None and last.debrief is not None
    assert last.debrief.summary == "rich a" and last.debrief.synthesized
    assert last.observations == ["[Tool result]: seen by run-a\ufffd"]  # the rest unchanged


async def test_a_last_run_row_that_does_not_read_as_a_run_is_ignored(debriefs: DebriefStore):
    """A row another version wrote, or a hand edit: chat goes on without the run's context."""
    agent_id = f"bad-{uuid.uuid4().hex[:8]}"
    await debriefs.keep_last_run(finished(agent_id, "run-x", T0, "fine"))
    async with debriefs.pool.connection() as conn:
        await conn.execute(
            "UPDATE agent_last_runs SET run = '{\"run_id\": 42}' WHERE agent_id = %s", (agent_id,)
        )
    assert await debriefs.last_run(agent_id) is None


async def test_a_runs_wrap_up_writes_its_debrief_and_last_run_in_one_round_trip(
    database_url: str,
):
    """`notify_agent` saves the run's debrief and keeps it as the agent's last run on one
    pipelined connection, in one round trip to Postgres (counted at a proxy; they were two
    checkouts and seven round trips)."""
    from temporalio.testing import ActivityEnvironment

    from activities.workflow_calls import EntityActivities
    from reactive_temporal.contracts.debrief import PersistDebriefInput
    from reactive_temporal.contracts.entity import NotifyAgentInput
    from tests.support.pg_proxy import CountingProxy

    agent_id = f"wrap-{uuid.uuid4().hex[:8]}"
    run_id = f"run-{agent_id}"
    run = finished(agent_id, run_id, T0, "wrapped up")
    debrief = AgentDebrief(
        summary="wrapped up", outcome="success", lessons_learned=["check the stock", "twice"]
    )
    run.debrief = debrief
    persist = PersistDebriefInput(
        input=DebriefInput(
            run_id=run_id, agent_id=agent_id, task="count", terminated_by="final_answer"
        ),
        debrief=debrief,
    )
    proxy = await CountingProxy(database_url).start()
    store = await Store.open(proxy.url, max_size=1)
    debriefs = DebriefStore(store)
    try:
        activities = EntityActivities(client=None, debriefs=debriefs)  # type: ignore[arg-type]
        await debriefs.last_run(agent_id)  # the pool's connection, used: not checked again
        proxy.round_trips = 0
        await ActivityEnvironment().run(
            activities.notify_agent,
            NotifyAgentInput(
                agent=run.agent,
                signal="run_finished",
                run_finished=run,
                persist=persist,
                keep_last_run=True,
            ),
        )
        assert proxy.round_trips == 1
        kept = await debriefs.last_run(agent_id)
        assert kept is not None and kept.debrief is not None
        assert kept.debrief.summary == "wrapped up"
        stored = await debriefs.get(run_id)
        assert stored is not None and stored.debrief.lessons_learned == debrief.lessons_learned
    finally:
        await store.close()
        await proxy.stop()


async def test_a_debrief_that_fails_to_save_leaves_nothing_half_written(debriefs: DebriefStore):
    agent_id = f"fail-{uuid.uuid4().hex[:8]}"
    run_id = f"run-{agent_id}"
    debrief = AgentDebrief(summary="too big", outcome="success", lessons_learned=["not kept"])
    debrief.metrics.tokens = 2**70  # not a BIGINT: Postgres refuses the row
    entry = DebriefInput(run_id=run_id, agent_id=agent_id, task="t", terminated_by="final_answer")
    with pytest.raises(Exception, match="out of range"):
        await debriefs.save(entry, debrief)
    assert await debriefs.get(run_id) is None
    async with debriefs.pool.connection() as conn:
        cur = await conn.execute("SELECT count(*) FROM agent_lessons WHERE run_id = %s", (run_id,))
        assert await cur.fetchone() == (0,)
    debrief.metrics.tokens = 10
    await debriefs.save(entry, debrief)  # the pool's connections are fine afterwards
    assert (await debriefs.get(run_id)) is not None


async def test_a_run_with_memory_starts_in_two_round_trips(database_url: str):
    """`prepare_run` reads the agent's last debrief and its relevant lessons in one round
    trip (pipelined) and seeds the transcript in another (counted at a proxy; it was three
    and five)."""
    from temporalio.testing import ActivityEnvironment

    from activities.transcript import TranscriptActivities
    from reactive_temporal.contracts.run import PrepareRunInput
    from reactive_temporal.tool_registry import ToolRegistry
    from tests.support.pg_proxy import CountingProxy

    agent_id = f"start-{uuid.uuid4().hex[:8]}"
    proxy = await CountingProxy(database_url).start()
    store = await Store.open(proxy.url, max_size=1)
    debriefs = DebriefStore(store)
    try:
        earlier = AgentDebrief(
            summary="counted the stock", outcome="success", lessons_learned=["count twice"]
        )
        await debriefs.save(
            DebriefInput(
                run_id=f"run-{agent_id}-1", agent_id=agent_id, task="count the stock",
                terminated_by="final_answer",
            ),
            earlier,
        )  # fmt: skip
        activities = TranscriptActivities(store, debriefs, ToolRegistry([]))
        proxy.round_trips = 0
        prepared = await ActivityEnvironment().run(
            activities.prepare_run,
            PrepareRunInput(
                run_id=f"run-{agent_id}-2",
                task="count the stock again",
                agent=AgentConfig(agent_id=agent_id, model="m", tools=[], memory=True),
            ),
        )
        assert proxy.round_trips == 2
        seeded = await store.load_messages(f"run-{agent_id}-2")
        assert prepared.next_seq == 3 and "count twice" in (seeded[2].content or "")
        assert "counted the stock" in (seeded[2].content or "")
    finally:
        await store.close()
        await proxy.stop()
