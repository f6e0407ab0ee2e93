"""The @tool decorator, the built-in tools, and the registry."""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
import threading
import types
from collections.abc import Callable
from typing import Annotated, Any
from unittest.mock import ANY

import pytest
from pydantic import Field

from reactive_temporal.builtin_tools import (
    builtin_tools,
    calculator,
    current_time,
    evaluate_arithmetic,
    file_tools,
    http_get,
    http_get_tool,
)
from reactive_temporal.tool_registry import FINAL_ANSWER_SCHEMA, ToolRegistry
from reactive_temporal.tools import TOOL_THREADS, Tool, ToolArgumentsError, tool


@tool
async def lookup_order(
    order_id: Annotated[str, Field(description="Order id like A-123")], verbose: bool = False
) -> dict:
    """Look up an order by id."""
    return {"id": order_id, "verbose": verbose}


def test_schema_comes_from_the_signature():
    schema = lookup_order.schema()["function"]
    assert schema["name"] == "lookup_order"
    assert schema["description"] == "Look up an order by id."
    params = schema["parameters"]
    assert params["required"] == ["order_id"]
    assert params["properties"]["order_id"] == {
        "type": "string",
        "description": "Order id like A-123",
    }
    assert params["properties"]["verbose"]["default"] is False


def test_arguments_are_validated_and_errors_name_the_field():
    assert lookup_order.parse_arguments('{"order_id": "A-1"}') == {
        "order_id": "A-1",
        "verbose": False,
    }
    with pytest.raises(ToolArgumentsError, match="order_id"):
        lookup_order.parse_arguments("{}")
    with pytest.raises(ToolArgumentsError, match="verbose"):
        lookup_order.parse_arguments('{"order_id": "A", "verbose": "perhaps"}')
    with pytest.raises(ToolArgumentsError, match="Extra inputs"):
        lookup_order.parse_arguments('{"order_id": "A", "sneaky": 1}')
    with pytest.raises(ToolArgumentsError, match="not valid JSON"):
        lookup_order.parse_arguments("{oops")


def test_decorator_refuses_what_a_model_cannot_call():
    with pytest.raises(TypeError, match="yields"):

        @tool
        def generator(x: int):  # type: ignore[no-untyped-def]
            yield x

    with pytest.raises(TypeError, match="type hint"):

        @tool
        async def untyped(x):  # type: ignore[no-untyped-def]
            return x

    with pytest.raises(ValueError, match="reserved"):

        @tool(name="final-answer")
        async def sneaky(x: int) -> int:
            return x


def test_decorator_refuses_parameters_a_model_could_never_pass():
    """Each was accepted, and every call failed (positional-only: "passed as keyword"; `_x`
    and `model_config`: left out of the schema, then missing), or every run on the worker
    failed at its first step after 8 minutes of retries (no JSON schema for a Callable)."""
    with pytest.raises(TypeError, match="'x' is positional-only"):

        @tool
        async def positional(x: int, /) -> int:
            return x

    with pytest.raises(TypeError, match="'_x' has a name"):

        @tool
        async def private(_x: int) -> int:
            return _x

    with pytest.raises(TypeError, match="'model_config' has a name"):

        @tool
        async def clash(model_config: int) -> int:
            return model_config

    with pytest.raises(TypeError, match="'callback' cannot be described to a model"):

        @tool
        async def callback(cb: Callable[[], int]) -> int:
            return cb()

    with pytest.raises(TypeError, match="tool 'plain': its parameters' types"):

        @tool
        async def plain(thing: Plain) -> str:
            return str(thing)

    with pytest.raises(TypeError, match="tool 'unknown': its type hints cannot be read"):

        @tool
        async def unknown(thing: NoSuchType) -> str:  # type: ignore[name-defined]  # noqa: F821
            return str(thing)


class Plain:
    """A class pydantic has no schema for."""


@pytest.mark.parametrize(
    ("expression", "value"),
    [("(17 * 23) + 4", 395), ("2^10", 1024), ("sqrt(16) + abs(-2)", 6.0), ("7 // 2 + 7 % 2", 4)],
)
def test_calculator_arithmetic(expression, value):
    assert evaluate_arithmetic(expression) == value


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os').system('id')", "unsupported"),
        ("(1).__class__", "unsupported"),
        ("open('x')", "unsupported"),
        ("9 ** 999999", "too large"),
        ("(9**9999)**3000", "would have about 9,541 digits"),
        ("9**9999", "results are limited to 4,000 digits"),
        ("(10**300)**20", "a 301-digit number ** 20"),
        ("(2**6000)*(2**6000)*(2**6000)", "more than 4000 digits"),
        ("9**9**9", "too large"),
        ("round(5, -1000000000)", "round's digits must be an integer"),
        ("10**4000 * 1.0", "too large for a floating-point number"),
        ("exp(1000)", "too large for a floating-point number"),
        ("(-8) ** 0.5", "not a real number"),
        ("min()", "min(): "),
        ("sqrt(-1)", "sqrt(): math domain error"),
        ("2 << 100000", "unsupported"),
        ("'ab' * 10**9", "unsupported"),
        ("1/0", "division by zero"),
        ("2 +", "not an arithmetic expression"),
        ("1" * 600, "longer than"),
    ],
)
def test_calculator_refuses_anything_but_arithmetic(expression, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        evaluate_arithmetic(expression)


async def test_plain_functions_are_tools_that_run_in_a_thread():
    import threading

    @tool
    def where(x: int) -> str:
        """Which thread ran me."""
        return f"{x} {threading.current_thread().name}"

    assert not where.is_async and lookup_order.is_async
    answer = await where(x=1)
    assert answer.startswith("1 tool") and threading.current_thread().name not in answer


async def test_calculator_tool_prints_integers_plainly():
    assert await calculator(expression="10 / 4") == "2.5"
    assert await calculator(expression="10 / 2") == "5"


async def test_current_time_refuses_unknown_zones():
    assert (await current_time(timezone="Europe/Paris"))[:4].isdigit()
    with pytest.raises(ValueError, match="unknown time zone"):
        await current_time(timezone="Mars/Olympus")


async def test_http_get_refuses_other_schemes():
    with pytest.raises(ValueError, match="only http"):
        await http_get(url="file:///etc/passwd")


async def test_http_get_limits_the_body():
    from reactive_temporal.embedded.scripted_llm import ScriptedLLM
    from reactive_temporal.http_guard import AllowList

    with ScriptedLLM() as server:  # a local server that answers GET /v1 with a 404 error body
        allowed = http_get_tool(AllowList.parse(server.base_url.split("/")[2]))
        text = await allowed(url=server.base_url, max_bytes=10)
    status, body = text.split("\n", 1)
    assert status == "HTTP 404 (truncated)" and len(body) == 10


async def test_file_tools_stay_inside_the_workspace(tmp_path):
    file_read, file_write = file_tools(tmp_path)
    assert await file_write(path="notes/a.txt", content="hello") == "wrote 5 bytes to notes/a.txt"
    assert await file_read(path="notes/a.txt") == "hello"
    for escape in ["../outside.txt", "/etc/passwd", "notes/../../x", "a\x00b"]:
        with pytest.raises(ValueError):
            await file_write(path=escape, content="x")
    (tmp_path / "link").symlink_to("/etc")
    with pytest.raises(ValueError, match="outside the workspace"):
        await file_read(path="link/passwd")


def test_registry_serves_final_answer_schema_and_rejects_duplicates(tmp_path):
    registry = ToolRegistry(builtin_tools(tmp_path))
    assert registry.names == ["calculator", "http_get", "current_time", "file_read", "file_write"]
    schemas = registry.schemas(["calculator", "final-answer", "missing"])
    assert [s["function"]["name"] for s in schemas] == ["calculator", "final-answer"]
    assert schemas[1] is FINAL_ANSWER_SCHEMA
    with pytest.raises(ValueError, match="unique"):
        registry.add(file_tools(tmp_path)[0])


def test_registry_refuses_two_tools_the_model_would_see_under_one_name():
    """`shop/buy` (an MCP tool, approval needed) and a module's `shop__buy` went to the model
    as two `shop__buy` entries, and a call to it ran whichever was registered last."""

    async def buy(item: str) -> str:
        return item

    mcp_tool = Tool(name="shop/buy", description="Buy.", function=buy, json_schema={})
    registry = ToolRegistry([mcp_tool])
    with pytest.raises(ValueError) as refused:
        registry.add(Tool(name="shop__buy", description="Buy.", function=buy, json_schema={}))
    assert str(refused.value) == (
        "tools 'shop/buy' and 'shop__buy' would be offered to the model under one name, "
        "'shop__buy' (only A-Z, a-z, 0-9, '_' and '-', 64 at most); rename one"
    )
    long = "docs/" + "x" * 70
    registry.add(Tool(name=long + "a", description="A.", function=buy, json_schema={}))
    with pytest.raises(ValueError, match="under one name"):
        registry.add(Tool(name=long + "b", description="B.", function=buy, json_schema={}))
    assert registry.names == ["shop/buy", long + "a"]


def test_registry_builds_each_schema_once_and_hands_out_copies(tmp_path, monkeypatch):
    """Every LLM step asks for the tools' schemas; pydantic makes a JSON schema anew each
    time it is asked (0.6 ms a step for the built-in tools), so the registry keeps them."""
    registry = ToolRegistry(builtin_tools(tmp_path))
    built: list[str] = []
    original = Tool.schema

    def counting(self: Tool) -> dict[str, Any]:
        built.append(self.name)
        return original(self)

    monkeypatch.setattr(Tool, "schema", counting)
    first = registry.schemas(["calculator", "file_read"])
    first[0]["function"]["parameters"]["properties"].clear()  # a caller changing its copy
    again = registry.schemas(["calculator", "file_read"])
    assert built == ["calculator", "file_read"]
    assert again[0]["function"]["parameters"]["properties"] == {"expression": ANY}
    assert again == registry.schemas(["calculator", "file_read"])


def test_registry_loads_user_modules(tmp_path, monkeypatch):
    module = types.ModuleType("my_test_tools")
    module.lookup_order = lookup_order  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "my_test_tools", module)
    registry = ToolRegistry()
    assert registry.load_module("my_test_tools") == ["lookup_order"]
    with pytest.raises(ValueError, match="cannot import"):
        registry.load_module("no_such_module_anywhere")
    empty = types.ModuleType("empty_tools")
    monkeypatch.setitem(sys.modules, "empty_tools", empty)
    with pytest.raises(ValueError, match="no @tool"):
        registry.load_module("empty_tools")


async def test_a_hung_plain_tool_holds_only_its_own_threads():
    """A thread cannot be stopped: calls of a plain tool past their timeout keep theirs. With
    one pool for every tool, a tool that hangs used it up, and every other run's calculator
    and file tools timed out behind it."""
    release = threading.Event()

    @tool
    def hang() -> str:
        """Never return (until the test ends)."""
        release.wait(30)
        return "late"

    @tool
    def quick() -> str:
        """Return at once."""
        return "quick"

    try:
        for _ in range(TOOL_THREADS + 4):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(hang(), 0.01)
        assert await asyncio.wait_for(quick(), 5) == "quick"
    finally:
        release.set()
