"""Every way a run ends, on a real dev server and Postgres, with scripted models over HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from datetime import timedelta

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.service import RPCError

from reactive_temporal.api.run_results import AgentRunError
from reactive_temporal.cli.progress_lines import progress_line
from reactive_temporal.contracts import names
from reactive_temporal.contracts.run import FinalAnswerCapture, RunProgress
from reactive_temporal.embedded.scripted_llm import Drop, HttpError, Reply, ScriptedLLM, call
from tests.conftest import wait_for
from tests.workflow.conftest import Harness
from workflows.activity_options import MIN_LLM_TIMEOUT_SECONDS
from workflows.agent_run import AgentRunWorkflow

pytestmark = pytest.mark.workflow


def offered_tools(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


def asked_patches(history: WorkflowHistory) -> list[str]:
    """The patches the run asked (`workflow.patched` markers)."""
    return [
        json.loads(e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data)["id"]
        for e in history.events
        if e.marker_recorded_event_attributes.marker_name == "core_patch"
    ]


def final_answer(output: str, fmt: str = "text", **extra: str):
    return call("final-answer", output=output, format=fmt, summary="Done.", **extra)


async def test_final_answer_tool_after_a_tool_call(harness: Harness, llm: ScriptedLLM, model_name):
    llm.script(
        model_name,
        [
            Reply("Let me compute.", [call("calculator", expression="(17 * 23) + 4")]),
            Reply("Submitting.", [final_answer("395", confidence="high")]),
        ],
    )
    result = await harness.run(model_name, "What is (17 * 23) + 4?")

    assert result.terminated_by == "final_answer_tool"
    assert result.output == "395"
    assert result.success is True
    assert result.final_answer is not None and result.final_answer.confidence == "high"
    assert result.metadata.iterations == 2
    assert result.metadata.steps_count == 3  # two LLM steps and one tool call
    assert result.metadata.tokens_used > 0
    first, second = llm.requests[model_name]
    assert "final-answer" not in offered_tools(first)  # hidden at iteration 0
    assert "final-answer" in offered_tools(second)  # shown once a tool ran
    tool_message = second["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["content"] == "395"
    transcript = await harness.store.load_messages(result.run_id)
    notes = "Notes from earlier runs."  # memory of the shared test agent, when it has any
    roles = [m.role for m in transcript if not (m.content or "").startswith(notes)]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert (transcript[-1].content or "").startswith("✓ final-answer accepted")


async def test_final_answer_text(harness: Harness, llm: ScriptedLLM, model_name):
    llm.script(model_name, [Reply("FINAL ANSWER: The answer is 42.")])
    result = await harness.run(model_name, "What is six times seven?")
    assert (result.terminated_by, result.output) == ("final_answer", "The answer is 42.")
    assert result.metadata.iterations == 1 and result.success


async def test_end_turn(harness: Harness, llm: ScriptedLLM, model_name):
    llm.script(model_name, [Reply("Paris is the capital of France.")])
    result = await harness.run(model_name, "Capital of France?")
    assert result.terminated_by == "end_turn"
    assert result.output == "Paris is the capital of France."
    assert result.success and result.metadata.iterations == 1


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_reply_cut_off_at_the_output_limit_does_not_end_the_run(
    harness: Harness, llm: ScriptedLLM, model_name, stream
):
    """Without it the half answer was the run's `final_answer`, flagged a success."""
    llm.script(
        model_name,
        [
            Reply("FINAL ANSWER: The capital of France is", finish_reason="length"),
            Reply("Nothing but words,", finish_reason="content_filter"),
            Reply("FINAL ANSWER: Paris."),
        ],
    )
    handle = await harness.start(model_name, "Capital of France?", live_output=stream)
    result = await harness.agent(model_name).result(handle)
    assert (result.terminated_by, result.output) == ("final_answer", "Paris.")
    assert result.metadata.iterations == 3
    assert [r.get("stream", False) for r in llm.requests[model_name]] == [stream] * 3
    # the model was told why: its cut-off reply, then the note, then the filtered one, then its note
    second, third = llm.requests[model_name][1:3]  # a debrief's synthesis may follow
    assert "cut off at the output token limit" in second["messages"][-1]["content"]
    assert "content filter" in third["messages"][-1]["content"]
    # asked once, when the first cut-off reply came
    assert asked_patches(await handle.fetch_history()) == ["cut-short-replies-go-on"]


async def test_a_tool_call_cut_off_at_the_output_limit_is_named_so(
    harness: Harness, llm: ScriptedLLM, model_name
):
    """Its arguments end mid-JSON: the model reads that its reply was cut off, not only that
    its JSON is broken; a whole call's error says nothing of the kind."""
    llm.script(
        model_name,
        [
            Reply("Computing.", [call("calculator", '{"expression": "6*')], finish_reason="length"),
            Reply("Again.", [call("calculator", '{"expression": "6*')]),
            Reply("FINAL ANSWER: 42"),
        ],
    )
    result = await harness.run(model_name, "What is 6*7?")
    assert result.output == "42"
    # the run's second and third requests (a debrief's synthesis may follow them)
    cut, whole = [r["messages"][-1]["content"] for r in llm.requests[model_name][1:3]]
    assert cut.startswith("[Tool error: invalid arguments for calculator")
    assert "cut off at the output token limit" in cut
    assert whole.startswith("[Tool error: invalid arguments for calculator")
    assert "cut off" not in whole


async def test_a_run_whose_replies_are_whole_asks_no_patch_for_cut_off_ones(
    harness: Harness, llm: ScriptedLLM, model_name
):
    llm.script(model_name, [Reply("FINAL ANSWER: Paris.")])
    handle = await harness.start(model_name, "Capital of France?")
    await harness.agent(model_name).result(handle)
    assert asked_patches(await handle.fetch_history()) == []


async def test_an_llm_timeout_under_a_microsecond_still_lets_the_model_answer(
    harness: Harness, llm: ScriptedLLM, model_name
):
    """`llm_timeout_seconds=1e-7` is positive, as the contract asks, and was no timeout at
    all to the SDK, which raised in workflow code: the run stood still, no model called. The
    step is scheduled with the floor, MIN_LLM_TIMEOUT_SECONDS, and the model is asked. (Not
    whether the run then ends: a loaded machine can take more than that second for a step,
    and each try is then timed out.)"""
    llm.script(model_name, [Reply("FINAL ANSWER: quick")])
    handle = await harness.start(model_name, "Be quick", llm_timeout_seconds=1e-7, memory=False)
    try:
        await wait_for(lambda: bool(llm.requests.get(model_name)), seconds=60)
        history = await handle.fetch_history()
    finally:
        with contextlib.suppress(RPCError):  # ended already, on a quick machine
            await handle.terminate("test: seen")
    steps = [
        e.activity_task_scheduled_event_attributes
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == names.LLM_STEP
    ]
    assert steps and steps[0].start_to_close_timeout.ToTimedelta() == timedelta(
        seconds=MIN_LLM_TIMEOUT_SECONDS
    )
    assert not [
        e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]


async def test_max_iterations(harness: Harness, llm: ScriptedLLM, model_name):
    llm.script(
        model_name,
        [Reply("Still working.", [call("calculator", expression="1+1")])],
        repeat_last=True,
    )
    handle = await harness.start(model_name, "Loop forever", max_iterations=3)
    result = await harness.agent(model_name).result(handle)
    assert result.terminated_by == "max_iterations"
    assert result.success is False
    assert result.metadata.iterations == 3
    assert result.output == "Still working."  # the last thought stands in for an answer
    # what live progress last saw: ended, three iterations, not a fourth "in progress"
    progress = await handle.query(AgentRunWorkflow.progress)
    assert (progress.status, progress.terminated_by) == ("completed", "max_iterations")
    assert progress.current_iteration == 3
    assert progress_line(progress).startswith("3/3 iterations")
    run_steps = [r for r in llm.requests[model_name] if r.get("tools")]  # not the debrief's
    assert len(run_steps) == 3


async def test_llm_error_on_http_400_is_not_retried(harness: Harness, llm, model_name):
    llm.script(model_name, [HttpError(400, "unsupported parameter: tools")])
    result = await harness.run(model_name, "Anything")
    assert result.terminated_by == "llm_error"
    assert result.success is False
    assert result.error is not None and "HTTP 400" in result.error and "unsupported" in result.error
    assert len([r for r in llm.requests[model_name] if r.get("tools")]) == 1  # not the debrief's


async def test_survives_two_429s_and_a_500(harness: Harness, llm: ScriptedLLM, model_name):
    llm.script(
        model_name,
        [
            HttpError(429, "slow down", headers={"retry-after": "1"}),
            HttpError(429, "slow down", headers={"retry-after": "1"}),
            HttpError(500, "upstream exploded"),
            Reply("FINAL ANSWER: recovered"),
        ],
    )
    started = time.monotonic()
    result = await harness.run(model_name, "Be resilient")
    assert (result.terminated_by, result.output, result.success) == (
        "final_answer",
        "recovered",
        True,
    )
    assert len(llm.requests[model_name]) == 4
    assert time.monotonic() - started >= 2.0  # both retry-after waits were honoured


async def test_dropped_connection_is_retried(harness: Harness, llm: ScriptedLLM, model_name):
    llm.script(model_name, [Drop(), Reply("FINAL ANSWER: ok")])
    result = await harness.run(model_name, "Survive a dropped connection")
    assert result.output == "ok" and len(llm.requests[model_name]) == 2


async def test_retries_exhausted_is_llm_error(harness: Harness, llm: ScriptedLLM, model_name):
    llm.script(model_name, [HttpError(503, "down")], repeat_last=True)
    result = await harness.run(model_name, "Endpoint down", llm_max_attempts=2)
    assert result.terminated_by == "llm_error" and "503" in (result.error or "")
    run_steps = [r for r in llm.requests[model_name] if r.get("tools")]  # not the debrief's
    assert len(run_steps) == 2


async def test_rejected_final_answer_then_accepted(harness: Harness, llm, model_name):
    llm.script(
        model_name,
        [
            Reply(None, [call("calculator", expression="2*21")]),
            Reply(None, [final_answer("{not json", "json")]),
            Reply(None, [final_answer('{"answer": 42}', "json")]),
        ],
    )
    result = await harness.run(model_name, "Answer in JSON")
    assert result.terminated_by == "final_answer_tool"
    assert result.format == "json"  # the declared format reaches the result (upstream: "text")
    assert result.output == '{"answer": 42}'
    rejection = llm.requests[model_name][2]["messages"][-1]
    assert rejection["role"] == "tool" and "invalid JSON" in rejection["content"]


async def test_required_tool_gates_the_final_answer(harness: Harness, llm, model_name):
    llm.script(
        model_name,
        [
            Reply(None, [call("calculator", expression="1+1")]),
            Reply(None, [final_answer("2")]),
            Reply(None, [call("current_time")]),
            Reply(None, [final_answer("2, and the time")]),
        ],
    )
    result = await harness.run(
        model_name, "Add, and check the time", required_tools=["current_time"]
    )
    requests = llm.requests[model_name]
    assert "final-answer" not in offered_tools(requests[1])  # required tool not yet called
    rejection = requests[2]["messages"][-1]["content"]
    assert "Still need to call: current_time" in rejection
    assert result.terminated_by == "final_answer_tool" and result.output == "2, and the time"


async def test_tool_failures_become_observations(harness: Harness, llm, model_name):
    llm.script(
        model_name,
        [
            Reply(
                None,
                [
                    call("no_such_tool", x=1),
                    call("calculator", raw_arguments="{not json"),
                    call("calculator", expression="1/0"),
                    call("file_read", path="../../etc/passwd"),
                ],
            ),
            Reply("FINAL ANSWER: handled"),
        ],
    )
    result = await harness.run(model_name, "Break things")
    assert result.success and result.output == "handled"
    observations = [
        m["content"] for m in llm.requests[model_name][1]["messages"] if m["role"] == "tool"
    ]
    assert len(observations) == 4
    assert "unknown tool 'no_such_tool'" in observations[0]
    assert "invalid arguments for calculator" in observations[1]
    assert "division by zero" in observations[2]
    assert "outside the workspace" in observations[3]


async def test_parallel_tool_calls_keep_their_order(harness: Harness, llm, model_name):
    calls = [call("calculator", expression=f"{i}*10") for i in range(6)]
    llm.script(model_name, [Reply(None, calls), Reply("FINAL ANSWER: listed")])
    result = await harness.run(model_name, "Six sums", max_parallel_tools=3)
    observations = [
        m["content"] for m in llm.requests[model_name][1]["messages"] if m["role"] == "tool"
    ]
    assert observations == [str(i * 10) for i in range(6)]
    assert result.metadata.steps_count == 8


async def test_operator_signal_ends_a_run_in_flight(harness: Harness, llm, model_name):
    llm.script(model_name, [Reply("thinking slowly", delay=300)])
    handle = await harness.start(model_name, "A slow task")

    async def llm_called() -> bool:
        return len(llm.requests[model_name]) >= 1

    await wait_for(llm_called, seconds=60)
    await handle.signal(
        "final_answer", FinalAnswerCapture(output="stopped by operator", format="text")
    )
    # the 300 s LLM call was cancelled, not awaited: 60 s is a hang guard, not a timing
    result = await asyncio.wait_for(handle.result(), 60)
    assert result.terminated_by == "final_answer_tool"
    assert result.output == "stopped by operator"


async def test_progress_query_reports_the_live_iteration(harness: Harness, llm, model_name):
    llm.script(
        model_name,
        [
            Reply(None, [call("calculator", expression="3+4")]),
            Reply("FINAL ANSWER: 7", delay=5),
        ],
    )
    handle = await harness.start(model_name, "Slow second step")

    async def at_second_iteration() -> bool:
        progress = await handle.query("progress", result_type=RunProgress)
        return progress.iteration == 1

    await wait_for(at_second_iteration, seconds=60)
    progress = await handle.query("progress", result_type=RunProgress)
    assert progress.status == "running" and progress.tools_called == ["calculator"]
    assert progress.tokens > 0 and progress.last_observation == "7"
    assert (await handle.result()).output == "7"


async def test_unknown_agent_tool_fails_the_run_with_a_clear_error(harness: Harness, model_name):
    with pytest.raises(AgentRunError, match="does not have: teleport"):
        await harness.run(model_name, "Go", tools=["calculator", "teleport"])


async def test_concurrent_runs_do_not_mix_transcripts(cached_harness: Harness, llm: ScriptedLLM):
    harness = cached_harness  # runs started at once: see the fixture
    models = []
    for i in range(4):
        models.append(llm.script(f"concurrent-{i}-{time.time_ns()}", [Reply(f"FINAL ANSWER: {i}")]))
    results = await asyncio.gather(*(harness.run(m, f"task {i}") for i, m in enumerate(models)))
    assert [r.output for r in results] == ["0", "1", "2", "3"]
    for i, result in enumerate(results):  # each run's transcript is its own, in order
        transcript = [  # the shared test agent's memory notes, when it has any, aside
            m
            for m in await harness.store.load_messages(result.run_id)
            if not (m.content or "").startswith("Notes from earlier runs.")
        ]
        assert [m.role for m in transcript] == ["system", "user", "assistant"]
        assert transcript[1].content == f"task {i}"
        assert transcript[2].content == f"FINAL ANSWER: {i}"
        sent = llm.requests[models[i]][0]["messages"][1]["content"]
        assert sent.split("\n\n")[0] == f"task {i}"  # the agent's notes may follow
