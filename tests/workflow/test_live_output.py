"""A run's live output on a real dev server and Postgres, the model streaming over real HTTP:
text as it is generated, tool calls starting and ending, approvals, the end with its result;
read live, late, from an offset; a retried call shown once; history unchanged by streaming."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Awaitable
from datetime import datetime

import pytest
from temporalio.api.enums.v1 import EventType

from activities.run_events import RunEvents
from activities.text_stream import TEXT_WRITE_INTERVAL
from reactive_temporal.api.live_feed import LIVE_FEED_NAME, READERS
from reactive_temporal.api.watching import stream_events
from reactive_temporal.contracts.events import NewEvent, RunEvent
from reactive_temporal.contracts.run import RunProgress
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from tests.conftest import wait_for
from tests.workflow.conftest import Harness
from workflows.agent_run import AgentRunWorkflow

WORKFLOW_TASK_EVENTS = {
    EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
    EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
}

pytestmark = pytest.mark.workflow

ANSWER = "The stock count is 42 units across three warehouses, all reconciled."


def unique_agent() -> str:
    return f"live-{uuid.uuid4().hex[:8]}"


def texts_by_step(events: list[RunEvent]) -> dict[int, str]:
    joined: dict[int, str] = {}
    for e in events:
        if e.type == "text":
            assert e.step is not None and e.delta is not None
            joined[e.step] = e.delta if e.restart else joined.get(e.step, "") + e.delta
    return joined


def shape(events: list[RunEvent]) -> list[tuple[str, object]]:
    """What a watcher saw, without times and offsets."""
    return [(e.type, e.delta or e.tool or e.iteration or e.status) for e in events]


async def test_a_run_streams_its_text_tool_calls_and_end(
    harness: Harness, llm: ScriptedLLM, model_name
):
    llm.script(
        model_name,
        [
            Reply("Counting the stock.", [call("calculator", expression="6*7")], chunks=3),
            Reply(ANSWER, chunks=12, chunk_delay=0.02),
        ],
    )
    agent = harness.agent(model_name, agent_id=unique_agent())
    events = [e async for e in agent.run_stream("Count the stock")]

    types = [e.type for e in events]
    assert types[0] == "iteration" and types[-1] == "finished"
    assert types.count("iteration") == 2
    assert [e.iteration for e in events if e.type == "iteration"] == [1, 2]
    texts = [e for e in events if e.type == "text"]
    assert len(texts) >= 2  # several text events, not one
    finished = events[-1]
    assert finished.result is not None and finished.result.output == ANSWER
    assert finished.status == "completed"
    first_step, answer_step = sorted(texts_by_step(events))
    assert texts_by_step(events) == {first_step: "Counting the stock.", answer_step: ANSWER}
    start, end = [e for e in events if e.type in ("tool_start", "tool_end")]
    assert (start.type, start.tool, start.arguments) == (
        "tool_start",
        "calculator",
        '{"expression": "6*7"}',
    )
    assert (end.type, end.tool, end.success, end.preview) == ("tool_end", "calculator", True, "42")
    assert types.index("tool_start") < types.index("tool_end") < len(types) - 1
    offsets = [e.offset for e in events if e.offset is not None]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)

    # attaching after the run ended prints the same events
    late = [e async for e in agent.events(finished.result.run_id)]
    assert shape(late) == shape(events)
    # and a watcher that reconnects from an offset gets the rest
    resumed = [e async for e in agent.events(finished.result.run_id, from_offset=offsets[3] + 1)]
    assert shape(resumed) == shape([e for e in events if e.offset is None or e.offset > offsets[3]])


async def test_history_per_llm_call_is_the_same_for_1_and_50_chunks(
    harness: Harness, llm: ScriptedLLM, model_name
):
    async def history_of(chunks: int) -> list[int]:
        # streamed over half a second: its text goes out before the reply ends
        reply = Reply(ANSWER, chunks=chunks, chunk_delay=0.5 / chunks)
        model = llm.script(f"{model_name}-{chunks}", [reply])
        agent = harness.agent(model, agent_id=unique_agent(), memory=False)
        events = [e async for e in agent.run_stream("Count")]
        assert texts_by_step(events) == {events[1].step: ANSWER}
        assert len([e for e in events if e.type == "text"]) >= (2 if chunks > 1 else 1)
        run_id = events[-1].result.run_id  # type: ignore[union-attr]
        history = await harness.client.get_workflow_handle(run_id).fetch_history()
        # Workflow-task bookkeeping depends on the machine's load (a task that timed out
        # under load is scheduled again); what streaming could add is everything else.
        return [e.event_type for e in history.events if e.event_type not in WORKFLOW_TASK_EVENTS]

    one, fifty = await history_of(1), await history_of(50)
    assert one == fifty  # the same events, in the same order: streaming adds none
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED in fifty  # the LLM step is in it
    assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED not in fifty


async def test_a_retried_llm_call_shows_its_text_once(
    harness: Harness, llm: ScriptedLLM, model_name
):
    llm.script(
        model_name,
        [
            # cut mid-answer, 0.2 s in: its first text has gone out (FIRST_TEXT_AFTER)
            Reply(ANSWER, chunks=10, chunk_delay=0.05, drop_after_chunks=4),
            Reply(ANSWER, chunks=7),  # the retry: the same answer, cut differently
        ],
    )
    agent = harness.agent(model_name, agent_id=unique_agent())
    events = [e async for e in agent.run_stream("Count")]
    assert events[-1].result is not None and events[-1].result.output == ANSWER
    assert len(llm.requests[model_name]) == 2  # the call really was retried
    texts = [e for e in events if e.type == "text"]
    assert "".join(e.delta or "" for e in texts) == ANSWER  # no character twice
    assert not any(e.restart for e in texts)


async def test_a_retry_that_answers_differently_restarts_the_step(
    harness: Harness, llm: ScriptedLLM, model_name
):
    llm.script(
        model_name,
        [
            # cut after a quarter of a second: its text has gone out (FIRST_TEXT_AFTER)
            Reply("I think the answer is 41", chunks=6, chunk_delay=0.05, drop_after_chunks=5),
            Reply(ANSWER, chunks=3),
        ],
    )
    agent = harness.agent(model_name, agent_id=unique_agent())
    events = [e async for e in agent.run_stream("Count")]
    [step] = texts_by_step(events)
    assert texts_by_step(events) == {step: ANSWER}
    assert any(e.restart for e in events if e.type == "text")


async def test_approvals_show_in_the_live_output(harness: Harness, llm: ScriptedLLM, model_name):
    llm.script(
        model_name,
        [Reply("Checking.", [call("calculator", expression="2+2")]), Reply("FINAL ANSWER: 4")],
    )
    agent = harness.agent(model_name, agent_id=unique_agent(), approve_tools=["calculator"])
    handle = await agent.start("2+2")

    async def parked() -> bool:
        progress: RunProgress = await handle.query(AgentRunWorkflow.progress)
        return progress.waiting_for == "approval"

    await wait_for(parked, seconds=60)
    await agent.approve(handle.id, by="alice")
    events = [e async for e in agent.events(handle.id)]
    approvals = [(e.status, e.tool, e.by) for e in events if e.type == "approval"]
    assert approvals == [("pending", "calculator", None), ("approved", "calculator", "alice")]
    types = [e.type for e in events]
    assert types.index("approval") < types.index("tool_start")


async def test_a_terminated_run_finishes_without_a_result(
    harness: Harness, llm: ScriptedLLM, model_name
):
    llm.script(model_name, [Reply("Working on it.", delay=90)])
    agent = harness.agent(model_name, agent_id=unique_agent())
    handle = await agent.start("A long job")
    watching = asyncio.ensure_future(_collect(agent.events(handle.id)))

    async def in_call() -> bool:  # and announced: a model silent for ANNOUNCE_AFTER seconds
        return len(llm.requests[model_name]) == 1 and [
            t for t, _ in await transactions(harness, handle.id)
        ] == ["iteration"]

    await wait_for(in_call, seconds=60)
    await harness.client.get_workflow_handle(handle.id).terminate(reason="operator")
    events = await asyncio.wait_for(watching, 60)
    assert [e.type for e in events] == ["iteration", "finished"]
    assert (events[-1].status, events[-1].result) == ("terminated", None)


async def _collect(events) -> list[RunEvent]:
    return [e async for e in events]


async def test_unknown_runs_and_bad_offsets_are_refused(harness: Harness, model_name):
    agent = harness.agent(model_name, agent_id=unique_agent())
    with pytest.raises(ValueError, match="no run with id 'run-nope'"):
        await _collect(agent.events("run-nope"))
    with pytest.raises(ValueError, match="from_offset must be 0 or more"):
        await _collect(agent.events("run-nope", from_offset=-1))


async def test_a_chat_turn_streams_its_reply_and_its_tool_path_run(
    harness: Harness, llm: ScriptedLLM, model_name
):
    agent_id = unique_agent()
    reply_text = "Your last run counted 42 units; nothing failed."
    llm.script(
        model_name,
        [
            # the direct path's answer, streamed over 0.3 s: its first text goes out before
            # the reply ends (FIRST_TEXT_AFTER), however loaded the machine
            Reply(reply_text, chunks=6, chunk_delay=0.05),
            Reply("Computing.", [call("calculator", expression="7*6")]),  # the tool path's run
            Reply("FINAL ANSWER: 42"),
        ],
    )
    agent = harness.agent(model_name, agent_id=agent_id)

    stream_id = agent.new_chat_stream_id()
    turn = asyncio.ensure_future(
        agent.chat("What did you find?", use_tools=False, stream_id=stream_id)
    )
    events = [e async for e in agent.chat_events(stream_id, turn)]
    reply = await turn
    assert reply.message == reply_text
    assert [e.type for e in events] == ["text"] * len(events) and len(events) >= 2
    assert "".join(e.delta or "" for e in events) == reply_text

    stream_id = agent.new_chat_stream_id()
    turn = asyncio.ensure_future(agent.chat("calculate 7*6", use_tools=True, stream_id=stream_id))
    events = [e async for e in agent.chat_events(stream_id, turn)]
    reply = await turn
    assert reply.run_id == stream_id and reply.message == "42"
    types = [e.type for e in events]
    assert "tool_start" in types and "tool_end" in types and types[0] == "iteration"


async def test_a_chat_stream_id_must_have_the_run_id_shape(harness: Harness, model_name):
    from reactive_temporal.api.chat_refusals import ChatError

    agent = harness.agent(model_name, agent_id=unique_agent())
    with pytest.raises(ChatError, match="invalid stream_id 'agent-x'"):
        await agent.chat("hello", stream_id="agent-x")


async def test_a_chat_stream_id_is_the_agent_s_own_and_new(
    harness: Harness, llm: ScriptedLLM, model_name
):
    """Another agent's chat run id is refused (the turn took that run over: its stored
    transcript, its result, its live output), and an id used before is refused, not run
    again (the new run answered the old run's task and wrote over its transcript)."""
    from reactive_temporal.api.chat_refusals import ChatError

    llm.script(
        model_name,
        [
            Reply("Computing.", [call("calculator", expression="7*6")]),
            Reply("FINAL ANSWER: 42"),
            Reply("Computing.", [call("calculator", expression="1+1")]),
            Reply("FINAL ANSWER: 2"),
        ],
    )
    victim = harness.agent(model_name, agent_id=unique_agent())
    stream_id = victim.new_chat_stream_id()
    first = await victim.chat("calculate 7*6", use_tools=True, stream_id=stream_id)
    assert first.run_id == stream_id and first.message == "42"

    attacker = harness.agent(model_name, agent_id=unique_agent())
    with pytest.raises(ChatError, match="invalid stream_id"):
        await attacker.chat("calculate 1+1", use_tools=True, stream_id=stream_id)
    with pytest.raises(ChatError, match="already"):
        await victim.chat("calculate 1+1", use_tools=True, stream_id=stream_id)
    assert len(llm.requests[model_name]) == 2  # neither turn reached the model
    handle = harness.client.get_workflow_handle(stream_id)
    assert (await handle.result())["output"] == "42"  # the first run stands


async def test_a_finely_streamed_reply_is_written_a_few_times_a_second(
    harness: Harness, llm: ScriptedLLM, model_name
):
    """A model streaming 60 chunks over about 1.2 s: its text goes out while it streams, at
    most once per TEXT_WRITE_INTERVAL (it was a transaction and a NOTIFY per chunk), and a
    watcher reads every character once."""
    words = " ".join(f"w{i}" for i in range(60))
    llm.script(model_name, [Reply(f"FINAL ANSWER: {words}", chunks=60, chunk_delay=0.02)])
    agent = harness.agent(model_name, agent_id=unique_agent(), memory=False)
    events = [e async for e in agent.run_stream("Count")]
    result = events[-1].result
    assert result is not None and result.output == words
    assert texts_by_step(events) == {events[1].step: f"FINAL ANSWER: {words}"}
    written = [at for kind, at in await transactions(harness, result.run_id) if kind == "text"]
    streamed_for = (written[-1] - written[0]).total_seconds()
    assert streamed_for > 0.6  # the first text went out long before the reply ended
    # a second of slack: transaction start times, not the worker's clock, under any load
    assert 3 <= len(written) <= (streamed_for + 1.0) / TEXT_WRITE_INTERVAL + 2


async def transactions(harness: Harness, run_id: str) -> list[tuple[str, datetime]]:
    """The run's events in order, each with the start time of the transaction that wrote it
    (`created_at` defaults to now(): events written together share it)."""
    async with harness.store.pool.connection() as conn:
        cur = await conn.execute(
            'SELECT type, created_at FROM run_events WHERE run_id = %s ORDER BY "offset"',
            (run_id,),
        )
        return [tuple(r) for r in await cur.fetchall()]  # type: ignore[misc]


async def test_a_quick_step_writes_its_announcement_with_what_follows(
    harness: Harness, llm: ScriptedLLM, model_name, monkeypatch
):
    """The iteration goes out with its first text, and a quick reply's text with the reply's
    record; a quick tool's start with its end: one transaction and one wake-up for the
    watchers each, in the same order as before."""
    monkeypatch.setattr("activities.run_events.ANNOUNCE_AFTER", 30.0)
    llm.script(
        model_name,
        [Reply("Counting.", [call("calculator", expression="6*7")]), Reply("FINAL ANSWER: 42")],
    )
    agent = harness.agent(model_name, agent_id=unique_agent())
    events = [e async for e in agent.run_stream("Count")]
    assert events[-1].result is not None
    rows = await transactions(harness, events[-1].result.run_id)
    types = [t for t, _ in rows]
    assert types[:2] == ["iteration", "text"] and rows[0][1] == rows[1][1]
    async with harness.store.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT created_at FROM run_messages WHERE run_id = %s AND role = 'assistant' "
            "ORDER BY seq LIMIT 1",
            (events[-1].result.run_id,),
        )
        reply = await cur.fetchone()
    assert reply is not None and reply[0] == rows[0][1]  # written with the reply's record
    start, end = types.index("tool_start"), types.index("tool_end")
    assert end == start + 1 and rows[start][1] == rows[end][1]


async def test_a_slow_step_announces_itself_before_it_ends(
    harness: Harness, llm: ScriptedLLM, model_name, monkeypatch
):
    """A tool still running, a model that has not answered yet: their announcements go out
    alone after ANNOUNCE_AFTER seconds, so a watcher sees the work begin while it runs.

    The model answers, and the tool returns, only once the announcement is in the table (a
    minute at most): written only with what follows, it never would be, and they end
    unseen. Not timed: a fixed delay is shortened, on a loaded machine, by a late first write.
    """
    monkeypatch.setattr("activities.run_events.ANNOUNCE_AFTER", 0.2)
    from reactive_temporal.tools import tool

    agent_id = unique_agent()
    opened: list[bool] = []  # each wait for an announcement: seen, or given up after a minute
    seen: dict[str, threading.Event] = {
        "iteration": threading.Event(),
        "tool_start": threading.Event(),
    }

    async def watch() -> None:
        while not all(e.is_set() for e in seen.values()):
            async with harness.store.pool.connection() as conn:
                cur = await conn.execute(
                    "SELECT DISTINCT type FROM run_events WHERE run_id LIKE %s",
                    (f"%{agent_id}%",),
                )
                for (kind,) in await cur.fetchall():
                    if kind in seen:
                        seen[kind].set()
            await asyncio.sleep(0.05)

    @tool
    async def slow_count(sku: str) -> str:
        """Count a SKU, once it was seen to start."""
        opened.append(await asyncio.to_thread(seen["tool_start"].wait, 60))
        return "7"

    def answer_once_seen(request: dict[str, object]) -> Reply:
        opened.append(seen["iteration"].wait(60))
        if len(llm.requests[model_name]) == 1:
            return Reply("Counting.", [call("slow_count", sku="A")])
        return Reply("FINAL ANSWER: 7")

    harness.worker.registry.add(slow_count)
    llm.script(model_name, answer_once_seen)
    agent = harness.agent(model_name, agent_id=agent_id)
    watching = asyncio.create_task(watch())
    try:
        events = [e async for e in agent.run_stream("Count A")]
    finally:
        watching.cancel()
    assert all(opened), "an announcement went out only with what followed it"
    assert events[-1].result is not None
    rows = dict(enumerate(await transactions(harness, events[-1].result.run_id)))
    types = [t for t, _ in rows.values()]
    assert types[:2] == ["iteration", "text"]
    assert rows[1][1] > rows[0][1]  # the iteration, then the text, in a transaction of its own
    start, end = types.index("tool_start"), types.index("tool_end")
    assert rows[end][1] > rows[start][1]


async def test_a_watcher_whose_connection_postgres_drops_goes_on_where_it_was(
    harness: Harness, llm: ScriptedLLM, model_name
):
    """Postgres ends the watcher's connection mid-run (a restart, a failover): the watcher
    connects again and reads on from the event after the last it gave, every event once (it
    raised psycopg's OperationalError: `run` and `watch` printed a traceback and exited 1
    while the run went on unseen)."""
    llm.script(
        model_name,
        [
            Reply("Counting the stock.", [call("calculator", expression="6*7")], delay=1.0),
            Reply(ANSWER, chunks=12, chunk_delay=0.05, delay=1.0),
        ],
    )
    agent = harness.agent(model_name, agent_id=unique_agent())
    events: list[RunEvent] = []
    dropped = 0
    async for event in agent.run_stream("Count the stock"):
        events.append(event)
        if event.type == "iteration" and not dropped:
            async with harness.store.pool.connection() as conn:
                cur = await conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE pid <> pg_backend_pid() AND datname = current_database()"
                    " AND (query LIKE 'LISTEN %%' OR query LIKE '%%FROM run_events%%')"
                )
                dropped = len(await cur.fetchall())
    assert dropped >= 1
    assert events[-1].type == "finished" and events[-1].result is not None
    assert events[-1].result.output == ANSWER
    offsets = [e.offset for e in events if e.offset is not None]
    assert offsets == sorted(set(offsets))  # each once, in order
    assert ANSWER in texts_by_step(events).values()


async def test_a_process_s_watchers_share_a_few_connections(harness: Harness, database_url):
    """Forty watchers in one process hold at most 1 + READERS connections to Postgres, each
    still woken by its own stream's events, and none once they stop (each held one: a web app
    showing 120 runs used up Postgres's max_connections, and the workers sharing it could no
    longer record their runs)."""
    streams = [f"run-share-{uuid.uuid4().hex[:8]}" for _ in range(40)]
    until: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    seen: dict[str, list[str]] = {s: [] for s in streams}

    async def watch(stream: str) -> None:
        async for event in stream_events(database_url, stream, until=until):
            seen[stream].append(event.type)

    async def watchers_connections() -> int:
        async with harness.store.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND (query LIKE 'LISTEN %%' OR query LIKE 'UNLISTEN %%'"
                " OR query LIKE 'SELECT \"offset\", type%%' OR application_name = %s)",
                (LIVE_FEED_NAME,),
            )
            row = await cur.fetchone()
            assert row is not None
            return int(row[0])

    watchers = [asyncio.ensure_future(watch(s)) for s in streams]
    await asyncio.sleep(1.5)  # every watcher has read and listens
    await RunEvents(harness.store).append(
        streams[7], [NewEvent(type="iteration", step=1, data={"iteration": 1})]
    )
    await wait_for(lambda: seen[streams[7]] == ["iteration"], 60)
    held = await watchers_connections()
    until.set_result(None)
    await asyncio.wait_for(asyncio.gather(*watchers), 60)
    assert 1 <= held <= 1 + READERS
    assert [s for s in streams if seen[s]] == [streams[7]]
    await wait_for(lambda: _is_zero(watchers_connections()), 60)


async def _is_zero(count: Awaitable[int]) -> bool:
    return await count == 0
