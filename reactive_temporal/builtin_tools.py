"""The tools every worker has: calculator, http_get, file_read, file_write, current_time."""

from __future__ import annotations

import ast
import asyncio
import codecs
import math
import operator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import httpx
from pydantic import Field

from reactive_temporal.http_guard import (
    ACCEPT_ENCODING,
    AllowList,
    GuardedBackend,
    GuardedTransport,
    Resolver,
    read_bounded,
    system_resolve,
)
from reactive_temporal.limits import TOOL_ARGUMENTS_MAX_CHARS
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
MAX_RESULT_DIGITS = 4_000
"""Integers past this many digits are refused before they are computed (a 15-character
`(9**9999)**3000` would otherwise run for minutes and build a 95-million-digit number)."""
MAX_ROUND_DIGITS = 300
_MAX_INT_BITS = math.ceil(MAX_RESULT_DIGITS * math.log2(10))
_TOO_BIG = f"the result would have more than {MAX_RESULT_DIGITS} digits"


def _checked(value: Any) -> float | int:
    """`value` when it is a real number of bounded size, else ValueError."""
    if isinstance(value, complex):
        raise ValueError("the result is not a real number (e.g. a fractional power of a negative)")
    if isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
        raise ValueError(_TOO_BIG)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"the result is too large for a floating-point number ({value})")
    return value  # type: ignore[no-any-return]


def _power(base: float | int, exponent: float | int) -> float | int:
    """`base ** exponent`, refused when the exponent or the result's size is too large."""
    if abs(exponent) > MAX_EXPONENT:
        raise ValueError(f"exponent {exponent} is too large (limit {MAX_EXPONENT})")
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        # the result's size from the operands' sizes: no big number is built to find out
        digits = exponent * math.log10(abs(base))
        if digits > MAX_RESULT_DIGITS:
            shown = str(base) if base.bit_length() < 64 else f"a {len(str(base))}-digit number"
            raise ValueError(
                f"{shown} ** {exponent} would have about {digits:,.0f} digits; "
                f"results are limited to {MAX_RESULT_DIGITS:,} digits"
            )
    return base**exponent


def _call(name: str, args: list[float | int]) -> float | int:
    if name == "round" and len(args) == 2:
        digits = args[1]
        if not isinstance(digits, int) or abs(digits) > MAX_ROUND_DIGITS:
            raise ValueError(f"round's digits must be an integer within ±{MAX_ROUND_DIGITS}")
    try:
        return _FUNCTIONS[name](*args)  # type: ignore[no-any-return,operator]
    except (TypeError, ValueError) as err:  # min(), sqrt(-1): the model's mistake, said plainly
        raise ValueError(f"{name}(): {err}") from err


def evaluate_arithmetic(expression: str) -> float | int:
    """Evaluate arithmetic by walking its syntax tree: no eval, no names but math's.

    Every operation's result is size-checked, and powers are checked before they are
    computed, so no expression can hold the CPU or the memory for long.
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"expression is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.replace("^", "**"), mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as err:
        raise ValueError(f"not an arithmetic expression: {expression!r}") from err

    def walk(node: ast.AST) -> float | int:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return _checked(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Pow):
                return _checked(_power(left, right))
            return _checked(_BINARY[type(node.op)](left, right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _checked(_UNARY[type(node.op)](walk(node.operand)))  # type: ignore[operator,unused-ignore]
        if isinstance(node, ast.Name) and node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCTIONS
            and not node.keywords
        ):
            return _checked(_call(node.func.id, [walk(a) for a in node.args]))
        raise ValueError(f"unsupported element in expression: {ast.unparse(node)[:80]!r}")

    try:
        return walk(tree)
    except ZeroDivisionError as err:
        raise ValueError("division by zero") from err
    except OverflowError as err:
        raise ValueError(f"the result is too large for a floating-point number ({err})") from err
    except RecursionError as err:
        raise ValueError("the expression is nested too deeply") from err


@tool
def calculator(
    expression: Annotated[str, Field(description="Arithmetic, e.g. '(17 * 23) + 4' or 'sqrt(2)'")],
) -> str:
    """Evaluate an arithmetic expression exactly (+ - * / // % ** and math functions)."""
    result = evaluate_arithmetic(expression)
    if isinstance(result, float) and result.is_integer() and abs(result) < 1e15:
        result = int(result)
    return str(result)


HTTP_MAX_BYTES = 200_000
HTTP_MAX_WIRE_BYTES = 2_000_000
"""Compressed bytes read at most, whatever they inflate to."""
HTTP_TIMEOUT_SECONDS = 15.0
HTTP_MAX_REDIRECTS = 5


def http_get_tool(allow: AllowList | None = None, *, resolve: Resolver | None = None) -> Tool:
    """The http_get tool, reaching public addresses and whatever `allow` opens."""
    allow_list = allow or AllowList()

    @tool(name="http_get", timeout_seconds=HTTP_TIMEOUT_SECONDS + 5)
    async def http_get(
        url: Annotated[str, Field(description="An http:// or https:// URL")],
        max_bytes: Annotated[int, Field(ge=1, le=HTTP_MAX_BYTES)] = 50_000,
    ) -> str:
        """Fetch a URL with GET and return its status and the start of its body (size-limited)."""
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"only http:// and https:// URLs can be fetched, not {url[:200]!r}")
        backend = GuardedBackend(allow_list, resolve=resolve or system_resolve)
        deadline = asyncio.timeout(HTTP_TIMEOUT_SECONDS)
        try:
            return await _fetch(url, max_bytes, backend, deadline)
        except TimeoutError as err:
            if not deadline.expired():
                raise
            raise TimeoutError(
                f"no complete response within {HTTP_TIMEOUT_SECONDS:g}s (a server too slow, "
                "or one that sends its body a byte at a time)"
            ) from err

    return http_get


async def _fetch(
    url: str, max_bytes: int, backend: GuardedBackend, deadline: asyncio.Timeout
) -> str:
    """One GET, redirects followed through the guard, its body read within `max_bytes`."""
    async with (
        deadline,
        httpx.AsyncClient(
            transport=GuardedTransport(backend),
            timeout=HTTP_TIMEOUT_SECONDS,
            follow_redirects=True,
            max_redirects=HTTP_MAX_REDIRECTS,
            trust_env=False,
            headers={"Accept-Encoding": ACCEPT_ENCODING},
        ) as client,
        client.stream("GET", url) as response,
    ):
        body, cut = await read_bounded(
            response.aiter_raw(),
            response.headers.get("content-encoding"),
            max_bytes,
            HTTP_MAX_WIRE_BYTES,
        )
    text = body.decode(page_encoding(response.charset_encoding), errors="replace")
    return f"HTTP {response.status_code}{' (truncated)' if cut else ''}\n{text}"


NOT_CHARSETS = frozenset({"punycode", "idna", "unicode-escape", "raw-unicode-escape", "undefined"})
"""Text codecs Python has that are no page's character set: punycode decodes in quadratic
time (a 200 KB page declaring it held the worker's event loop for 1.4 s, a turn of 16 for
10 s), and the others refuse `errors="replace"` or turn the page's bytes into other text."""


def page_encoding(charset: str | None) -> str:
    """The response's charset when Python knows it as a character set, else UTF-8."""
    if charset:
        try:
            codec = codecs.lookup(charset)
        except LookupError:
            return "utf-8"
        if codec._is_text_encoding and codec.name not in NOT_CHARSETS:  # type: ignore[attr-defined]
            return codec.name
    return "utf-8"


http_get = http_get_tool()
"""http_get reaching public addresses only (workers pass their REACTIVE_TEMPORAL_HTTP_ALLOW)."""


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
FILE_WRITE_MAX_CHARS = TOOL_ARGUMENTS_MAX_CHARS - 1_000
"""What one file_write call may write: its content travels in the call's arguments, which
are bounded (reactive_temporal.limits); a larger file is written in parts with `append`."""


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
    def file_read(
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
    def file_write(
        path: Annotated[str, Field(description="Path relative to the workspace")],
        content: Annotated[str, Field(max_length=FILE_WRITE_MAX_CHARS)],
        append: Annotated[
            bool, Field(description="Add to the end of the file instead of replacing it")
        ] = False,
    ) -> str:
        """Write a UTF-8 text file in the agent's workspace (replacing it, or appending to it;
        a large file is written in parts)."""
        target = resolve_in_workspace(workspace, path)
        size = len(content.encode())
        if append and target.is_file() and target.stat().st_size + size > FILE_MAX_BYTES:
            raise ValueError(f"{path!r} would grow past {FILE_MAX_BYTES:,} bytes")
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a" if append else "w", encoding="utf-8") as f:
            f.write(content)
        return f"{'appended' if append else 'wrote'} {size} bytes to {path}"

    return [file_read, file_write]


def builtin_tools(workspace: Path, http_allow: AllowList | None = None) -> list[Tool]:
    """Every built-in tool; file tools confined to `workspace`, http_get to public addresses
    and `http_allow`. Plain functions among them (calculator, file tools) run in threads."""
    return [calculator, http_get_tool(http_allow), current_time, *file_tools(workspace)]
