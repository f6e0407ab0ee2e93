"""Tools: typed async Python functions the agent can call.

`@tool` reads a function's signature once and builds a pydantic model from it; that model
gives the JSON schema the model sees and validates the arguments the model sends back, so
a bad call becomes an observation naming the bad field, never a crashed run.

    @tool
    async def lookup_order(order_id: Annotated[str, Field(description="e.g. A-123")]) -> dict:
        \"\"\"Look up an order by id.\"\"\"

Tools run inside the worker, each call an activity. `worker.py --tools my_pkg.my_tools`
loads every `@tool` in a module.

A tool may be `async def` (it runs on the worker's event loop, so it must not block) or a
plain `def` (it runs in a thread of its own pool, so CPU-bound or blocking code never stalls
the event loop: heartbeats and every other run on the worker go on meanwhile). A thread
cannot be interrupted: when a plain tool outlives its timeout the run moves on with a
timeout observation, and the thread finishes in the background.

A tool runs at most once per call: its result is recorded before anything else can fail, and
a retried activity returns the recorded result. Only a worker lost between the tool's return
and that record runs it again; a tool with side effects can make that harmless with
`current_tool_call().idempotency_key` (the run id and the call's place in the transcript,
the same on every attempt):

    @tool
    async def send_invoice(order_id: str) -> str:
        \"\"\"Send the invoice for an order.\"\"\"
        key = current_tool_call().idempotency_key  # e.g. "run-billing-3f2a…:7"
        return await billing.send(order_id, idempotency_key=key)
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import functools
import inspect
import json
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from reactive_temporal.contracts.run import FINAL_ANSWER_TOOL

ToolFunction = Callable[..., Any]
"""An `async def` or a plain `def`; the latter runs in a thread (see `run_in_tool_thread`)."""

TOOL_THREADS = 32
"""Calls of one plain (synchronous) tool running at once per worker process; more wait their
turn (inside their timeout). Each tool has a pool of its own: a thread cannot be stopped, so
a call past its timeout keeps its thread, and a tool that hangs used up a shared pool (the
calculator and file tools of every other run timed out behind it). Pools of their own also
never starve the event loop's default executor, which DNS lookups use."""
_executors: dict[str, ThreadPoolExecutor] = {}


def _tool_executor(pool: str) -> ThreadPoolExecutor:
    executor = _executors.get(pool)
    if executor is None:
        executor = _executors[pool] = ThreadPoolExecutor(
            max_workers=TOOL_THREADS, thread_name_prefix=f"tool-{pool[:40]}"
        )
    return executor


async def run_in_tool_thread(function: Callable[..., Any], pool: str, /, **kwargs: Any) -> Any:
    """`function(**kwargs)` in the tool's own thread pool, with the caller's context.

    The context carries `activity.info()`, so heartbeats work inside the function.
    """
    context = contextvars.copy_context()
    call = functools.partial(context.run, function, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_tool_executor(pool), call)


class ToolArgumentsError(ValueError):
    """The model's arguments do not fit the tool's signature."""


@dataclass(frozen=True)
class ToolCallContext:
    """The call a tool is running for: which run, and where in its transcript."""

    run_id: str
    seq: int
    """The call's place in the run's transcript (where its observation goes)."""
    call_id: str
    """The model's id for the call."""

    @property
    def idempotency_key(self) -> str:
        """`<run id>:<seq>`: the same on every attempt of this call, unique across calls."""
        return f"{self.run_id}:{self.seq}"


_current_call: contextvars.ContextVar[ToolCallContext | None] = contextvars.ContextVar(
    "current_tool_call", default=None
)


def current_tool_call() -> ToolCallContext:
    """The call the running tool serves (a RuntimeError outside a tool call)."""
    call = _current_call.get()
    if call is None:
        raise RuntimeError("current_tool_call() is only available while a tool runs")
    return call


@contextlib.contextmanager
def tool_call_context(call: ToolCallContext) -> Iterator[None]:
    """Make `current_tool_call()` answer `call` inside the block (the run_tool activity)."""
    token = _current_call.set(call)
    try:
        yield
    finally:
        _current_call.reset(token)


@dataclass(frozen=True)
class Tool:
    """A function the agent can call, with the schema the model sees.

    Made by `@tool` from a typed function, or from an MCP server's description.
    """

    name: str
    description: str
    function: ToolFunction
    arguments: type[BaseModel] | None = None
    timeout_seconds: float = 60.0
    json_schema: dict[str, Any] | None = None
    """A raw JSON schema instead of `arguments`, for tools described elsewhere (an MCP
    server's `inputSchema`): shown to the model as is, and the server does the validating."""
    approve: bool = False
    """Every call waits for a person's approval before it runs (`@tool(approve=True)`)."""

    def __post_init__(self) -> None:
        """Refuse a tool described twice or not at all."""
        if (self.arguments is None) == (self.json_schema is None):
            raise ValueError(f"tool {self.name!r} needs exactly one of arguments or json_schema")

    def schema(self) -> dict[str, Any]:
        """The chat-completions `tools[]` entry."""
        if self.json_schema is not None:
            parameters = copy.deepcopy(self.json_schema)
        else:
            assert self.arguments is not None
            parameters = self.arguments.model_json_schema()
            parameters.pop("title", None)
            for prop in parameters.get("properties", {}).values():
                prop.pop("title", None)
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters,
            },
        }

    def parse_arguments(self, raw: str) -> dict[str, Any]:
        """Validated keyword arguments, or ToolArgumentsError naming what is wrong."""
        try:
            data = json.loads(raw or "{}")
        except RecursionError as err:
            raise ToolArgumentsError("arguments are nested too deeply to parse") from err
        except ValueError as err:
            raise ToolArgumentsError(f"arguments are not valid JSON ({err})") from err
        if not isinstance(data, dict):
            raise ToolArgumentsError("arguments must be a JSON object")
        if self.json_schema is not None:
            missing = [k for k in self.json_schema.get("required", []) if k not in data]
            if missing:
                raise ToolArgumentsError(f"missing required arguments: {', '.join(missing)}")
            return data
        assert self.arguments is not None
        try:
            model = self.arguments.model_validate(data)
        except ValidationError as err:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in err.errors()
            )
            raise ToolArgumentsError(problems) from err
        return {name: getattr(model, name) for name in type(model).model_fields}

    @property
    def is_async(self) -> bool:
        """An `async def` tool runs on the event loop; a plain `def` in a tool thread."""
        return inspect.iscoroutinefunction(self.function)

    async def __call__(self, **kwargs: Any) -> Any:
        """Run the tool: on the event loop when it is async, in a tool thread otherwise."""
        if self.is_async:
            return await self.function(**kwargs)
        return await run_in_tool_thread(self.function, self.name, **kwargs)


@overload
def tool(function: ToolFunction, /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_seconds: float = 60.0,
    approve: bool = False,
) -> Callable[[ToolFunction], Tool]: ...


def tool(
    function: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_seconds: float = 60.0,
    approve: bool = False,
) -> Tool | Callable[[ToolFunction], Tool]:
    """Turn a typed function into a Tool (usable bare or with options).

    `async def` tools run on the event loop; plain `def` tools run in a thread. With
    `approve=True` every call waits for a person's approval (`starter.py approve`).
    """

    def build(fn: ToolFunction) -> Tool:
        if not callable(fn) or inspect.isclass(fn):
            raise TypeError(f"@tool needs a function, not {fn!r}")
        if inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
            raise TypeError(f"@tool needs a function that returns; {fn.__qualname__} yields")
        tool_name = name or fn.__name__
        if tool_name == FINAL_ANSWER_TOOL:
            raise ValueError(f"{FINAL_ANSWER_TOOL!r} is reserved for the loop's meta-tool")
        try:
            hints = get_type_hints(fn, include_extras=True)
        except Exception as err:  # a hint that names what the tool's module does not define
            raise TypeError(f"tool {tool_name!r}: its type hints cannot be read: {err}") from err
        fields: dict[str, Any] = {}
        for param in inspect.signature(fn).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(
                    f"tool {tool_name!r}: *args/**kwargs cannot be described to a model"
                )
            if param.name not in hints:
                raise TypeError(f"tool {tool_name!r}: parameter {param.name!r} needs a type hint")
            if problem := _parameter_problem(param):
                raise TypeError(f"tool {tool_name!r}: parameter {param.name!r} {problem}")
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[param.name] = (hints[param.name], default)
        try:
            arguments = create_model(  # type: ignore[call-overload]
                f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
            )
        except Exception as err:  # a type pydantic cannot take: say which tool, not a trace
            raise TypeError(f"tool {tool_name!r}: its parameters' types: {err}") from err
        doc = inspect.getdoc(fn) or ""
        made = Tool(
            name=tool_name,
            description=description or doc or f"The {tool_name} tool.",
            function=fn,
            arguments=arguments,
            timeout_seconds=timeout_seconds,
            approve=approve,
        )
        try:  # now, not at every run's first step (a Callable parameter failed each run)
            made.schema()
        except Exception as err:
            raise TypeError(f"tool {tool_name!r} cannot be described to a model: {err}") from err
        return made

    return build(function) if function is not None else build


def _parameter_problem(param: inspect.Parameter) -> str | None:
    """Why a model could never pass this parameter, or None."""
    if param.kind is param.POSITIONAL_ONLY:
        return "is positional-only: a model passes arguments by name"
    if param.name.startswith("_") or hasattr(BaseModel, param.name):
        return "has a name the arguments' schema cannot hold (a leading '_' or a pydantic name)"
    return None
