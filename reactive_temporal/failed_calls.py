"""The tool calls in a generation its endpoint refused as calls, when they read unambiguously.

Groq answers a tool call its parser could not read with HTTP 400 `tool_use_failed`, the
model's raw text in `failed_generation`. Llama on Groq writes its calls in its own
`<function=NAME>{…}</function>` form (or `<function=NAME,{…}></function>`,
`<function=NAME{…}</function>`), which the parser often refuses though the call is whole;
other models write the formats `text_calls` reads. Asked again, the model is billed again,
and may fail the same way until the agent's attempts run out.

A generation is read as calls only when nothing is left to guess: it is nothing but calls,
each names a tool the step offered, and each has a JSON object for arguments. Anything else
(words around them, a tool not offered, arguments that are not JSON: `{"expression": 6*7}`)
is no call, and the step is asked again as before.

Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from reactive_temporal.call_names import tool_name_of
from reactive_temporal.text_calls import TEXT_CALLS_MAX_CHARS, read_calls

_FUNCTION_TAG = re.compile(r"\s*<function[=/]([\w.\-]{1,64})\s*(?:[,>]\s*)?")
"""The head of Llama's custom call form: `<function=NAME>`, `<function=NAME,`, or the name
run into its arguments."""
_FUNCTION_END = re.compile(r"\s*>?\s*</function>")
_DECODER = json.JSONDecoder()

ReadCall = tuple[str, str]
"""A call read: the tool's name, its arguments as JSON text of an object."""


def calls_of_failed_generation(
    written: str, real_names: Mapping[str, str]
) -> list[ReadCall] | None:
    """The calls `written` is, when it is nothing but calls of offered tools (`real_names`:
    wire name → the tool's name) with JSON objects for arguments; None otherwise."""
    if not written.strip() or len(written) > TEXT_CALLS_MAX_CHARS:
        return None
    calls = _function_tags(written, real_names)
    if calls is None:
        found = read_calls(written, real_names, id_prefix="failed")
        if found is None or found.before or not found.calls:
            return None
        calls = [(c.name, c.arguments) for c in found.calls]
    for name, arguments in calls:
        if name not in real_names.values() or not _an_object(arguments):
            return None
    return calls


def _function_tags(written: str, real_names: Mapping[str, str]) -> list[ReadCall] | None:
    """Llama's `<function=NAME>{…}</function>` blocks, one after another, when `written` is
    nothing else; None when it is not (or any block does not read)."""
    calls: list[ReadCall] = []
    at = 0
    while at < len(written) and written[at:].strip():
        head = _FUNCTION_TAG.match(written, at)
        if head is None:
            return None
        try:
            arguments, end = _DECODER.raw_decode(written, head.end())
        except (ValueError, RecursionError):
            return None
        close = _FUNCTION_END.match(written, end)
        if close is None or not isinstance(arguments, dict):
            return None
        calls.append((tool_name_of(head.group(1), real_names), json.dumps(arguments)))
        at = close.end()
    return calls or None


def _an_object(arguments: str) -> bool:
    try:
        return isinstance(json.loads(arguments), dict)
    except (ValueError, RecursionError):
        return False
