"""The tools every worker has: calculator, http_get, file_read, file_write, current_time."""

from __future__ import annotations

import ast
import math
import operator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import httpx
from pydantic import Field

from reactive_temporal.tools import Tool, tool

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS = {
    "sqrt": math.sqrt,
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "log": math.log,
    "log10": math.log10,
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "floor": math.floor,
    "ceil": math.ceil,
}
_CONSTANTS = {"pi": math.pi, "e": math.e}
MAX_EXPRESSION_CHARS = 500
MAX_EXPONENT = 10_000


def evaluate_arithmetic(expression: str) -> float | int:
    """Evaluate arithmetic by walking its syntax tree: no eval, no names but math's."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"expression is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.replace("^", "**"), mode="eval")
    except SyntaxError as err:
        raise ValueError(f"not an arithmetic expression: {expression!r}") from err

    def walk(node: ast.AST) -> float | int:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
                raise ValueError(f"exponent {right} is too large (limit {MAX_EXPONENT})")
            return _BINARY[type(node.op)](left, right)  # type: ignore[no-any-return]
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](walk(node.operand))  # type: ignore[no-any-return,operator,unused-ignore]
        if isinstance(node, ast.Name) and node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCTIONS
            and not node.keywords
        ):
            return _FUNCTIONS[node.func.id](*(walk(a) for a in node.args))  # type: ignore[no-any-return,operator,unused-ignore]
        raise ValueError(f"unsupported element in expression: {ast.unparse(node)!r}")

    try:
        return walk(tree)
    except ZeroDivisionError as err:
        raise ValueError("division by zero") from err


@tool
async def calculator(
    expression: Annotated[str, Field(description="Arithmetic, e.g. '(17 * 23) + 4' or 'sqrt(2)'")],
) -> str:
    """Evaluate an arithmetic expression exactly (+ - * / // % ** and math functions)."""
    result = evaluate_arithmetic(expression)
    if isinstance(result, float) and result.is_integer() and abs(result) < 1e15:
        result = int(result)
    return str(result)


HTTP_MAX_BYTES = 200_000
HTTP_TIMEOUT_SECONDS = 15.0


@tool(timeout_seconds=HTTP_TIMEOUT_SECONDS + 5)
async def http_get(
    url: Annotated[str, Field(description="An http:// or https:// URL")],
    max_bytes: Annotated[int, Field(ge=1, le=HTTP_MAX_BYTES)] = 50_000,
) -> str:
    """Fetch a URL with GET and return its status and the start of its body (size-limited)."""
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"only http:// and https:// URLs can be fetched, not {url!r}")
    chunks: list[bytes] = []
    size = 0
    async with (
        httpx.AsyncClient(timeout=HTTP_TIMEOUT_SECONDS, follow_redirects=True) as client,
        client.stream("GET", url) as response,
    ):
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size >= max_bytes:
                break
    body = b"".join(chunks)[:max_bytes].decode(response.encoding or "utf-8", errors="replace")
    cut = " (truncated)" if size >= max_bytes else ""
    return f"HTTP {response.status_code}{cut}\n{body}"


@tool
async def current_time(
    timezone: Annotated[str, Field(description="IANA zone, e.g. 'Europe/Paris'")] = "UTC",
) -> str:
    """The current date and time in ISO 8601."""
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError) as err:
        raise ValueError(f"unknown time zone {timezone!r}") from err
    return datetime.now(UTC).astimezone(zone).isoformat(timespec="seconds")


FILE_MAX_BYTES = 1_000_000


def resolve_in_workspace(workspace: Path, path: str) -> Path:
    """The path inside the workspace, or ValueError when it would escape it."""
    if not path or "\x00" in path:
        raise ValueError("path is empty or contains a NUL byte")
    root = workspace.resolve()
    target = (root / path).resolve()
    if target != root and root not in target.parents:
        raise ValueError(f"path {path!r} is outside the workspace; use a path inside it")
    return target


def file_tools(workspace: Path) -> list[Tool]:
    """file_read and file_write, confined to `workspace`."""

    @tool(name="file_read")
    async def file_read(
        path: Annotated[str, Field(description="Path relative to the workspace")],
    ) -> str:
        """Read a UTF-8 text file from the agent's workspace."""
        target = resolve_in_workspace(workspace, path)
        if not target.is_file():
            raise ValueError(f"no file at {path!r} in the workspace")
        if target.stat().st_size > FILE_MAX_BYTES:
            raise ValueError(f"{path!r} is larger than {FILE_MAX_BYTES} bytes")
        return target.read_text(encoding="utf-8", errors="replace")

    @tool(name="file_write")
    async def file_write(
        path: Annotated[str, Field(description="Path relative to the workspace")],
        content: Annotated[str, Field(max_length=FILE_MAX_BYTES)],
    ) -> str:
        """Write a UTF-8 text file in the agent's workspace, replacing it if it exists."""
        target = resolve_in_workspace(workspace, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return f"wrote {len(content.encode())} bytes to {path}"

    return [file_read, file_write]


def builtin_tools(workspace: Path) -> list[Tool]:
    return [calculator, http_get, current_time, *file_tools(workspace)]
