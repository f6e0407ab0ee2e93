"""Reading a JSON schema as it comes, for `schema_subset`: each keyword's value if it is of the
kind the keyword takes, and nothing otherwise.

A tool's schema from an MCP server is untrusted input: any keyword may hold any JSON (or, from
code, any object), a list may be a million long, a number may be NaN. Everything here takes
what it is given and answers within bounds; nothing raises. Pure: no I/O.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

Schema = dict[str, Any]

TYPES = ("string", "number", "integer", "boolean", "array", "object")
MAX_LIST = 1_000
"""Longest `enum`, `required` or `allOf` read; a longer `enum` is left out."""
MAX_NOTE = 300
"""Most characters a description gets for what the subset cannot say."""
LARGEST = 2**63
"""Numbers past this are not read: Gemini's counts are int64, and Python writes an integer of
more than 4,300 digits as no JSON at all."""
_OBJECT_HINTS = ("properties", "required", "additionalProperties", "patternProperties",
                 "propertyNames", "minProperties", "maxProperties")  # fmt: skip
_ARRAY_HINTS = ("items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains")
_STRING_HINTS = ("minLength", "maxLength", "pattern")
_NUMBER_HINTS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
KEYWORDS = frozenset(
    {"$ref", "allOf", "anyOf", "oneOf", "type", "nullable", "const", "enum", "format",
     "default", "example", "examples", "description", "title", "items",
     *_OBJECT_HINTS, "propertyOrdering", *_ARRAY_HINTS, *_STRING_HINTS, *_NUMBER_HINTS}
)  # fmt: skip
"""The keywords read; a node's others are never looked at (nor copied: a node with a
million keys costs what one with these does)."""


def known(node: object) -> dict[str, Any]:
    """The keywords of `node` that are read, whatever else it holds (nothing when it is not a
    schema: `true`, a number, a list)."""
    if not isinstance(node, Mapping):
        return {}
    return {k: node[k] for k in KEYWORDS if k in node}


def text_of(value: object) -> str | None:
    """A string with something in it."""
    return value if isinstance(value, str) and value.strip() else None


def number_of(value: object) -> int | float | None:
    """A number JSON can say (not a bool, NaN or an infinity), within `LARGEST`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value if -LARGEST <= value <= LARGEST else None


def count_of(value: object) -> int | None:
    """A count: an integer from 0 to `LARGEST`."""
    number = number_of(value)
    return number if isinstance(number, int) and number >= 0 else None


def is_scalar(value: object) -> bool:
    """A value Gemini takes as a `default` or an `example`, or one `enum` can list."""
    return value is None or isinstance(value, str | bool) or number_of(value) is not None


def shown(value: object) -> str:
    """A scalar as JSON writes it (`true`, `1.5`, `"a"` as a)."""
    return value if isinstance(value, str) else json.dumps(value)


def strings_of(value: object) -> list[str]:
    """A list's strings, once each (`required`, `propertyOrdering`)."""
    items = value[:MAX_LIST] if isinstance(value, list) else []
    return list(dict.fromkeys(v for v in items if isinstance(v, str)))


def _type_of(value: object) -> str | None:
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return "number" if number_of(value) is not None else None


def allowed_values(schema: Mapping[str, Any]) -> list[Any] | None:
    """The values `const` or `enum` allows, None when neither says (or the enum is too long)."""
    if "const" in schema:
        return [schema["const"]]
    values = schema.get("enum")
    return values if isinstance(values, list) and len(values) <= MAX_LIST else None


def hinted_type(schema: Mapping[str, Any]) -> str | None:
    """The type a schema without one means, from its other keywords."""
    if any(k in schema for k in _OBJECT_HINTS):
        return "object"
    if any(k in schema for k in _ARRAY_HINTS):
        return "array"
    values = [v for v in allowed_values(schema) or [] if v is not None]
    kinds = {_type_of(v) for v in values}
    if kinds == {"integer", "number"}:
        return "number"
    if len(kinds) == 1 and None not in kinds:
        return kinds.pop()
    if values or any(k in schema for k in _STRING_HINTS):
        return "string"
    return "number" if any(k in schema for k in _NUMBER_HINTS) else None


def types_of(schema: Mapping[str, Any]) -> tuple[list[str], bool]:
    """The types a schema allows besides null, and whether it allows null."""
    declared = schema.get("type")
    raw = declared[:MAX_LIST] if isinstance(declared, list) else [declared]
    nullable = schema.get("nullable") is True
    kinds: list[str] = []
    for item in raw:
        name = item.lower() if isinstance(item, str) else None
        if name == "null":
            nullable = True
        elif name in TYPES and name not in kinds:
            kinds.append(name)
    return kinds, nullable


def is_null(option: object) -> bool:
    """An option of a union that allows null only."""
    if not isinstance(option, Mapping):
        return False
    kinds, nullable = types_of(option)
    return (nullable and not kinds) or allowed_values(option) == [None]


def stub(schema: Mapping[str, Any], default: str = "string") -> Schema:
    """A plain node: what a schema is past the bounds (its type and description only)."""
    kinds, _ = types_of(schema)
    kind = kinds[0] if kinds else hinted_type(schema) or default
    out: Schema = {"type": kind}
    text = text_of(schema.get("description")) or text_of(schema.get("title"))
    if text:
        out["description"] = text
    if kind == "array":
        out["items"] = {"type": "string"}
    return out


def pointer(root: Mapping[str, Any], ref: str) -> Mapping[str, Any] | None:
    """The schema a local `$ref` ("#", "#/$defs/Name", any JSON pointer into the root) names."""
    if ref == "#":
        return root
    if not ref.startswith("#/") or len(ref) > 1_000:
        return None
    node: object = root
    for part in ref[2:].split("/")[:64]:
        key = part.replace("%25", "%").replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping):
            node = node.get(key)
        elif isinstance(node, list) and key.isascii() and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return None
    return node if isinstance(node, Mapping) else None


def copy_counts(node: Mapping[str, Any], out: Schema, keys: tuple[str, ...]) -> None:
    """`keys` that hold counts, into `out`."""
    for key in keys:
        if (count := count_of(node.get(key))) is not None:
            out[key] = count


def bounds(node: Mapping[str, Any], out: Schema, kind: str) -> list[str]:
    """`minimum`/`maximum`, exclusive bounds as inclusive ones (an integer's one step in, a
    number's said in the description), `multipleOf` said."""
    notes = []
    for key, exclusive, step, words in (
        ("minimum", "exclusiveMinimum", 1, "greater than"),
        ("maximum", "exclusiveMaximum", -1, "less than"),
    ):
        bound = number_of(node.get(key))
        strict = node.get(exclusive)
        if number_of(strict) is None and strict is True and bound is not None:
            strict = bound  # draft 4: a flag on the bound
        limit = number_of(strict)
        if limit is not None:
            inner: int | float
            if kind == "integer":
                inner = math.floor(limit) + 1 if step > 0 else math.ceil(limit) - 1
            else:
                inner = limit
                notes.append(f"{words} {shown(limit)}")
            pick = max if step > 0 else min
            bound = inner if bound is None else pick(bound, inner)
        if bound is not None:
            out[key] = bound
    if (multiple := number_of(node.get("multipleOf"))) is not None:
        notes.append(f"a multiple of {shown(multiple)}")
    return notes


def described(description: str | None, notes: list[str]) -> str | None:
    """The description, with what the subset could not say after it, bounded."""
    said = "; ".join(notes)[:MAX_NOTE]
    if not said:
        return description
    return f"{description} ({said})" if description else said[0].upper() + said[1:]
