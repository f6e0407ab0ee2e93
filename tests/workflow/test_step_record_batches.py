"""Steps' records that come together are written together (`StepRecords`): one transaction
and one round trip for a burst of them, each step back once its own record has committed,
one bad record costing only itself. And the step's context count goes in its record's
transaction. Real Postgres."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest

from activities.llm_calls import LlmEndpoint
from activities.llm_step import LlmActivities
from activities.step_records import StepRecords, record_step
from activities.store import Store
from reactive_temporal.contracts.events import NewEvent
from reactive_temporal.contracts.llm_payloads import LlmStepInput
from reactive_temporal.contracts.run import Message, ToolResult
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM
from reactive_temporal.hosting.worker_factory import llm_client
from reactive_temporal.tool_registry import ToolRegistry
from tests.support.steps import attempt, live_events, seeded, transactions_of

pytestmark = pytest.mark.workflow

TOO_BIG = 2**40
"""Not an INTEGER: Postgres refuses the row."""


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    store = await Store.open(database_url, max_size=2)
    try:
        yield store
    finally:
        await store.close()


def observed(run_id: str, seq: int, content: str) -> tuple[Message, ToolResult]:
    result = ToolResult(call_id=f"c{seq}", name="count", success=True, content=content)
    return Message(role="tool", content=content, tool_call_id=f"c{seq}", name="count"), result


def ended(seq: int) -> list[NewEvent]:
    return [NewEvent(type="tool_end", step=seq, data={"preview": "ok"}, key=f"tool_end:{seq}")]


async def test_records_of_steps_that_end_together_go_out_in_one_transaction(store: Store):
    """Twenty runs' tool steps ending at once: their records in at most two transactions
    (the first goes out alone, the rest together) on at most two checkouts, where each was a
    checkout and a round trip; every step's record is there when its step returns, with its
    live output."""
    records = StepRecords(store)
    runs = [f"run-records-{uuid.uuid4().hex[:8]}" for _ in range(20)]
    checkouts = store.pool.get_stats().get("requests_num", 0)

    async def step(run_id: str) -> None:
        message, result = observed(run_id, 3, f"counted for {run_id}")
        await record_step(
            records, run_id, 3, message, result, events=ended(3), what="recording a test step"
        )
        # back only once its own record has committed
        assert await store.recorded_step(run_id, 3) == result.model_dump(mode="json")

    async def all_steps() -> None:
        await asyncio.gather(*(step(run_id) for run_id in runs))

    await attempt(1).run(all_steps)
    assert await transactions_of(store, runs, "run_messages") <= 2
    writes = store.pool.get_stats().get("requests_num", 0) - checkouts - len(runs)  # less reads
    assert writes <= 2
    for run_id in runs:
        assert await live_events(store, run_id) == ["tool_end"]


async def test_one_bad_record_among_many_costs_only_itself(store: Store):
    """A record Postgres refuses fails its own step; the others written with it are written
    again one by one, each with its live output exactly once."""
    records = StepRecords(store)
    good = [f"run-good-{uuid.uuid4().hex[:8]}" for _ in range(5)]
    bad = f"run-bad-{uuid.uuid4().hex[:8]}"

    async def step(run_id: str, seq: int) -> None:
        message, result = observed(run_id, seq, "counted")
        await record_step(
            records, run_id, seq, message, result, events=ended(3), what="recording a test step"
        )

    async def all_steps() -> list[object]:
        return await asyncio.gather(
            *(step(run_id, 3) for run_id in good), step(bad, TOO_BIG), return_exceptions=True
        )

    outcomes = await attempt(1).run(all_steps)
    assert outcomes[:-1] == [None] * len(good)
    assert isinstance(outcomes[-1], psycopg.errors.NumericValueOutOfRange)
    for run_id in good:
        assert await store.recorded_step(run_id, 3) is not None
        assert await live_events(store, run_id) == ["tool_end"]
    assert await live_events(store, bad) == []


async def test_a_long_requests_count_goes_in_its_records_round_trip(
    settings, llm: ScriptedLLM, model_name: str
):
    """A step whose request is over a quarter of its budget keeps the provider's prompt-token
    count for the next step's estimate (`run_context`); that write goes in the reply's
    record's transaction: the step costs two round trips, as a short one does (three before)."""
    from tests.support.pg_proxy import CountingProxy

    proxy = await CountingProxy(settings.database_url).start()
    store = await Store.open(proxy.url, max_size=1)
    endpoint = LlmEndpoint(llm_client(settings, llm.base_url), context_tokens=4_096)
    try:
        run_id = f"run-long-{uuid.uuid4().hex[:8]}"
        await store.put_messages(run_id, seeded("You count.", "Count these: " + "one " * 900))
        llm.script(model_name, [Reply("Counted.")])
        step = LlmStepInput(run_id=run_id, seq=2, iteration=0, model=model_name, tool_names=[])
        proxy.round_trips = 0
        reply = await attempt(1).run(LlmActivities(store, endpoint, ToolRegistry()).llm_step, step)
        assert proxy.round_trips == 2
        assert reply.content == "Counted." and reply.usage.prompt_tokens > 0
        async with store.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT prompt_tokens FROM run_context WHERE run_id = %s AND seq = 2", (run_id,)
            )
            assert await cur.fetchall() == [(reply.usage.prompt_tokens,)]
        assert await store.recorded_step(run_id, 2) == reply.model_dump(mode="json")
    finally:
        await endpoint.close()
        await store.close()
        await proxy.stop()
