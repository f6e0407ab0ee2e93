"""The Python API as a user writes it, on the embedded default (nothing configured)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import cast

import pytest
from temporalio.client import Client

from reactive_temporal import ReactiveAgents, Settings
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM
from reactive_temporal.hosting.runtime import Runtime, offline_model_notice
from reactive_temporal.hosting.worker_lifecycle import WorkerHost
from reactive_temporal.llm_endpoints import ModelEndpoint
from tests.workflow.conftest import Harness

pytestmark = pytest.mark.workflow


async def test_builder_run_dispose_on_the_embedded_stack(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    settings = Settings(data_dir=tmp_path / "data", _env_file=None)  # type: ignore[call-arg]
    settings.temporal_address = settings.database_url = None
    settings.openai_base_url = settings.openai_api_key = None
    agent = await (
        ReactiveAgents.create()
        .with_name("api-agent")
        .with_provider("openai", model="gpt-4o-mini")
        .with_reasoning(max_iterations=5)
        .with_memory()
        .with_tools()
        .with_settings(settings)
        .build()
    )
    try:
        assert agent.runtime.offline_model is True
        # said: a program's runs answered by a script were taken for the real model's
        assert "runs use the offline scripted model (no OPENAI_BASE_URL" in caplog.text
        result = await agent.run("What is 12 * 12?")
    finally:
        await agent.dispose()
    assert result.success and result.output == "12 * 12 = 144"
    assert result.terminated_by == "final_answer_tool" and result.agent_id == "api-agent"
    assert result.metadata.cost > 0  # gpt-4o-mini is in the price table


def test_runs_a_dev_stack_answers_offline_are_said_to_be_whatever_this_process_has(
    tmp_path: Path,
):
    """`dev` started without a model serves runs its worker answers: a key set in the
    process that starts them is not used, and the notice said none was set."""
    settings = Settings(data_dir=tmp_path, openai_api_key="sk-mine", _env_file=None)  # type: ignore[call-arg]
    runtime = Runtime(cast(Client, None), "q", offline_model=True)
    notice = offline_model_notice(settings, runtime, "gpt-4o-mini")
    assert notice is not None and "started without OPENAI_BASE_URL" in notice
    assert offline_model_notice(settings, Runtime(cast(Client, None), "q", False), "m") is None


def test_a_model_another_endpoint_serves_is_not_said_to_be_offline(tmp_path: Path):
    """With no default endpoint, a model AGENT_LLM_ENDPOINTS routes is its endpoint's, not
    the offline scripted model's; the others still are."""
    local = ModelEndpoint(base_url="http://vllm:8000/v1")
    settings = Settings(data_dir=tmp_path, llm_endpoints={"llama*": local}, _env_file=None)  # type: ignore[call-arg]
    runtime = Runtime(cast(Client, None), "q", offline_model=True)
    assert offline_model_notice(settings, runtime, "llama3.1") is None
    assert offline_model_notice(settings, runtime, "gpt-4o-mini") is not None


def test_builder_refuses_bad_configuration():
    with pytest.raises(ValueError, match="unknown provider 'anthropic'"):
        ReactiveAgents.create().with_provider("anthropic")
    with pytest.raises(ValueError, match="max_iterations"):
        ReactiveAgents.create().with_reasoning(max_iterations=0).config()
    with pytest.raises(ValueError, match="agent_id"):
        ReactiveAgents.create().with_name("").config()


async def test_run_refuses_empty_and_oversized_tasks(harness: Harness, model_name: str):
    agent = harness.agent(model_name)
    with pytest.raises(ValueError, match="task"):
        await agent.run("")
    with pytest.raises(ValueError, match="task"):
        await agent.run("x" * 100_001)


async def test_hung_llm_call_times_out_and_is_retried(
    harness: Harness, llm: ScriptedLLM, model_name
):
    # 5 s: room for the quick second call on a loaded machine (past it, a third call would
    # find the script ended); the first would answer only after a minute
    llm.script(model_name, [Reply("too late", delay=60), Reply("FINAL ANSWER: on time")])
    result = await harness.run(model_name, "Be quick", llm_timeout_seconds=5)
    assert result.output == "on time" and len(llm.requests[model_name]) == 2


async def test_a_disposed_agent_says_so(harness: Harness, model_name: str):
    """A run or chat after `dispose()` failed 5-10 s later with a connection error."""
    agent = harness.agent(model_name, agent_id="disposed")
    await agent.runtime.close()
    with pytest.raises(RuntimeError, match="disposed"):
        await agent.run("anything")
    with pytest.raises(RuntimeError, match="disposed"):
        await agent.chat("anything")


def test_an_agent_used_on_another_event_loop_than_its_worker_s_says_so():
    """Built in one `asyncio.run`, run in another: the in-process worker had died with the
    first loop, and the run waited for good, with nothing said."""

    async def built() -> Runtime:
        return Runtime(cast(Client, None), "q", False, host=cast(WorkerHost, object()))

    runtime = asyncio.run(built())

    async def used() -> None:
        runtime.require_usable()

    with pytest.raises(RuntimeError, match="another event loop"):
        asyncio.run(used())


async def test_a_run_s_summary_and_details_are_what_was_validated(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """A task given as bytes is refused, naming it (the start failed with protobuf's
    TypeError on the bytes; then pydantic's lax mode took them as text); a model name with a
    newline is one line of the Web UI's markdown details (it made a heading there)."""
    model = f"{model_name}\n## injected"
    llm.script(model, [Reply("FINAL ANSWER: 4")])
    agent = harness.agent(model, agent_id="validated", memory=False)
    with pytest.raises(TypeError, match=r"task is text \(str\), not bytes"):
        await agent.start(b"What is 2+2?")  # type: ignore[arg-type]
    handle = await agent.start("What is 2+2?")
    assert (await agent.result(handle)).output == "4"
    described = await handle.describe()
    assert await described.static_summary() == "What is 2+2?"
    details = await described.static_details() or ""
    assert "\n" not in details and f"model `{model_name} ## injected`" in details


async def test_a_run_id_that_is_no_string_is_a_value_error(harness: Harness, model_name: str):
    """`agent.cancel(123)` gave protobuf's "bad argument type for built-in operation"."""
    agent = harness.agent(model_name, agent_id="ids")
    for bad in (123, "", "run-\x00"):
        with pytest.raises(ValueError, match="a run id is a (non-empty )?string"):
            await agent.cancel(bad)  # type: ignore[arg-type]


async def test_a_result_is_awaited_by_run_id_too(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """`agent.result("run-…")` raised AttributeError ('str' object has no attribute
    'result'): it took only `start`'s handle, where every other method takes a run id."""
    llm.script(model_name, [Reply("FINAL ANSWER: 4")])
    agent = harness.agent(model_name, agent_id="by-id", memory=False)
    handle = await agent.start("What is 2+2?")
    assert (await agent.result(handle.id)).output == "4"
    with pytest.raises(ValueError, match="no run with id 'run-nope-1'"):
        await agent.result("run-nope-1")


def test_a_session_id_that_is_none_is_refused(harness: Harness, model_name: str):
    """`agent.session("")` was a new session, without a word."""
    agent = harness.agent(model_name, agent_id="sessions")
    for bad in ("", "has space", "x" * 129):
        with pytest.raises(ValueError, match="invalid session id"):
            agent.session(bad)
    assert agent.session("kept-1").id == "kept-1"
