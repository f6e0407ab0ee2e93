"""Tool schemas rewritten into the subset Google Gemini takes (`reactive_temporal.schema_subset`):
what pydantic and zod write, kept in meaning; anything an MCP server may send, within bounds and
without raising."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

from activities.llm_calls import LlmEndpoint
from activities.llm_request import chat_request
from reactive_temporal.builtin_tools import builtin_tools
from reactive_temporal.embedded.schema_rules import schema_refused
from reactive_temporal.schema_subset import (
    MAX_DEPTH,
    MAX_NODES,
    MAX_OPTIONS,
    REF_EXPANSIONS,
    SubsetSchemas,
    to_subset,
)
from reactive_temporal.tool_registry import ToolRegistry
from reactive_temporal.tools import tool

SUBSET = {
    "type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems",
    "properties", "required", "minProperties", "maxProperties", "minLength", "maxLength",
    "pattern", "example", "anyOf", "propertyOrdering", "default", "items", "minimum", "maximum",
}  # fmt: skip
"""The Gemini API's `Schema` fields (v1beta), as Google documents them."""
TYPES = {"string", "number", "integer", "boolean", "array", "object"}
BUILTIN_TOOLS = builtin_tools(Path("/nonexistent-workspace"))


def nodes(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """Every node of a converted schema."""
    found = [schema]
    for sub in schema.get("properties", {}).values():
        found += nodes(sub)
    if "items" in schema:
        found += nodes(schema["items"])
    for sub in schema.get("anyOf", []):
        found += nodes(sub)
    return found


def assert_in_subset(schema: dict[str, Any]) -> None:
    """What Gemini and Vertex AI check, each refusal a user met; parameters of no properties
    are not sent (`SubsetSchemas`, below)."""
    sent = {"parameters": schema} if schema.get("properties") else {}
    assert schema_refused([{"function": sent}]) is None
    assert schema["type"] == "object" and "nullable" not in schema
    for node in nodes(schema):
        assert node.keys() <= SUBSET, node
        if "anyOf" in node:  # Vertex: "When using any_of, it must be the only field set."
            assert list(node) == ["anyOf"] and len(node["anyOf"]) >= 2, node
            continue
        assert node.get("type") in TYPES, node  # Vertex: "didn't specify the schema type field"
        if "enum" in node:  # "function declaration enum only allowed for STRING type"
            assert node["type"] == "string" and all(isinstance(v, str) for v in node["enum"])
        if node["type"] != "object":  # "properties: only allowed for OBJECT type"
            assert not node.keys() & {"properties", "required", "propertyOrdering"}, node
        assert set(node.get("required", [])) <= set(node.get("properties", {}))
        assert (node["type"] == "array") == ("items" in node), node  # "items: missing field"
        if node["type"] == "string" and "format" in node:
            assert node["format"] in ("date-time", "enum")
    json.dumps(schema, allow_nan=False)


# -- what pydantic writes ----------------------------------------------------------------------


class Address(BaseModel):
    """Where a parcel goes."""

    model_config = ConfigDict(extra="forbid")
    city: str
    country: Literal["FR"] = "FR"


class Parcel(BaseModel):
    to: Address = Field(description="The addressee")
    weight_kg: float = Field(gt=0, le=30)
    pieces: int = Field(default=1, gt=0, lt=10)
    note: str | None = None
    back_to: Address | None = None
    size: Literal[1, 2, 3] = 1
    labels: list[str] = []


def test_a_nested_pydantic_model_is_inlined_keeping_what_it_says() -> None:
    @tool
    async def ship(parcel: Parcel, speed: Literal["standard", "express"] = "standard") -> str:
        """Ship a parcel."""
        return "ok"

    converted = to_subset(ship.schema()["function"]["parameters"])
    assert_in_subset(converted)
    address = {
        "type": "object",
        "description": "Where a parcel goes.",
        "properties": {
            "city": {"type": "string"},
            "country": {"type": "string", "enum": ["FR"], "default": "FR"},
        },
        "required": ["city"],
    }
    assert converted == {
        "type": "object",
        "properties": {
            "parcel": {
                "type": "object",
                "properties": {
                    "to": {**address, "description": "The addressee"},
                    "weight_kg": {
                        "type": "number",
                        "description": "Greater than 0",
                        "minimum": 0,
                        "maximum": 30,
                    },
                    "pieces": {"type": "integer", "minimum": 1, "maximum": 9, "default": 1},
                    "note": {"type": "string", "nullable": True},
                    "back_to": {**address, "nullable": True},
                    "size": {"type": "integer", "description": "One of: 1, 2, 3", "default": 1},
                    "labels": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["to", "weight_kg"],
            },
            "speed": {"type": "string", "enum": ["standard", "express"], "default": "standard"},
        },
        "required": ["parcel"],
    }


def test_what_the_model_sends_for_the_converted_schema_validates() -> None:
    """The meaning kept: arguments written to the converted schema are the model's."""
    arguments = {"to": {"city": "Paris", "country": "FR"}, "weight_kg": 2.5, "size": 2}
    assert Parcel.model_validate(arguments).to.city == "Paris"


def test_a_recursive_model_is_inlined_to_a_bound_then_a_plain_object() -> None:
    class Node(BaseModel):
        """A node of a tree."""

        name: str
        children: list[Node] = []

    converted = to_subset(Node.model_json_schema())
    assert_in_subset(converted)
    depth, node = 0, converted
    while "properties" in node:
        node = node["properties"]["children"]["items"]
        depth += 1
    assert depth == REF_EXPANSIONS  # the root is a `$ref` to the model too
    assert node == {"type": "object", "description": "A node of a tree."}


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"$ref": "#"}}},
        {"$ref": "#/$defs/A", "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}},
        {"$ref": "#/definitions/A", "definitions": {"A": {"allOf": [{"$ref": "#/definitions/A"}]}}},
        {"type": "object", "properties": {"a": {"$ref": "#/properties/a"}}},
        {"type": "object", "properties": {"a": {"$ref": "https://example.com/x.json"}}},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}},
    ],
    ids=["root", "a-to-b-to-a", "all-of-itself", "pointer-to-itself", "remote", "missing"],
)
def test_refs_that_go_round_or_nowhere_end(schema: dict[str, Any]) -> None:
    assert_in_subset(to_subset(schema))


def test_a_type_list_and_a_null_option_are_nullable() -> None:
    converted = to_subset(
        {
            "type": "object",
            "properties": {
                "a": {"type": ["string", "null"], "maxLength": 5},
                "b": {"type": ["integer", "string"], "minimum": 1, "minLength": 2},
                "c": {"anyOf": [{"type": "integer"}, {"type": "null"}], "description": "C"},
                "d": {"oneOf": [{"type": "integer"}, {"type": "boolean"}, {"type": "null"}]},
                "e": {"enum": ["x", None]},
            },
        }
    )
    assert_in_subset(converted)
    assert converted["properties"] == {
        "a": {"type": "string", "maxLength": 5, "nullable": True},
        "b": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "minLength": 2}]},
        "c": {"type": "integer", "description": "C", "nullable": True},
        "d": {
            "anyOf": [{"type": "integer", "nullable": True}, {"type": "boolean", "nullable": True}]
        },
        "e": {"type": "string", "enum": ["x"], "nullable": True},
    }


def test_keywords_beside_a_union_go_into_each_option() -> None:
    """An object that requires one of two properties: each option the whole object."""
    converted = to_subset(
        {
            "type": "object",
            "properties": {
                "by": {
                    "type": "object",
                    "description": "Who",
                    "properties": {"id": {"type": "string"}, "email": {"type": "string"}},
                    "anyOf": [{"required": ["id"]}, {"required": ["email"]}],
                }
            },
        }
    )
    assert_in_subset(converted)
    who = {
        "type": "object",
        "description": "Who",
        "properties": {"id": {"type": "string"}, "email": {"type": "string"}},
    }
    assert converted["properties"]["by"] == {
        "anyOf": [{**who, "required": ["id"]}, {**who, "required": ["email"]}]
    }


# -- what MCP servers send ---------------------------------------------------------------------

ZOD = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "owner": {"type": "string", "description": "Repository owner"},
        "state": {"type": "string", "enum": ["open", "closed", "all"]},
        "kind": {
            "anyOf": [{"type": "string", "const": "issue"}, {"type": "string", "const": "pr"}]
        },
        "since": {"type": "string", "format": "date-time"},
        "url": {"type": "string", "format": "uri"},
        "page": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 1},
        "labels": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 1,
            "uniqueItems": True,
        },
        "headers": {"type": "object", "additionalProperties": {"type": "string"}},
        "extra": {"type": "object", "properties": {}, "additionalProperties": False},
        "point": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}]},
        "anything": {},
        "never": False,
    },
    "required": ["owner", "never", "gone"],
    "additionalProperties": False,
}


def test_a_zod_written_mcp_schema() -> None:
    converted = to_subset(ZOD)
    assert_in_subset(converted)
    assert converted == {
        "type": "object",
        "properties": {
            "owner": {"type": "string", "description": "Repository owner"},
            "state": {"type": "string", "enum": ["open", "closed", "all"]},
            "kind": {"type": "string", "enum": ["issue", "pr"]},
            "since": {"type": "string", "format": "date-time"},
            "url": {"type": "string", "description": "Format: uri"},
            "page": {"type": "number", "description": "Greater than 0; a multiple of 1",
                     "minimum": 0},
            "labels": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "headers": {"type": "object", "description": "Any keys, each value string"},
            "extra": {"type": "object"},
            "point": {"type": "array", "items": {"type": "number"}},
            "anything": {"type": "string"},
        },
        "required": ["owner"],
    }  # fmt: skip


def test_a_union_of_objects_at_the_root_is_one_object() -> None:
    """A discriminated union as an MCP tool's whole input: Gemini wants an object."""
    converted = to_subset(
        {
            "anyOf": [
                {"type": "object", "properties": {"op": {"const": "add"}, "x": {"type": "integer"}},
                 "required": ["op", "x"]},
                {"type": "object", "properties": {"op": {"const": "clear"}}, "required": ["op"]},
            ]
        }
    )  # fmt: skip
    assert_in_subset(converted)
    assert converted["required"] == ["op"]
    assert set(converted["properties"]) == {"op", "x"}


def test_the_built_in_tools_keep_their_schemas_but_additional_properties() -> None:
    for entry in ToolRegistry(BUILTIN_TOOLS).schemas([t.name for t in BUILTIN_TOOLS]):
        parameters = entry["function"]["parameters"]
        converted = to_subset(parameters)
        assert_in_subset(converted)
        assert converted["properties"].keys() == parameters["properties"].keys()
        assert converted.get("required") == parameters.get("required")


# -- hostile input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [
        None,
        42,
        "object",
        [],
        True,
        {"type": 7},
        {"type": ["null"]},
        {"properties": []},
        {"properties": {"a": 1, "b": None, "c": [], 3: {}}},
        {"required": "a"},
        {
            "type": "object",
            "properties": {
                "a": {
                    "type": "integer",
                    "minimum": float("nan"),
                    "maximum": float("inf"),
                    "exclusiveMinimum": 1e308,
                }
            },
        },
        {"type": "object", "properties": {"a": {"enum": [{"x": 1}, [1], None, 1.5, True, "s"]}}},
        {"type": "object", "properties": {"a": {"allOf": [1, None, {"type": "string"}]}}},
        {
            "type": "object",
            "properties": {"a": {"anyOf": []}, "b": {"oneOf": [None, {"type": "null"}]}},
        },
        {"type": "object", "properties": {"a": {"$ref": 5}, "b": {"$ref": "#/" + "x/" * 500}}},
        {
            "type": "object",
            "properties": {"a": {"type": "array", "items": [1, {"type": "string"}]}},
        },
        {
            "type": "object",
            "properties": {
                "a": {
                    "format": 3,
                    "pattern": 4,
                    "minLength": -1,
                    "maxLength": True,
                    "description": 5,
                }
            },
        },
    ],
)
def test_anything_at_all_is_an_object_schema(schema: object) -> None:
    assert_in_subset(to_subset(schema))


def deep(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def test_deep_nesting_is_cut_at_the_bound() -> None:
    converted = to_subset(deep(5_000))
    assert_in_subset(converted)
    assert MAX_DEPTH <= len(nodes(converted)) <= MAX_DEPTH + 3


def test_refs_that_multiply_are_bounded() -> None:
    """Each definition uses the next ten times: 10**12 nodes, inlined in full."""
    defs: dict[str, Any] = {
        f"D{i}": {
            "type": "object",
            "properties": {f"p{j}": {"$ref": f"#/$defs/D{i + 1}"} for j in range(10)},
        }
        for i in range(12)
    }
    defs["D12"] = {"type": "string"}
    started = time.perf_counter()
    converted = to_subset({"$ref": "#/$defs/D0", "$defs": defs})
    assert time.perf_counter() - started < 60  # a hang guard, not a timing: unbounded, never
    assert_in_subset(converted)
    assert len(nodes(converted)) <= MAX_NODES


def test_huge_lists_and_maps_are_bounded() -> None:
    properties: dict[str, Any] = {
        "e": {"enum": [str(i) for i in range(100_000)]},
        "u": {"anyOf": [{"const": i} for i in range(100_000)]},
    }
    properties |= {f"p{i}": {"type": "string"} for i in range(100_000)}
    schema = {"type": "object", "properties": properties, "required": list(properties)}
    started = time.perf_counter()
    converted = to_subset(schema)
    assert time.perf_counter() - started < 60  # a hang guard, not a timing (the bound: below)
    assert_in_subset(converted)
    assert len(nodes(converted)) <= MAX_NODES
    assert converted["properties"]["e"] == {"type": "string"}  # too long to be an enum
    assert len(converted["properties"]["u"]["anyOf"]) == MAX_OPTIONS


def test_a_schema_that_holds_itself_is_not_followed_forever() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    schema["properties"]["me"] = schema
    assert_in_subset(to_subset(schema))
    assert_in_subset(SubsetSchemas().parameters("me", schema))
    assert_in_subset(SubsetSchemas().parameters("deep", deep(5_000)))


KEYS = st.sampled_from(
    ["type", "properties", "items", "anyOf", "oneOf", "allOf", "$ref", "$defs", "const", "enum",
     "required", "nullable", "format", "minimum", "exclusiveMinimum", "additionalProperties",
     "prefixItems", "description", "default", "title", "a", "b"]
)  # fmt: skip
VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8),
    st.sampled_from(["object", "string", "integer", "array", "null", "#", "#/$defs/a",
                     "#/properties/a", "date-time"]),
)  # fmt: skip
SCHEMAS = st.recursive(
    VALUES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=6),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SCHEMAS)
def test_any_json_becomes_a_schema_gemini_takes(schema: object) -> None:
    converted = to_subset(schema)
    assert_in_subset(converted)
    assert to_subset(converted) == converted  # in the subset already: left as it is


# -- per worker --------------------------------------------------------------------------------


def test_a_tool_s_schema_is_converted_once_per_worker() -> None:
    """Every step sends the same tools: each converted once, whatever its identity."""
    llm = LlmEndpoint(client=None)  # type: ignore[arg-type]  # adapt sends nothing
    tools = ToolRegistry(BUILTIN_TOOLS).schemas([t.name for t in BUILTIN_TOOLS])
    request = chat_request("gemini-2.5-flash", [{"role": "user", "content": "hi"}], tools=tools)
    first = llm.adapt(request)["tools"]
    again = llm.adapt({**request, "tools": json.loads(json.dumps(tools))})["tools"]
    assert [t["function"]["parameters"] for t in first] == [
        to_subset(t["function"]["parameters"]) for t in tools
    ]
    assert all(a["function"]["parameters"] is b["function"]["parameters"]
               for a, b in zip(first, again, strict=True))  # fmt: skip
    assert tools[0]["function"]["parameters"]["additionalProperties"] is False  # not changed
    other = llm.adapt({**request, "model": "gpt-4o"})["tools"]
    assert other == tools


def test_the_cache_keeps_the_latest_only() -> None:
    cache = SubsetSchemas(size=2)
    a, b, c = ({"type": "object", "properties": {n: {"type": "string"}}} for n in "abc")
    first = cache.parameters("a", a)
    cache.parameters("b", b)
    assert cache.parameters("a", json.loads(json.dumps(a))) is first  # used: kept
    cache.parameters("c", c)
    assert cache.parameters("a", a) is first
    assert cache.parameters("b", b) is not None


def test_a_tool_whose_schema_changed_is_converted_again() -> None:
    """An MCP server reconnected with a new version of its tool: same name, new schema."""
    cache = SubsetSchemas()
    old = cache.parameters("search", {"type": "object", "properties": {"q": {"type": "string"}}})
    new = cache.parameters("search", {"type": "object", "properties": {"n": {"const": 1}}})
    assert old["properties"].keys() == {"q"} and new["properties"].keys() == {"n"}


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {}, "additionalProperties": False},  # pydantic, no args
        {"type": "object"},  # an MCP server's tool of no arguments
        {"type": "object", "properties": {"a": False}},  # none it may take
        None,
    ],
)
def test_a_tool_without_parameters_is_sent_without_them(schema: object) -> None:
    """Gemini refuses an object schema with no properties, whichever way it is written ("…
    parameters.properties: should be non-empty for OBJECT type"): every run with a tool of no
    arguments failed at its first step. A declaration without `parameters` is one of none."""
    function: dict[str, Any] = {"name": "ping", "description": "Ping.", "parameters": schema}
    raw = [{"type": "function", "function": function}]
    if schema in ({"type": "object"}, {"type": "object", "properties": {}}):
        assert schema_refused(raw) is not None  # as written: refused
    [sent] = SubsetSchemas().tools(raw)
    assert sent == {"type": "function", "function": {"name": "ping", "description": "Ping."}}
    assert schema_refused([sent]) is None


def test_a_tool_of_no_arguments_among_others_goes_without_parameters() -> None:
    @tool
    async def ping() -> str:
        """Ping."""
        return "pong"

    tools = ToolRegistry([ping, *BUILTIN_TOOLS]).schemas(["ping", "calculator"])
    assert tools[0]["function"]["parameters"]["properties"] == {}  # as pydantic writes it
    sent = SubsetSchemas().tools(tools)
    assert "parameters" not in sent[0]["function"]
    assert sent[1]["function"]["parameters"]["properties"].keys() == {"expression"}
    assert schema_refused(sent) is None
