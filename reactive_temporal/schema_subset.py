"""Tool schemas in the subset of JSON Schema that Google's Gemini takes.

Gemini (its OpenAI-compatible endpoint, and Vertex AI's) reads a tool's `parameters` as its own
`Schema`, "a select subset of an OpenAPI 3.0 schema object": type, format, title, description,
nullable, enum, minItems/maxItems, properties, required, minProperties/maxProperties,
minLength/maxLength, pattern, example, anyOf, propertyOrdering, default, items, minimum/maximum.
Anything else is an HTTP 400 ("Unknown name \"additionalProperties\" at
'tools[0].function_declarations[0].parameters': Cannot find field."), and so are a `type` list,
an `enum` that is not of strings or not on a string, a string `format` other than `date-time`
and `enum`, `properties` on what is not an object, `required` naming no property, and (Vertex)
an `anyOf` with other fields beside it or a schema without a `type`. Pydantic writes `$defs` and
`$ref` for nested models, `const` for a one-value Literal, `anyOf` with `{"type": "null"}` for
an Optional and `additionalProperties: false` for every `@tool`; MCP servers written with zod
add `$schema` to every tool: a run with tools failed at its first step.

A tool without parameters goes without `parameters`: Gemini refuses an object schema with no
properties ("GenerateContentRequest.tools[0].function_declarations[0].parameters.properties:
should be non-empty for OBJECT type", and `{"type": "object"}` alone is the same to its
protobuf), which every tool without arguments sends as pydantic and MCP servers write it; a
declaration without them is a function of none. (Gemini's `ANY` function-calling mode refuses
such a declaration; no request here sends `tool_choice`.)

`to_subset` rewrites a schema into that subset, keeping its meaning as far as it can: a `$ref`
inlined (a recursive one at most `REF_EXPANSIONS` times on one path, then a plain object with
its description), `const` a one-value `enum`, a `type` list or a null option of `anyOf` the type
with `nullable`, `allOf` merged, `oneOf` read as `anyOf` (the keywords beside it go into each
option), exclusive bounds as inclusive ones, and what cannot be said (a `format`, a non-string
`enum`, `multipleOf`, the values of a map) said in the description. Titles go (Gemini's API
refused them once, and pydantic's repeat the field's name).

A schema from an MCP server is untrusted input: the work is bounded (`MAX_NODES`, `MAX_DEPTH`,
`MAX_LIST`), what does not fit is left out or made a plain node, and nothing raises. Pure: no
I/O.
"""

from __future__ import annotations

import copy
import itertools
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from reactive_temporal.schema_reading import (
    MAX_LIST,
    Schema,
    allowed_values,
    bounds,
    copy_counts,
    described,
    hinted_type,
    is_null,
    is_scalar,
    known,
    pointer,
    shown,
    strings_of,
    stub,
    text_of,
    types_of,
)

FORMATS = {
    "string": ("date-time", "enum"),
    "integer": ("int32", "int64"),
    "number": ("float", "double"),
}
"""The formats Gemini takes, per type ("only 'enum' and 'date-time' are supported for STRING
type"); any other is said in the description."""
MAX_NODES = 4_000
"""Schema nodes one conversion writes at most: `$ref`s inlined where they are used can grow a
schema exponentially."""
MAX_DEPTH = 24
"""Nesting deeper than this is a plain node."""
REF_EXPANSIONS = 2
"""Times one `$ref` is inlined within itself (a recursive model) before it is a plain object."""
MAX_OPTIONS = 64
"""Options of one `anyOf`/`oneOf` read (each is compared with the others)."""


def to_subset(schema: object) -> Schema:
    """`schema` (a tool's parameters) within Gemini's subset: always an object schema."""
    root = schema if isinstance(schema, Mapping) else {}
    converted = _Converter(root).convert(root, 0, ())
    return _object_root(converted or {})


# -- the conversion ----------------------------------------------------------------------------


class _Converter:
    """One schema's conversion, with its budget of nodes."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.nodes = MAX_NODES

    def convert(self, schema: object, depth: int, refs: tuple[str, ...]) -> Schema | None:
        """`schema` in the subset; None when the budget ran out (the caller leaves it out)."""
        if self.nodes <= 0:
            return None
        self.nodes -= 1
        node = known(schema)
        if depth > MAX_DEPTH:
            return stub(node)
        ref = node.get("$ref")
        if isinstance(ref, str):
            return self._ref(node, ref, depth, refs)
        parts = node.get("allOf")
        if isinstance(parts, list) and parts:
            return self._all_of(node, parts[:MAX_LIST], depth, refs)
        for union in ("anyOf", "oneOf"):
            options = node.get(union)
            if isinstance(options, list) and options:
                return self._union(node, options[:MAX_OPTIONS], False, depth, refs)
        kinds, nullable = types_of(node)
        if len(kinds) > 1:
            options = [{"type": kind} for kind in kinds]
            return self._union({**node, "type": None}, options, nullable, depth, refs)
        kind = kinds[0] if kinds else hinted_type(node) or "string"
        return self._typed(node, kind, nullable, depth, refs)

    def _ref(
        self, node: Mapping[str, Any], ref: str, depth: int, refs: tuple[str, ...]
    ) -> Schema | None:
        """The schema `ref` names, the keywords beside it on top; a plain object past the
        bound on recursion, or when it names nothing here."""
        beside = {k: v for k, v in node.items() if k != "$ref"}
        target = known(pointer(self.root, ref))
        if not target or refs.count(ref) >= REF_EXPANSIONS:
            return stub({**target, **beside}, default="object")
        return self.convert({**target, **beside}, depth + 1, (*refs, ref))

    def _all_of(
        self, node: Mapping[str, Any], parts: list[Any], depth: int, refs: tuple[str, ...]
    ) -> Schema | None:
        """Each part converted, then merged: properties and required together, the first
        word on anything else (the keywords beside `allOf` first)."""
        converted = [c for p in parts if (c := self.convert(p, depth + 1, refs)) is not None]
        base = {k: v for k, v in node.items() if k != "allOf"}
        if "type" not in base and not hinted_type(base):
            base["type"] = next((c["type"] for c in converted if "type" in c), None)
        out = self.convert(base, depth + 1, refs)
        if out is None or "anyOf" in out:
            return out
        for part in converted:
            if part.get("type") == out.get("type"):
                _merge_into(out, part)
        return out

    def _union(
        self,
        node: Mapping[str, Any],
        options: list[Any],
        nullable: bool,
        depth: int,
        refs: tuple[str, ...],
    ) -> Schema | None:
        """`anyOf`/`oneOf` (or a `type` list, as options of one type each): each option with
        the keywords beside it (A and (B or C) is (A and B) or (A and C)); a null option is
        `nullable`; one option left is that option; options that are only strings a single
        `enum`. An `anyOf` is all its node says: Vertex AI refuses fields beside it."""
        beside = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf") and v is not None}
        branches: list[Schema] = []
        for option in options:
            if is_null(option):
                nullable = True
                continue
            merged = {**beside, **known(option)}
            branch = self.convert(merged, depth + 1, refs)
            if branch is None:
                break
            if branch not in branches:
                branches.append(branch)
        if not branches:
            out = self.convert(beside, depth + 1, refs)
            branches = [out] if out is not None else []
        if not branches:
            return None
        out = branches[0] if len(branches) == 1 else _one_enum(branches) or {"anyOf": branches}
        if nullable:
            for branch in out.get("anyOf", [out]):
                branch["nullable"] = True
        return out

    def _typed(
        self,
        node: Mapping[str, Any],
        kind: str,
        nullable: bool,
        depth: int,
        refs: tuple[str, ...],
    ) -> Schema:
        """A node of one type, with the keywords Gemini takes on that type."""
        out: Schema = {"type": kind}
        notes: list[str] = []
        values = allowed_values(node)
        if values is not None:
            nullable = nullable or None in values
            values = [v for v in values if v is not None and is_scalar(v)]
            if kind == "string" and values:
                out["enum"] = list(dict.fromkeys(shown(v) for v in values))
            elif values:
                notes.append("one of: " + ", ".join(shown(v) for v in values))
        fmt = node.get("format")
        if isinstance(fmt, str) and fmt:
            if fmt in FORMATS.get(kind, ()) and (fmt != "enum" or "enum" in out):
                out["format"] = fmt
            elif kind == "string":
                notes.append(f"format: {fmt[:40]}")
        if kind == "string":
            copy_counts(node, out, ("minLength", "maxLength"))
            pattern = node.get("pattern")
            if isinstance(pattern, str) and len(pattern) <= 1_000:
                out["pattern"] = pattern
        elif kind in ("number", "integer"):
            notes += bounds(node, out, kind)
        elif kind == "array":
            out["items"] = self._items(node, depth, refs)
            copy_counts(node, out, ("minItems", "maxItems"))
        elif kind == "object":
            notes += self._object(node, out, depth, refs)
        for key in ("default", "example"):
            value = node.get(key)
            if key == "example" and value is None and isinstance(node.get("examples"), list):
                value = next(iter(node["examples"]), None)
            if value is not None and is_scalar(value):
                out[key] = value
        description = described(text_of(node.get("description")), notes)
        if description:
            out = {"type": kind, "description": description, **out}
        if nullable:
            out["nullable"] = True
        return out

    def _items(self, node: Mapping[str, Any], depth: int, refs: tuple[str, ...]) -> Schema:
        """An array's items (Gemini requires them); a tuple's as the union of its places."""
        items = node.get("items")
        places = node.get("prefixItems")
        if isinstance(items, list):
            places, items = items, None
        if not isinstance(items, Mapping) and isinstance(places, list) and places:
            items = {"anyOf": places[:MAX_LIST]}
        converted = self.convert(items, depth + 1, refs)
        return converted if converted is not None else {"type": "string"}

    def _object(
        self, node: Mapping[str, Any], out: Schema, depth: int, refs: tuple[str, ...]
    ) -> list[str]:
        """An object's properties, required names and counts; notes for what cannot be said."""
        properties: Schema = {}
        declared = node.get("properties")
        named = declared.items() if isinstance(declared, Mapping) else ()
        for name, sub in itertools.islice(named, MAX_NODES):
            if not isinstance(name, str) or sub is False:
                continue
            converted = self.convert(sub, depth + 1, refs)
            if converted is None:
                break
            properties[name] = converted
        if properties:
            out["properties"] = properties
            required = [n for n in strings_of(node.get("required")) if n in properties]
            if required:
                out["required"] = required
            ordering = [n for n in strings_of(node.get("propertyOrdering")) if n in properties]
            if ordering:
                out["propertyOrdering"] = ordering
        copy_counts(node, out, ("minProperties", "maxProperties"))
        more = node.get("additionalProperties")
        if properties or more is False or more is None:
            return []
        kinds, _ = types_of(more) if isinstance(more, Mapping) else ([], False)
        return [f"any keys, each value {kinds[0] if kinds else 'any'}"]


def _merge_into(out: Schema, part: Schema) -> None:
    """`part`'s word where `out` has none; properties and required names together."""
    for key, value in part.items():
        if key == "properties" and isinstance(out.get(key), dict):
            out[key] = {**value, **out[key]}
        elif key == "required" and isinstance(out.get(key), list):
            out[key] = list(dict.fromkeys([*out[key], *value]))
        else:
            out.setdefault(key, value)


def _one_enum(branches: list[Schema]) -> Schema | None:
    """Options that are each a string `enum` (zod's union of literals) as one `enum`."""
    plain = {"type", "enum", "description", "default"}
    if not all(b.get("type") == "string" and "enum" in b and b.keys() <= plain for b in branches):
        return None
    out = dict(branches[0])
    out["enum"] = list(dict.fromkeys(v for b in branches for v in b["enum"]))
    return out


def _object_root(schema: Schema) -> Schema:
    """The root as Gemini wants a tool's parameters: an object. A union of objects at the root
    (an MCP server's discriminated union) becomes one object with all their properties, those
    every option requires required."""
    options = schema.get("anyOf")
    if isinstance(options, list):
        objects = [o for o in options if o.get("type") == "object"]
        merged: Schema = {"type": "object", "properties": {}}
        for option in objects:
            merged["properties"] = {**option.get("properties", {}), **merged["properties"]}
            if "description" in option:
                merged.setdefault("description", option["description"])
        required = [set(o.get("required", ())) for o in objects]
        both = set.intersection(*required) if required else set()
        if both:
            merged["required"] = [n for n in merged["properties"] if n in both]
        schema = merged
    if schema.get("type") != "object":
        return {"type": "object", "properties": {}}
    schema.pop("nullable", None)
    schema.setdefault("properties", {})
    return schema


# -- per worker --------------------------------------------------------------------------------


class SubsetSchemas:
    """Each tool's parameters converted once per worker: every step sends the same tools.

    A tool's schema is rebuilt for each request, so its identity says nothing: the conversion
    is kept under the tool's name with a copy of the schema it was made from, and used again
    while the schema sent is equal to that copy (a comparison costs a tenth of writing the
    schema as JSON to key it by). The converted schemas are shared between requests, never
    changed. Least recently used first out past `size`.
    """

    def __init__(self, size: int = 1_024) -> None:
        self.size = size
        self._done: OrderedDict[str, tuple[object, Schema]] = OrderedDict()

    def tools(self, tools: list[Any]) -> list[Any]:
        """A request's `tools` with each function's parameters in the subset (none for a
        function of no parameters)."""
        return [self._tool(entry) for entry in tools]

    def _tool(self, entry: object) -> object:
        function = entry.get("function") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or not isinstance(function, dict):
            return entry
        if "parameters" not in function:
            return entry
        name = function.get("name")
        schema = function["parameters"]
        parameters = self.parameters(name, schema) if isinstance(name, str) else to_subset(schema)
        if not parameters.get("properties"):  # no parameters: said by sending none
            return {**entry, "function": {k: v for k, v in function.items() if k != "parameters"}}
        return {**entry, "function": {**function, "parameters": parameters}}

    def parameters(self, name: str, schema: object) -> Schema:
        """Tool `name`'s parameters in the subset, converted again only when they changed."""
        done = self._done.get(name)
        try:
            if done is not None and done[0] == schema:
                self._done.move_to_end(name)
                return done[1]
            kept = copy.deepcopy(schema)
        except (RecursionError, TypeError, ValueError):  # not JSON, or nested past Python: not kept
            return to_subset(schema)
        converted = to_subset(schema)
        self._done[name] = (kept, converted)
        self._done.move_to_end(name)
        if len(self._done) > self.size:
            self._done.popitem(last=False)
        return converted
