"""Tool schemas as Google Gemini takes them, over real HTTP: its OpenAI-compatible endpoint (and
Vertex AI's) reads a tool's parameters as a subset of OpenAPI 3.0's schema and refuses the rest
with a 400. Pydantic's nested models (`$defs`, `$ref`), one-value Literals (`const`) and
`additionalProperties`, and the `$schema` every zod-written MCP server sends, failed a run with
tools at its first step (`LlmRequestRejected`)."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field
from temporalio.client import Client

from reactive_temporal.config import Settings
from reactive_temporal.embedded.scripted_llm import Endpoint, Reply, ScriptedLLM, call
from reactive_temporal.telemetry.metrics import REGISTRY
from reactive_temporal.tools import Tool, tool
from tests.workflow.conftest import running_worker

pytestmark = [pytest.mark.faults, pytest.mark.workflow]


class Address(BaseModel):
    """Where a parcel goes."""

    model_config = ConfigDict(extra="forbid")
    street: str
    city: str
    country: Literal["FR"] = "FR"


class Parcel(BaseModel):
    """A parcel to ship."""

    model_config = ConfigDict(extra="forbid")
    to: Address
    weight_kg: float = Field(gt=0, description="Its weight")
    note: str | None = None
    returns_to: Address | None = None


shipped: list[Parcel] = []


@tool
async def ship(parcel: Parcel, speed: Literal["standard", "express"] = "standard") -> str:
    """Ship a parcel."""
    shipped.append(parcel)
    return f"shipped {parcel.weight_kg} kg to {parcel.to.city} ({speed})"


searched: list[dict[str, Any]] = []
ZOD_SCHEMA = {  # what an MCP server written with zod (zod-to-json-schema) lists
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "description": "What to look for"},
        "limit": {"type": "integer", "exclusiveMinimum": 0, "default": 10},
        "mode": {"type": "string", "const": "fast"},
        "tags": {"type": "array", "items": {"type": ["string", "null"]}},
        "filters": {
            "type": "object",
            "properties": {"since": {"type": "string", "format": "date"}},
            "additionalProperties": False,
        },
    },
    "required": ["query"],
    "additionalProperties": False,
    "$schema": "http://json-schema.org/draft-07/schema#",
}


async def _search(**arguments: Any) -> str:
    searched.append(arguments)
    return "3 results"


search = Tool(name="search", description="Search.", function=_search, json_schema=ZOD_SCHEMA)

PARCEL = {
    "to": {"street": "1 rue de Rivoli", "city": "Paris", "country": "FR"},
    "weight_kg": 2.5,
    "note": None,
}


def adaptations(model: str, kind: str) -> float:
    value = REGISTRY.get_sample_value(
        "reactive_temporal_llm_adaptations_total", {"model": model, "kind": kind}
    )
    return value or 0.0


def declared(request: dict[str, Any]) -> dict[str, Any]:
    """The request's tools' parameters, by name."""
    return {t["function"]["name"]: t["function"]["parameters"] for t in request["tools"]}


@pytest.mark.parametrize("known", [True, False], ids=["gemini-by-name", "learned"])
async def test_a_run_with_nested_model_and_mcp_tools_completes_on_gemini(
    known: bool, client: Client, settings: Settings, llm: ScriptedLLM, model_name: str
):
    """A `gemini-…` model gets its tools' schemas in Gemini's subset from the first request;
    the same endpoint under another name (a gateway's, a deployment's) once its first 400 said
    so, every later call in that shape. The model still calls both tools with arguments they
    validate."""
    name = f"gemini-2.5-flash-{model_name}" if known else f"house-model-{model_name}"
    model = llm.endpoint(name, Endpoint(schema_subset=True))
    llm.script(
        model,
        [
            Reply(None, [call("ship", parcel=PARCEL, speed="express")]),
            Reply(None, [call("search", query="parcels", limit=3, mode="fast")]),
            Reply("FINAL ANSWER: shipped"),
        ],
    )
    shipped.clear()
    searched.clear()
    async with running_worker(client, settings, extra_tools=[ship, search]) as harness:
        result = await asyncio.wait_for(
            harness.run(model, "Ship it.", agent_id=f"gs-{model_name[:8]}", memory=False,
                        tools=["ship", "search"]),
            60,
        )  # fmt: skip
    assert (result.terminated_by, result.output) == ("final_answer", "shipped"), result
    assert shipped == [Parcel.model_validate(PARCEL)]
    assert searched == [{"query": "parcels", "limit": 3, "mode": "fast"}]
    assert len(llm.rejected[model]) == (0 if known else 1)
    assert adaptations(model, "shape_learned") == (0 if known else 1)
    served = [r for r in llm.requests[model] if "tools" in r][-1]
    text = json.dumps(served["tools"])
    for keyword in ("$ref", "$defs", "additionalProperties", "const", "$schema"):
        assert keyword not in text
    parameters = declared(served)
    to = parameters["ship"]["properties"]["parcel"]["properties"]["to"]
    assert to["properties"]["country"]["enum"] == ["FR"]
    assert parameters["search"]["properties"]["mode"]["enum"] == ["fast"]


pinged: list[str] = []


async def _ping(**arguments: Any) -> str:
    pinged.append(json.dumps(arguments))
    return "pong"


# as an MCP server lists a tool of no arguments
ping = Tool(
    name="ping",
    description="Ping the depot.",
    function=_ping,
    json_schema={"type": "object", "properties": {}},
)


@pytest.mark.parametrize("known", [True, False], ids=["gemini-by-name", "learned"])
async def test_a_tool_of_no_arguments_is_declared_without_parameters_on_gemini(
    known: bool, client: Client, settings: Settings, llm: ScriptedLLM, model_name: str
):
    """Gemini refuses an object schema with no properties ("…parameters.properties: should be
    non-empty for OBJECT type"), which a tool of no arguments is as MCP servers and pydantic
    write it: every run given one failed at its first step, by name or learned from that 400.
    It goes without `parameters`, and the model calls it with none."""
    name = f"gemini-2.5-flash-np-{model_name}" if known else f"house-np-{model_name}"
    model = llm.endpoint(name, Endpoint(schema_subset=True))
    llm.script(model, [Reply(None, [call("ping")]), Reply("FINAL ANSWER: pong")])
    pinged.clear()
    async with running_worker(client, settings, extra_tools=[ping]) as harness:
        result = await asyncio.wait_for(
            harness.run(model, "Ping it.", agent_id=f"np-{model_name[:8]}", memory=False,
                        tools=["ping"]),
            60,
        )  # fmt: skip
    assert (result.terminated_by, result.output) == ("final_answer", "pong"), result
    assert pinged == ["{}"]
    refused = llm.rejected[model]
    assert len(refused) == (0 if known else 1)
    if not known:
        assert "should be non-empty for OBJECT type" in refused[0][0]["error"]["message"]
    served = [r for r in llm.requests[model] if "tools" in r][-1]
    assert served["tools"][0]["function"] == {"name": "ping", "description": "Ping the depot."}
