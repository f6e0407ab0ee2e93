"""The tools one worker can run, by name, and the `tools[]` entries a model is offered.

A model sees each tool under its wire name (OpenAI allows only `[A-Za-z0-9_-]{1,64}`), and
`final-answer`, which no worker runs, as the meta-tool's schema. The tools themselves are
`tools.py`'s (`@tool`).
"""

from __future__ import annotations

import copy
import importlib
import re
from collections.abc import Iterable
from typing import Any

from reactive_temporal.contracts.run import FINAL_ANSWER_TOOL
from reactive_temporal.prompts import FINAL_ANSWER_FORMAT_DESCRIPTION, FINAL_ANSWER_TOOL_DESCRIPTION
from reactive_temporal.tools import Tool

FINAL_ANSWER_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": FINAL_ANSWER_TOOL,
        "description": FINAL_ANSWER_TOOL_DESCRIPTION,
        "parameters": {
            "type": "object",
            "properties": {
                "output": {"type": "string", "description": "The actual deliverable."},
                "format": {
                    "type": "string",
                    "description": FINAL_ANSWER_FORMAT_DESCRIPTION,
                },
                "summary": {
                    "type": "string",
                    "description": "Brief self-report of what was accomplished (2-3 sentences)",
                },
                "confidence": {"type": "string", "description": "'high', 'medium', or 'low'"},
            },
            "required": ["output", "format", "summary"],
        },
    },
}


_WIRE_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def wire_name(name: str) -> str:
    """The name a model sees for a tool.

    OpenAI allows only `[A-Za-z0-9_-]{1,64}` in function names, so an MCP tool
    `github/list_commits` goes over the wire as `github__list_commits`.
    """
    return _WIRE_UNSAFE.sub("__", name)[:64]


class ToolRegistry:
    """The tools one worker can run, by name."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        """A registry holding these tools (names must be unique)."""
        self._tools: dict[str, Tool] = {}
        self._entries: dict[str, dict[str, Any]] = {}
        """Each tool's `tools[]` entry under its wire name, made once: pydantic builds a
        JSON schema anew on every call, 0.6 ms per LLM step for the built-in tools."""
        for t in tools:
            self.add(t)

    def add(self, t: Tool) -> None:
        """Register a tool; ValueError when another has its name or its wire name.

        The wire name is the one the model sees (`wire_name`). Two tools one wire name apart
        (`shop/buy` from an MCP server and a module's `shop__buy`, or two MCP names alike in
        their first 64 characters) were offered to the model twice under one name, and a call
        to it ran whichever was registered last: a call meant for a tool that waits for
        approval could run one that does not.
        """
        if t.name in self._tools and self._tools[t.name] is not t:
            raise ValueError(f"two tools are named {t.name!r}; tool names must be unique")
        wire = wire_name(t.name)
        for other in self._tools.values():
            if other.name != t.name and wire_name(other.name) == wire:
                raise ValueError(
                    f"tools {other.name!r} and {t.name!r} would be offered to the model under "
                    f"one name, {wire!r} (only A-Z, a-z, 0-9, '_' and '-', 64 at most); "
                    "rename one"
                )
        self._tools[t.name] = t

    def get(self, name: str) -> Tool | None:
        """The tool of this name, None when there is none."""
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        """Every tool's name, in registration order."""
        return list(self._tools)

    @property
    def approval_names(self) -> list[str]:
        """The tools whose every call waits for approval (`@tool(approve=True)`)."""
        return [name for name, t in self._tools.items() if t.approve]

    def schemas(self, names: Iterable[str]) -> list[dict[str, Any]]:
        """The `tools[]` entries for these names, in order and under their wire names.

        `final-answer` gets the meta-tool's schema.
        """
        out = []
        for n in names:
            if n == FINAL_ANSWER_TOOL:
                out.append(FINAL_ANSWER_SCHEMA)
            elif (t := self._tools.get(n)) is not None:
                entry = self._entries.get(n)
                if entry is None:
                    entry = t.schema()
                    entry["function"] = {**entry["function"], "name": wire_name(n)}
                    self._entries[n] = entry
                out.append(copy.deepcopy(entry))  # the caller's to change
        return out

    def load_module(self, module_name: str) -> list[str]:
        """Import a module and register every Tool it defines; returns their names."""
        try:
            module = importlib.import_module(module_name)
        except ImportError as err:
            raise ValueError(f"cannot import tools module {module_name!r}: {err}") from err
        found = [v for v in vars(module).values() if isinstance(v, Tool)]
        if not found:
            raise ValueError(f"tools module {module_name!r} defines no @tool functions")
        for t in found:
            self.add(t)
        return [t.name for t in found]
