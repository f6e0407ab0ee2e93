"""Google Gemini's rule on a request's tool schemas, answering its own 400: what the scripted
endpoint (`endpoint_rules.Endpoint.schema_subset`) checks before a script answers.

Gemini (its OpenAI-compatible endpoint, and Vertex AI's) reads each tool's `parameters` into its
`Schema` message, a select subset of OpenAPI 3.0, and refuses what does not fit in the words of
the protobuf JSON parser: a field the message lacks ("Unknown name \"additionalProperties\" at
'tools[0].function_declarations[0].parameters': Cannot find field."), a `type` list ("Proto
field is not repeating, cannot start list."), an `enum` value that is not a string. Every error
of the request in one message, one line each, the body a one-element list.

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


def schema_refused(tools: object) -> HttpError | None:
    """Gemini's 400 for a request whose tool schemas leave its subset, or None."""
    found: list[tuple[str, str]] = []
    for i, entry in enumerate(tools if isinstance(tools, list) else []):
        function = entry.get("function") if isinstance(entry, Mapping) else None
        if isinstance(function, Mapping):
            _problems(
                function.get("parameters"),
                f"tools[0].function_declarations[{i}].parameters",
                found,
            )
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
