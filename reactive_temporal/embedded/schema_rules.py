"""Google Gemini's rule on a request's tool schemas, answering its own 400: what the scripted
endpoint (`endpoint_rules.Endpoint.schema_subset`) checks before a script answers.

Gemini (its OpenAI-compatible endpoint, and Vertex AI's) reads each tool's `parameters` into its
`Schema` message, a select subset of OpenAPI 3.0, and refuses what does not fit in the words of
the protobuf JSON parser: a field the message lacks ("Unknown name \"additionalProperties\" at
'tools[0].function_declarations[0].parameters': Cannot find field."), a `type` list ("Proto
field is not repeating, cannot start list."), an `enum` value that is not a string. Every error
of the request in one message, one line each, the body a one-element list.

A request that parses is then checked: a tool's `parameters` of type object with no properties
(a tool without parameters written `{"type": "object", "properties": {}}`, as pydantic and most
MCP servers write it) is refused, each in a line of its own ("* GenerateContentRequest.tools[0]
.function_declarations[0].parameters.properties: should be non-empty for OBJECT type"): an
empty map and none are one to its protobuf, so `{"type": "object"}` alone is refused too; a
function without `parameters` is taken. Gemini checks a nested object the same way; this
endpoint checks only the parameters' own: a nested object of free keys (`dict[str, str]`) has
no form in the subset that the converter could send instead (`schema_subset`).

Written from Google's field list and the refusals users report, apart from the converter it
tests (`reactive_temporal.schema_subset`), so the one does not just agree with itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from reactive_temporal.embedded.scripted_replies import HttpError

SCHEMA_FIELDS = frozenset(
    {
        "type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems",
        "properties", "required", "minProperties", "maxProperties", "minLength", "maxLength",
        "pattern", "example", "anyOf", "propertyOrdering", "default", "items", "minimum",
        "maximum",
        # protobuf's JSON parser takes each field's own name too
        "max_items", "min_items", "min_properties", "max_properties", "min_length",
        "max_length", "any_of", "property_ordering",
    }
)  # fmt: skip
"""The fields of the Gemini API's `Schema` (v1beta): anything else is an unknown name."""
MAX_ERRORS = 50
"""Gemini lists every error; a test needs a few."""


def _problems(schema: object, path: str, out: list[tuple[str, str]]) -> None:
    if not isinstance(schema, Mapping) or len(out) >= MAX_ERRORS:
        return
    for key, value in schema.items():
        if key not in SCHEMA_FIELDS:
            out.append(
                (path, f'Invalid JSON payload received. Unknown name "{key}" at \'{path}\': '
                       "Cannot find field.")
            )  # fmt: skip
        elif key == "type" and isinstance(value, list):
            out.append(
                (path, f'Invalid JSON payload received. Unknown name "type" at \'{path}\': '
                       "Proto field is not repeating, cannot start list.")
            )  # fmt: skip
        elif key == "enum" and isinstance(value, list):
            for i, item in enumerate(value):
                if not isinstance(item, str):
                    at = f"{path}.enum[{i}]"
                    out.append((at, f"Invalid value at '{at}' (TYPE_STRING), {json.dumps(item)}"))
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for i, sub in enumerate(properties.values()):
            _problems(sub, f"{path}.properties[{i}].value", out)
    _problems(schema.get("items"), f"{path}.items", out)
    options = schema.get("anyOf")
    for i, sub in enumerate(options if isinstance(options, list) else []):
        _problems(sub, f"{path}.any_of[{i}]", out)


def _empty_object(schema: object) -> bool:
    """An object schema with no properties: "should be non-empty for OBJECT type"."""
    if not isinstance(schema, Mapping) or str(schema.get("type", "")).lower() != "object":
        return False
    properties = schema.get("properties")
    return not (isinstance(properties, Mapping) and properties)


def schema_refused(tools: object) -> HttpError | None:
    """Gemini's 400 for a request whose tool schemas leave its subset, or None."""
    found: list[tuple[str, str]] = []
    empty: list[str] = []
    for i, entry in enumerate(tools if isinstance(tools, list) else []):
        function = entry.get("function") if isinstance(entry, Mapping) else None
        if isinstance(function, Mapping):
            at = f"tools[0].function_declarations[{i}].parameters"
            _problems(function.get("parameters"), at, found)
            if _empty_object(function.get("parameters")):
                empty.append(at)
    if not found and empty:  # the request parsed: Gemini's own checks of what it holds
        message = "".join(
            f"* GenerateContentRequest.{at}.properties: should be non-empty for OBJECT type\n"
            for at in empty
        )
        body = {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}
        return HttpError(400, message, body=[{"error": body}])
    if not found:
        return None
    message = "\n".join(description for _, description in found)
    error: dict[str, Any] = {
        "code": 400,
        "message": message,
        "status": "INVALID_ARGUMENT",
        "details": [
            {
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [
                    {"field": field, "description": description} for field, description in found
                ],
            }
        ],
    }
    return HttpError(400, message, body=[{"error": error}])
