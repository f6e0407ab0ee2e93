"""Workflow history grows linearly with iterations, and slowly: no activity input carries the
transcript, and no step payload the fields at their defaults."""

from __future__ import annotations

import json
import uuid

import pytest
from pydantic import BaseModel

from reactive_temporal.contracts import names
from reactive_temporal.contracts.llm_payloads import LlmStepInput, LlmStepResult
from reactive_temporal.contracts.run import RunToolInput, ToolResult
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from tests.workflow.conftest import Harness

pytestmark = pytest.mark.workflow


async def history_bytes_per_iteration(harness: Harness, llm: ScriptedLLM, iterations: int) -> float:
    model = llm.script(
        f"growth-{iterations}",
        # the same tool output every iteration, so only the transcript's length changes
        [Reply("Another step.", [call("calculator", expression="123456789 * 987654321")])],
        repeat_last=True,
    )
    handle = await harness.start(model, "Keep multiplying", max_iterations=iterations)
    result = await handle.result()
    assert result.metadata.iterations == iterations
    history = await handle.fetch_history()
    return len(history.to_json().encode()) / iterations


async def test_history_bytes_per_iteration_stay_flat(harness: Harness, llm: ScriptedLLM):
    short = await history_bytes_per_iteration(harness, llm, 5)
    long = await history_bytes_per_iteration(harness, llm, 30)
    print(f"history bytes/iteration: 5 iterations {short:.0f}, 30 iterations {long:.0f}")
    assert long <= 1.5 * short, (short, long)


async def test_step_payloads_leave_out_fields_at_their_defaults(harness: Harness, llm):
    """Every LLM and tool step's input and result in a run's history is written without the
    fields at their defaults (`"seed":null`, `"cost":0.0`, ...): a fifth of their bytes, on
    every iteration. Each payload reads back as the model it was, defaults filled in."""
    model = llm.script(
        f"compact-{uuid.uuid4().hex[:6]}",
        [Reply("Step.", [call("calculator", expression="6*7")]), Reply("FINAL ANSWER: 42")],
    )
    handle = await harness.start(model, "Multiply", memory=False)
    await handle.result()
    kinds: dict[str, tuple[type[BaseModel], type[BaseModel]]] = {
        names.LLM_STEP: (LlmStepInput, LlmStepResult),
        names.RUN_TOOL: (RunToolInput, ToolResult),
    }
    scheduled: dict[int, str] = {}
    checked = []
    for event in (await handle.fetch_history()).events:
        model_type: type[BaseModel]
        if event.HasField("activity_task_scheduled_event_attributes"):
            scheduled_attrs = event.activity_task_scheduled_event_attributes
            scheduled[event.event_id] = scheduled_attrs.activity_type.name
            payload = scheduled_attrs.input.payloads[0].data
            model_type = kinds[scheduled_attrs.activity_type.name][0]
        elif event.HasField("activity_task_completed_event_attributes"):
            completed = event.activity_task_completed_event_attributes
            payload = completed.result.payloads[0].data
            model_type = kinds[scheduled[completed.scheduled_event_id]][1]
        else:
            continue
        written = json.loads(payload)
        read = model_type.model_validate_json(payload)
        assert written == read.model_dump(mode="json", exclude_defaults=True), written
        checked.append(model_type.__name__)
    assert sorted(set(checked)) == ["LlmStepInput", "LlmStepResult", "RunToolInput", "ToolResult"]
