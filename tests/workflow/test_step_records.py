"""Steps do their work at most once: a retried step returns what an earlier attempt recorded;
a tool's activity lives as long as the tool's own timeout. Real Postgres, real dev server."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from datetime import timedelta
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from activities.llm_calls import LlmEndpoint
from activities.llm_step import LlmActivities
from activities.reply_calls import ThoughtStep, with_thinking
from activities.store import Store
from activities.tool_calls import ToolActivities
from activities.transcript_rows import ThoughtEntry
from activities.transcripts import Transcripts
from activities.turn_state import state_text
from reactive_temporal.contracts import names
from reactive_temporal.contracts.llm_payloads import LlmStepInput, LlmStepResult
from reactive_temporal.contracts.run import Message, RunToolInput, SeqMessage, ToolCall, ToolResult
from reactive_temporal.embedded.scripted_llm import Endpoint, Raw, Reply, ScriptedLLM, call
from reactive_temporal.hosting.worker_factory import llm_client
from reactive_temporal.tool_registry import ToolRegistry
from reactive_temporal.tools import current_tool_call, tool
from tests.support.pg_proxy import CountingProxy
from tests.support.steps import attempt, live_events, seeded
from tests.workflow.conftest import Harness, running_worker

pytestmark = pytest.mark.workflow


async def test_a_retried_llm_step_returns_the_recorded_reply_without_calling_the_model(
    harness: Harness, settings, llm: ScriptedLLM, model_name: str
):
    llm.script(model_name, [Reply("The first and only call.")])
    store: Store = harness.store
    endpoint = LlmEndpoint(llm_client(settings, llm.base_url))
    activities = LlmActivities(store, endpoint, harness.worker.registry)
    run_id = f"run-reply-{uuid.uuid4().hex[:8]}"
    await store.put_messages(run_id, seeded("You are a test.", "Say something."))
    step = LlmStepInput(run_id=run_id, seq=2, iteration=0, model=model_name, tool_names=[])
    try:
        first = await attempt(1).run(activities.llm_step, step)
        assert first.content == "The first and only call."
        # the completion was lost after the reply was recorded: Temporal runs the step again
        again = await attempt(2).run(activities.llm_step, step)
    finally:
        await endpoint.close()
    assert again == first
    assert len(llm.requests[model_name]) == 1  # one billed model call, not two
    kept = await store.load_transcript(run_id)
    assert [e.message.content for e in kept][-1] == "The first and only call."


async def test_a_step_reads_only_the_transcript_rows_written_since_its_last_step(
    harness: Harness,
):
    store: Store = harness.store
    run_id = f"run-cache-{uuid.uuid4().hex[:8]}"
    transcripts = Transcripts(store)
    await store.put_messages(run_id, seeded("system", "task"))
    assert [e.seq for e in await attempt(1).run(transcripts.read, run_id, 2)] == [0, 1]
    attempt(1).run(transcripts.add, run_id, 2, Message(role="assistant", content="calling a tool"))
    await store.put_messages(run_id, seeded("tool result", first=3))
    later = await attempt(1).run(transcripts.read, run_id, 4)
    assert [e.message.content for e in later] == ["system", "task", "calling a tool", "tool result"]
    assert (transcripts.full_reads, transcripts.partial_reads) == (1, 1)

    # what is held is not read again: a rewrite of an old row is not seen by this run...
    await store.put_messages(run_id, seeded("system, rewritten"))
    assert (await attempt(1).run(transcripts.read, run_id, 4))[0].message.content == "system"
    # ...but a new Temporal run of the workflow (a reset, a continue-as-new) reads it all
    reset = await attempt(1, workflow_run_id="temporal-run-2").run(transcripts.read, run_id, 4)
    assert reset[0].message.content == "system, rewritten"
    assert transcripts.full_reads == 2


async def test_a_model_s_turns_are_held_with_the_thinking_their_steps_recorded(
    harness: Harness,
):
    """For the endpoints that want each turn back with its thinking (DeepSeek's and Kimi's
    thinking modes): a turn this worker recorded is held with it, one another worker recorded
    (or one a new worker reads) is read with it from its record, and a turn without any, or a
    message not the model's, has none."""
    store: Store = harness.store
    run_id = f"run-thought-{uuid.uuid4().hex[:8]}"
    transcripts = Transcripts(store)
    await store.put_messages(run_id, seeded("system", "task"))
    await attempt(1).run(transcripts.read, run_id, 2)
    mine = Message(role="assistant", tool_calls=[ToolCall(id="c1", name="calculator")])
    thought = "Add them with the tool."
    await store.record_step(
        run_id, 2, mine, ThoughtStep(tool_calls=mine.tool_calls, thinking=thought)
    )
    attempt(1).run(transcripts.add, run_id, 2, mine, thought)  # as the step that recorded it
    theirs = Message(role="assistant", content="another worker's turn")
    await store.put_messages(run_id, seeded("tool result", first=3))
    await store.record_step(
        run_id, 4, theirs, ThoughtStep(content=theirs.content, thinking="Worker two thought.")
    )
    await store.record_step(run_id, 5, Message(role="assistant", content="no thoughts"),
                            LlmStepResult(content="no thoughts"))  # fmt: skip

    def thoughts(entries: list[SeqMessage]) -> dict[int, str]:
        return {e.seq: e.thinking for e in entries if isinstance(e, ThoughtEntry)}

    expected = {2: "Add them with the tool.", 4: "Worker two thought."}
    assert thoughts(await attempt(1).run(transcripts.read, run_id, 6)) == expected
    assert transcripts.partial_reads == 1
    assert thoughts(await attempt(1).run(Transcripts(store).read, run_id, 6)) == expected
    assert thoughts(await store.load_transcript(run_id)) == {}  # asked for messages only


DETAILS = [  # OpenRouter's, for an Anthropic model with thinking
    {
        "type": "reasoning.text",
        "text": "Add them with the tool.",
        "signature": "EqcDCkgICBACGAIqQDV0Mem0naIq1Zn2w==",
        "format": "anthropic-claude-v1",
        "index": 0,
    }
]


def states(entries: list[SeqMessage]) -> dict[int, Any]:
    """The state each model's turn is held or read with."""
    return {e.seq: e.turn_state for e in entries if isinstance(e, ThoughtEntry) and e.turn_state}


async def test_a_model_s_turns_are_held_with_the_state_their_endpoint_attached(harness: Harness):
    """OpenRouter's `reasoning_details`, a LiteLLM proxy's `thinking_blocks`, which go back on
    their turn whatever the model: a turn this worker recorded is held with its state, one
    another worker recorded (or one a new worker reads) is read with it from its record,
    exactly as it came: keys in their order, a NUL in its text (JSONB would have sorted the
    ones and refused the other). A turn without any has none."""
    store: Store = harness.store
    run_id = f"run-state-{uuid.uuid4().hex[:8]}"
    transcripts = Transcripts(store)
    await store.put_messages(run_id, seeded("system", "task"))
    await attempt(1).run(transcripts.read, run_id, 2)
    mine = Message(role="assistant", tool_calls=[ToolCall(id="c1", name="calculator")])
    details = {"reasoning_details": [{**DETAILS[0], "text": "Add them\u0000 with the tool."}]}
    recorded = with_thinking(LlmStepResult(tool_calls=mine.tool_calls), None, state_text(details))
    await store.record_step(run_id, 2, mine, recorded)
    attempt(1).run(transcripts.add, run_id, 2, mine, None, state_text(details))  # the step's own
    theirs = Message(role="assistant", content="another worker's turn",
                     tool_calls=[ToolCall(id="c2", name="calculator")])  # fmt: skip
    blocks = {
        "thinking_blocks": [
            {"signature": "EqQB-2", "type": "thinking", "thinking": "Worker two thought."},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
        ]
    }
    await store.put_messages(run_id, seeded("tool result", first=3))
    await store.record_step(
        run_id,
        4,
        theirs,
        with_thinking(LlmStepResult(content=theirs.content), "Thought.", state_text(blocks)),
    )
    await store.record_step(run_id, 5, Message(role="assistant", content="no state"),
                            LlmStepResult(content="no state"))  # fmt: skip

    expected = {2: details, 4: blocks}
    assert states(await attempt(1).run(transcripts.read, run_id, 6)) == expected
    assert transcripts.partial_reads == 1
    read = await attempt(1).run(Transcripts(store).read, run_id, 6)  # from the records
    assert states(read) == expected
    assert [list(b) for b in states(read)[4]["thinking_blocks"]] == [
        ["signature", "type", "thinking"],
        ["type", "data"],
    ]
    assert states(await store.load_transcript(run_id)) == {}  # asked for messages only


async def test_a_retried_step_s_next_step_on_another_worker_sends_its_turn_s_state(
    harness: Harness, settings, llm: ScriptedLLM, model_name: str
):
    """The step got a reply with OpenRouter's `reasoning_details` and recorded it, and its
    completion was lost: Temporal ran it again on another worker, which returned the record
    (the workflow's result never holds the state) and ran the run's next step. That request
    carries the turn's state, read from the record; the endpoint refused it without."""
    llm.endpoint(model_name, Endpoint(state_back="reasoning_details"))
    llm.script(
        model_name,
        [
            Reply(None, [call("calculator", expression="1+1")], reasoning_details=DETAILS),
            Reply("FINAL ANSWER: 2"),
        ],
    )
    store: Store = harness.store
    endpoint = LlmEndpoint(llm_client(settings, llm.base_url))
    run_id = f"run-retried-state-{uuid.uuid4().hex[:8]}"
    await store.put_messages(run_id, seeded("You are a test.", "Add 1 and 1."))
    step = LlmStepInput(
        run_id=run_id, seq=2, iteration=0, model=model_name, tool_names=["calculator"]
    )
    try:
        first = await attempt(1).run(
            LlmActivities(store, endpoint, harness.worker.registry).llm_step, step
        )
        other = LlmActivities(store, endpoint, harness.worker.registry)  # another worker
        again = await attempt(2).run(other.llm_step, step)
        assert again == first and "turn_state" not in again.model_dump()
        answer = Message(role="tool", content="2", tool_call_id=first.tool_calls[0].id)
        await store.put_messages(run_id, [SeqMessage(seq=3, message=answer)])
        last = await attempt(1).run(
            other.llm_step, step.model_copy(update={"seq": 4, "iteration": 1})
        )
    finally:
        await endpoint.close()
    assert last.content == "FINAL ANSWER: 2"
    assert llm.rejected[model_name] == []
    sent = [m for m in llm.requests[model_name][-1]["messages"] if m["role"] == "assistant"]
    assert [m.get("reasoning_details") for m in sent] == [DETAILS]


async def test_a_gap_in_the_new_rows_reads_the_whole_transcript(harness: Harness):
    store: Store = harness.store
    run_id = f"run-gap-{uuid.uuid4().hex[:8]}"
    transcripts = Transcripts(store)
    await store.put_messages(run_id, seeded("system", "task"))
    await attempt(1).run(transcripts.read, run_id, 2)
    await store.put_messages(run_id, seeded("late", first=3))  # nothing at 2
    read = await attempt(1).run(transcripts.read, run_id, 4)
    assert [e.seq for e in read] == [0, 1, 3] and transcripts.full_reads == 2


def test_held_transcripts_are_bounded(harness: Harness):
    transcripts = Transcripts(harness.store, max_runs=2, max_chars=10_000)
    env = attempt(1)
    for i in range(3):
        env.run(transcripts._keep, (f"run-{i}", "r"), seeded("x" * 100))
    assert list(transcripts._held) == [("run-1", "r"), ("run-2", "r")]
    env.run(transcripts._keep, ("run-3", "r"), seeded("y" * 20_000))
    assert list(transcripts._held) == []  # one run bigger than the bound is not held


async def test_a_step_of_a_long_run_measures_only_what_is_new(harness: Harness, monkeypatch):
    """What a worker holds is bounded by its size in characters; a step used to measure the
    run's whole transcript again, so a run of N steps measured N²/2 messages."""
    import activities.transcripts as held_module

    measured: list[int] = []
    size = held_module._size

    def counted(entry: SeqMessage) -> int:
        measured.append(entry.seq)
        return size(entry)

    monkeypatch.setattr(held_module, "_size", counted)
    store: Store = harness.store
    run_id = f"run-long-{uuid.uuid4().hex[:8]}"
    transcripts = Transcripts(store)
    env = attempt(1)
    env.run(transcripts.seed, run_id, seeded(*(f"message {i}" for i in range(200))))
    measured.clear()
    env.run(transcripts.add, run_id, 200, Message(role="assistant", content="a reply"))
    await store.put_messages(run_id, seeded(*(f"row {i}" for i in range(201)), first=0))
    await store.put_messages(run_id, seeded("tool result", "another", first=201))
    read = await env.run(transcripts.read, run_id, 203)
    assert measured == [200, 201, 202]  # the reply, then the two new rows: not the 200 held
    assert [e.seq for e in read] == list(range(203)) and transcripts.partial_reads == 1
    assert transcripts._chars == sum(size(e) for e in read)  # the bound still counts it all


async def test_a_run_evicted_while_its_step_reads_is_held_anew(harness: Harness):
    store: Store = harness.store
    run_id = f"run-evicted-{uuid.uuid4().hex[:8]}"
    transcripts = Transcripts(store, max_runs=1)
    env = attempt(1)
    env.run(transcripts.seed, run_id, seeded("system", "task"))
    await store.put_messages(run_id, seeded("system", "task", "reply"))
    async with store.pool.connection() as conn:
        reading = await env.run(transcripts.begin_read, run_id, 3, conn)
        env.run(transcripts.seed, "another-run", seeded("x"))  # the bound evicts ours
        read = await reading()
    assert [e.message.content for e in read] == ["system", "task", "reply"]
    key = (run_id, "temporal-run-1")  # attempt()'s
    assert list(transcripts._held) == [key]
    assert transcripts._chars == transcripts._held[key].chars


async def test_a_retried_tool_step_returns_the_recorded_result_without_running_the_tool(
    harness: Harness,
):
    ran: list[str] = []

    @tool
    async def charge_card(amount: int) -> str:
        """Charge the card (a side effect)."""
        ran.append(current_tool_call().idempotency_key)
        return f"charged {amount}"

    activities = ToolActivities(harness.store, ToolRegistry([charge_card]))
    run_id = f"run-records-{uuid.uuid4().hex[:8]}"
    step = RunToolInput(
        run_id=run_id, seq=5, call=ToolCall(id="c1", name="charge_card", arguments='{"amount": 7}')
    )

    first = await attempt(1).run(activities.run_tool, step)
    assert first.success and first.content == "charged 7" and ran == [f"{run_id}:5"]

    # the attempt's completion was lost (worker died, timeout): Temporal runs it again
    again = await attempt(2).run(activities.run_tool, step)
    assert again == first and ran == [f"{run_id}:5"]  # recorded, returned, not run again
    transcript = await harness.store.load_messages(run_id)
    assert [m.content for m in transcript] == ["charged 7"]


async def test_a_first_attempt_does_its_work_even_over_a_record(harness: Harness):
    """A reset run starts its steps again at attempt 1: they must do their work again."""
    ran: list[int] = []

    @tool
    async def count(n: int) -> str:
        """Count."""
        ran.append(n)
        return f"counted {n}"

    store: Store = harness.store
    run_id = f"run-reset-{uuid.uuid4().hex[:8]}"
    old = ToolResult(call_id="c1", name="count", success=True, content="counted 1")
    await store.record_step(run_id, 4, Message(role="tool", content="counted 1"), old)
    activities = ToolActivities(store, ToolRegistry([count]))
    step = RunToolInput(
        run_id=run_id, seq=4, call=ToolCall(id="c2", name="count", arguments='{"n": 2}')
    )
    result = await attempt(1).run(activities.run_tool, step)
    assert result.content == "counted 2" and ran == [2]
    assert await store.recorded_step(run_id, 4) == result.model_dump(mode="json")


async def test_a_tool_activity_lives_as_long_as_the_tools_own_timeout(
    client: Client, settings, llm: ScriptedLLM, model_name: str
):
    @tool(timeout_seconds=600)
    async def slow_report(topic: str) -> str:
        """A report that may take up to ten minutes."""
        return f"report on {topic}"

    llm.script(
        model_name,
        [Reply(None, [call("slow_report", topic="sales")]), Reply("FINAL ANSWER: done")],
    )
    async with running_worker(client, settings, extra_tools=[slow_report]) as running:
        result = await running.run(
            model_name, "Report on sales", memory=False, tool_timeout_seconds=120
        )
    history = await client.get_workflow_handle(result.run_id).fetch_history()
    timeouts = [
        e.activity_task_scheduled_event_attributes.start_to_close_timeout.ToTimedelta()
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == names.RUN_TOOL
    ]
    assert len(timeouts) == 1 and timeouts[0] >= timedelta(seconds=600)


async def test_an_llm_step_reads_its_transcript_and_context_on_one_checkout(
    settings, llm: ScriptedLLM, model_name: str, database_url: str, monkeypatch
):
    """Each pool checkout costs a round trip for the pool's check of the connection: the
    step's two reads (new transcript rows, the `run_context` record) share one, and the
    reply's record takes the other."""
    llm.script(model_name, [Reply("Counted.")])
    store = await Store.open(database_url, max_size=2)
    endpoint = LlmEndpoint(llm_client(settings, llm.base_url))
    checkouts: list[str] = []
    pool_connection = store.pool.connection

    def counted(*args, **kwargs):
        checkouts.append("checkout")
        return pool_connection(*args, **kwargs)

    try:
        activities = LlmActivities(store, endpoint, ToolRegistry())
        run_id = f"run-checkouts-{uuid.uuid4().hex[:8]}"
        await store.put_messages(run_id, seeded("You are a test.", "Count."))
        monkeypatch.setattr(store.pool, "connection", counted)
        step = LlmStepInput(run_id=run_id, seq=2, iteration=0, model=model_name, tool_names=[])
        result = await attempt(1).run(activities.llm_step, step)
    finally:
        await endpoint.close()
        await store.close()
    assert result.content == "Counted."
    assert len(checkouts) == 2


async def test_a_record_stands_when_the_live_output_written_with_it_fails(
    harness: Harness, monkeypatch
):
    """The live output is best effort, the record is not: when the events sent with a
    step's record fail, the step still returns its result, recorded, once."""
    from psycopg import sql

    monkeypatch.setattr(
        "activities.run_events.transaction_of", lambda appends: sql.SQL("SELECT 1/0")
    )
    ran: list[int] = []

    @tool
    async def count(n: int) -> str:
        """Count."""
        ran.append(n)
        return f"counted {n}"

    run_id = f"run-no-live-{uuid.uuid4().hex[:8]}"
    step = RunToolInput(
        run_id=run_id,
        seq=3,
        call=ToolCall(id="c1", name="count", arguments='{"n": 3}'),
        live_output=True,
    )
    activities = ToolActivities(harness.store, ToolRegistry([count]))
    result = await attempt(1).run(activities.run_tool, step)
    assert result.content == "counted 3" and ran == [3]
    assert await harness.store.recorded_step(run_id, 3) == result.model_dump(mode="json")
    assert await live_events(harness.store, run_id) == []


async def test_a_quick_iteration_costs_three_round_trips_to_postgres(
    settings, llm: ScriptedLLM, model_name: str
):
    """Counted at a proxy in front of Postgres and at the pool: an LLM step reads its
    transcript and its context record in one round trip (pipelined) and records its reply
    with its live output in another; the tool step records its result with its start and end
    in one. Each on a checkout of its own: three, where there were five of each (two reads,
    the record, then each step's events apart)."""
    from tests.support.pg_proxy import CountingProxy

    @tool
    async def count(n: int) -> str:
        """Count."""
        return f"counted {n}"

    proxy = await CountingProxy(settings.database_url).start()
    store = await Store.open(proxy.url, max_size=1)
    endpoint = LlmEndpoint(llm_client(settings, llm.base_url))

    def checkouts() -> int:
        return store.pool.get_stats().get("requests_num", 0)

    try:
        run_id = f"run-trips-{uuid.uuid4().hex[:8]}"
        await store.put_messages(run_id, seeded("You count.", "Count to 2."))
        llm.script(model_name, [Reply("", [call("count", n=2)])])
        step = LlmStepInput(
            run_id=run_id,
            seq=2,
            iteration=0,
            model=model_name,
            tool_names=["count"],
            stream=True,
        )
        proxy.round_trips, before = 0, checkouts()
        reply = await attempt(1).run(
            LlmActivities(store, endpoint, ToolRegistry([count])).llm_step, step
        )
        assert (proxy.round_trips, checkouts() - before) == (2, 2)
        assert [c.name for c in reply.tool_calls] == ["count"]
        proxy.round_trips, before = 0, checkouts()
        tool_step = RunToolInput(run_id=run_id, seq=3, call=reply.tool_calls[0], live_output=True)
        result = await attempt(1).run(
            ToolActivities(store, ToolRegistry([count])).run_tool, tool_step
        )
        assert (proxy.round_trips, checkouts() - before) == (1, 1)
        assert await live_events(store, run_id) == ["iteration", "tool_start", "tool_end"]
        assert await store.recorded_step(run_id, 2) == reply.model_dump(mode="json")
        assert await store.recorded_step(run_id, 3) == result.model_dump(mode="json")
    finally:
        await endpoint.close()
        await store.close()
        await proxy.stop()


async def test_a_tool_whose_result_cannot_be_printed_runs_once(harness: Harness):
    """A result nested past JSON's depth whose `__str__` raises, and an error whose `__str__`
    raises: the tool's observation says so, recorded at once (the activity raised before the
    record, and each of Temporal's retries ran the tool again)."""
    ran: list[str] = []

    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no text")

    class Odd(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no text either")

    @tool
    async def deep(n: int) -> Any:
        """Deeply nested data."""
        ran.append("deep")
        value: Any = Unprintable()
        for _ in range(n):
            value = [value]
        return value

    @tool
    async def odd(n: int) -> str:
        """Fails oddly."""
        ran.append("odd")
        raise Odd()

    activities = ToolActivities(harness.store, ToolRegistry([deep, odd]))
    for seq, name in ((2, "deep"), (4, "odd")):
        step = RunToolInput(
            run_id=f"run-odd-{uuid.uuid4().hex[:8]}",
            seq=seq,
            call=ToolCall(id=f"c{seq}", name=name, arguments='{"n": 5000}'),
        )
        result = await attempt(1).run(activities.run_tool, step)
        assert "unprintable" in result.content, result.content
    assert ran == ["deep", "odd"]


async def test_a_tool_that_exits_runs_once_and_its_words_are_the_observation(harness: Harness):
    """A plugin tool that ends with `sys.exit(...)` (a plain def, in its thread), a task
    group's BaseExceptionGroup, or a CancelledError nothing cancelling the activity raised (a
    future a library cancelled under the tool): raised out of the activity, every retry ran
    the tool again. Each is the tool's failure now, recorded at once; the activity's own
    cancellation, alone or inside a group, is still the activity's."""
    ran: list[str] = []
    waiting = asyncio.Event()

    @tool
    def exits(n: int) -> str:
        """Gives up on the process."""
        ran.append("exits")
        sys.exit(f"HTTP 502: upstream said no ({n})")

    @tool
    async def grouped(n: int) -> str:
        """A task group's failure."""
        ran.append("grouped")
        raise BaseExceptionGroup("tasks", [SystemExit(f"worker {n} quit")])

    @tool
    async def cancelled_under(n: int) -> str:
        """A future cancelled under it, alone or inside a group."""
        ran.append("cancelled_under")
        if n % 2:
            raise asyncio.CancelledError()
        raise BaseExceptionGroup("tasks", [asyncio.CancelledError()])

    @tool
    async def waits(n: int) -> str:
        """Waits until the activity is cancelled, inside a group or not."""
        ran.append("waits")
        waiting.set()
        if n % 2:
            await asyncio.Event().wait()
        async with asyncio.TaskGroup() as group:
            group.create_task(asyncio.Event().wait())
        return "never"

    registry = ToolRegistry([exits, grouped, cancelled_under, waits])
    activities = ToolActivities(harness.store, registry)

    def step(seq: int, name: str, n: int = 7) -> RunToolInput:
        return RunToolInput(
            run_id=f"run-exit-{uuid.uuid4().hex[:8]}",
            seq=seq,
            call=ToolCall(id=f"c{seq}", name=name, arguments=json.dumps({"n": n})),
        )

    first = await attempt(1).run(activities.run_tool, step(2, "exits"))
    assert not first.success and "SystemExit: HTTP 502: upstream said no (7)" in first.content
    second = await attempt(1).run(activities.run_tool, step(4, "grouped"))
    assert not second.success and "BaseExceptionGroup" in second.content
    alone = await attempt(1).run(activities.run_tool, step(6, "cancelled_under", 7))
    assert not alone.success and "failed: CancelledError" in alone.content
    grouped_under = await attempt(1).run(activities.run_tool, step(8, "cancelled_under", 8))
    assert not grouped_under.success and "failed: BaseExceptionGroup" in grouped_under.content
    assert ran == ["exits", "grouped", "cancelled_under", "cancelled_under"]
    for seq, n in ((10, 7), (12, 8)):
        waiting.clear()
        env = attempt(1)
        running = asyncio.ensure_future(env.run(activities.run_tool, step(seq, "waits", n)))
        await asyncio.wait_for(waiting.wait(), 60)  # hang guard
        env.cancel()
        with pytest.raises((asyncio.CancelledError, BaseExceptionGroup)):
            await asyncio.wait_for(running, 60)


async def test_a_reply_the_step_could_not_record_is_recorded_by_its_next_attempt_not_bought_again(
    harness: Harness, settings, llm: ScriptedLLM, model_name: str, database_url: str
):
    """Postgres goes down as the step records the model's reply and stays down past the
    attempt's deadline: the attempt fails as an outage, and the next one (Temporal hands it
    the last heartbeat's details) records that reply instead of calling the model again, with
    what the endpoint sent with each call for itself, the thinking behind it and the state
    the endpoint attached to the turn. It was bought twice; then its record lost the thinking
    (and the state, which the next requests carry back)."""
    signature = {"google": {"thought_signature": "sig-7f3"}}
    body_state = {"reasoning_details": DETAILS}
    reply = {
        "role": "assistant",
        "content": "held-7f3 calling the tool",
        "reasoning_content": "One and one: the calculator should say.",
        "reasoning_details": DETAILS,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "calculator", "arguments": '{"expression": "1+1"}'},
                "extra_content": signature,
            }
        ],
    }
    body = {
        "id": "r1", "object": "chat.completion", "created": 1, "model": model_name,
        "choices": [{"index": 0, "message": reply, "finish_reason": "tool_calls"}],
    }  # fmt: skip
    llm.script(
        model_name,
        [
            Raw([json.dumps(body).encode()], content_type="application/json"),
            Reply("a second reply: the model was asked again"),
        ],
    )
    run_id = f"run-held-{uuid.uuid4().hex[:8]}"
    await harness.store.put_messages(run_id, seeded("You are a test.", "Add 1 and 1."))
    proxy = await CountingProxy(database_url).start()
    store = await Store.open(proxy.url, migrate=False)
    endpoint = LlmEndpoint(llm_client(settings, llm.base_url))
    step = LlmStepInput(
        run_id=run_id, seq=2, iteration=0, model=model_name, tool_names=["calculator"]
    )
    beats: list[tuple[Any, ...]] = []
    try:
        first = attempt(1, start_to_close=timedelta(seconds=4))
        first.on_heartbeat = lambda *details: beats.append(details)
        proxy.cut_off_at(b"held-7f3")  # the reply's record never reaches Postgres
        with pytest.raises(ApplicationError) as failed:
            await first.run(LlmActivities(store, endpoint, harness.worker.registry).llm_step, step)
        assert failed.value.type == "StoreUnavailable"
        await store.close()  # that worker is gone, and what it had yet to write with it
        # the next attempt, on another worker, with the last heartbeat's details
        again = attempt(2, heartbeat_details=beats[-1] if beats else ())
        activities = LlmActivities(harness.store, endpoint, harness.worker.registry)
        result = await again.run(activities.llm_step, step)
    finally:
        await endpoint.close()
        await store.close()
        await proxy.stop()
    assert len(llm.requests[model_name]) == 1  # one billed model call, not two
    assert result.content == "held-7f3 calling the tool"
    kept = await harness.store.load_transcript(run_id)
    assert kept[-1].seq == 2 and kept[-1].message.content == "held-7f3 calling the tool"
    # the next request carries it back (a Gemini 3 model refuses one without it)
    assert kept[-1].message.tool_calls[0].extra_content == signature
    async with harness.store.connection() as conn:
        row = await (
            await conn.execute(
                "SELECT step_result->>'thinking', step_result->>'turn_state' FROM run_messages"
                " WHERE run_id = %s AND seq = 2",
                (run_id,),
            )
        ).fetchone()
    assert row == ("One and one: the calculator should say.", state_text(body_state))
    assert "thinking" not in result.model_dump()  # never the workflow's
    assert "turn_state" not in result.model_dump()
