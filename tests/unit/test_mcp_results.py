"""Tools with a raw JSON schema (MCP's `inputSchema`) and how MCP call results are rendered."""

from __future__ import annotations

import mcp_types
import pytest

from reactive_temporal.mcp_tools import McpToolError, render_call_result
from reactive_temporal.tools import Tool, ToolArgumentsError

SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer", "title": "A"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
    "title": "addArguments",
}


async def add(**arguments: object) -> str:
    return str(arguments)


RAW = Tool(name="srv/add", description="Add two integers.", function=add, json_schema=SCHEMA)


def test_a_raw_schema_is_shown_as_is():
    function = RAW.schema()["function"]
    assert function == {"name": "srv/add", "description": "Add two integers.", "parameters": SCHEMA}
    function["parameters"]["properties"].clear()
    assert SCHEMA["properties"], "the tool's schema is not shared with whoever edits the entry"


def test_raw_schema_arguments_only_need_to_be_an_object_with_the_required_keys():
    assert RAW.parse_arguments('{"a": 1, "b": "two", "c": 3}') == {"a": 1, "b": "two", "c": 3}
    with pytest.raises(ToolArgumentsError, match="missing required arguments: b"):
        RAW.parse_arguments('{"a": 1}')
    with pytest.raises(ToolArgumentsError, match="JSON object"):
        RAW.parse_arguments("[1, 2]")
    with pytest.raises(ToolArgumentsError, match="not valid JSON"):
        RAW.parse_arguments("{oops")
    no_required = Tool(name="t", description="", function=add, json_schema={"type": "object"})
    assert no_required.parse_arguments("") == {}


def test_a_tool_needs_exactly_one_schema_source():
    with pytest.raises(ValueError, match="exactly one"):
        Tool(name="t", description="", function=add)


def text(value: str) -> mcp_types.TextContent:
    return mcp_types.TextContent(type="text", text=value)


def test_text_parts_are_joined_and_other_parts_named():
    result = mcp_types.CallToolResult(
        content=[
            text("first"),
            mcp_types.ImageContent(type="image", data="aGVsbG8=", mime_type="image/png"),
            mcp_types.ResourceLink(type="resource_link", name="readme", uri="file:///README.md"),
            mcp_types.EmbeddedResource(
                type="resource",
                resource=mcp_types.TextResourceContents(uri="file:///a.txt", text="embedded"),
            ),
            text("last"),
        ]
    )
    assert render_call_result(result) == (
        "first\n[image image/png, 8 base64 characters]\n"
        "[resource readme: file:///README.md]\nembedded\nlast"
    )


def test_structured_content_stands_in_for_missing_text():
    result = mcp_types.CallToolResult(content=[], structured_content={"result": 3})
    assert render_call_result(result) == '{"result": 3}'


def test_an_error_result_raises_with_the_servers_text():
    with pytest.raises(McpToolError, match="rate limited"):
        render_call_result(mcp_types.CallToolResult(content=[text("rate limited")], is_error=True))
    with pytest.raises(McpToolError, match="without details"):
        render_call_result(mcp_types.CallToolResult(content=[], is_error=True))
