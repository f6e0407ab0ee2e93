"""Internal payloads (activities' inputs and results, the debrief child's input) are written
without their fields at defaults; the run's input and result, and anything public, whole."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import typing

from pydantic import BaseModel

import activities
from reactive_temporal.codec import project_data_converter
from reactive_temporal.contracts.debrief import DebriefWorkflowInput
from reactive_temporal.contracts.entity import SessionHistory
from reactive_temporal.contracts.internal import InternalPayload
from reactive_temporal.contracts.llm_payloads import LlmStepInput, LlmStepResult
from reactive_temporal.contracts.result import AgentResult
from reactive_temporal.contracts.run import AgentConfig, AgentRunInput, ToolCall, Usage

PUBLIC = {SessionHistory}
"""Returned by an activity and also by chat's `history` query, so read by other clients."""


def activity_payload_types() -> set[type]:
    """Every pydantic model an activity of the project takes or returns."""
    found: set[type] = set()
    for module_info in pkgutil.iter_modules(activities.__path__):
        module = importlib.import_module(f"activities.{module_info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            for _, fn in inspect.getmembers(cls, inspect.isfunction):
                if hasattr(fn, "__temporal_activity_definition"):
                    hints = typing.get_type_hints(fn)
                    found |= {t for t in hints.values() if isinstance(t, type)}
    return {t for t in found if issubclass(t, BaseModel)}


def test_every_activity_input_and_result_is_internal():
    types = activity_payload_types()
    assert len(types) >= 20, sorted(t.__name__ for t in types)
    public = sorted(t.__name__ for t in types - PUBLIC if not issubclass(t, InternalPayload))
    assert public == [], "add InternalPayload to these activities' models (or to PUBLIC)"
    assert issubclass(DebriefWorkflowInput, InternalPayload)


async def test_an_internal_payload_leaves_out_its_defaults_and_reads_back_whole():
    reply = LlmStepResult(
        content="Step.",
        tool_calls=[ToolCall(id="c1", name="calculator", arguments='{"expression": "6*7"}')],
        finish_reason="tool_calls",
        usage=Usage(prompt_tokens=12, completion_tokens=3),
    )
    [payload] = await project_data_converter.encode([reply])
    assert json.loads(payload.data) == {
        "content": "Step.",
        "tool_calls": [{"id": "c1", "name": "calculator", "arguments": '{"expression": "6*7"}'}],
        "finish_reason": "tool_calls",
        "usage": {"prompt_tokens": 12, "completion_tokens": 3},
    }
    assert await project_data_converter.decode([payload], [LlmStepResult]) == [reply]
    step = LlmStepInput(run_id="run-a", seq=4, iteration=1, model="m", tool_names=[])
    [payload] = await project_data_converter.encode([step])
    assert json.loads(payload.data) == {
        "run_id": "run-a",
        "seq": 4,
        "iteration": 1,
        "model": "m",
        "tool_names": [],  # required: written even when empty
    }


async def test_a_surrogate_in_an_internal_payload_is_cleaned_not_fatal():
    [payload] = await project_data_converter.encode([LlmStepResult(content="a\ud800b")])
    [read] = await project_data_converter.decode([payload], [LlmStepResult])
    assert read.content == "a\ufffdb" and json.loads(payload.data) == {"content": "a\ufffdb"}


async def test_public_payloads_keep_every_field():
    run_input = AgentRunInput(task="t", agent=AgentConfig(agent_id="a", model="m"))
    [payload] = await project_data_converter.encode([run_input])
    written = json.loads(payload.data)
    assert written["agent"]["system_prompt"] is None and written["agent"]["memory"] is True
    assert written["continuation"] is None
    fields = set(AgentResult.model_fields)
    result = AgentResult(
        output="x", success=True, run_id="r", agent_id="a", terminated_by="end_turn"
    )
    [payload] = await project_data_converter.encode([result])
    assert set(json.loads(payload.data)) == fields
