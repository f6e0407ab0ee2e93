"""The suite's inventory: every table belongs to a surface, and the surfaces the issue names
(LLM replies, tool arguments, the operator signal, chat updates, the CLI, MCP output, HTTP
responses) each hold hostile rows, at least 40 in all.

`python -m tests.adversarial.test_inventory` prints the count per surface and table.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections import Counter

import tests.adversarial as suite
from tests.adversarial.cases import HOSTILE_TABLES

SURFACES = {
    "llm-replies": "LLM replies",
    "calculator": "tool arguments",
    "http_get-ssrf": "tool arguments",
    "operator-signal": "operator signal",
    "chat": "chat updates",
    "terminal": "CLI",
    "mcp-output": "MCP output",
    "http-responses": "HTTP responses",
    "codec-server": "codec server",
    "python-api": "Python API",
    "encryption-required": "plaintext without keys",
}
ISSUE_SURFACES = ("LLM replies", "tool arguments", "operator signal", "chat updates", "CLI",
                  "MCP output", "HTTP responses")  # fmt: skip


def load_tables() -> dict[str, int]:
    """Import every module of the suite (they register their tables); rows per table."""
    for module in pkgutil.iter_modules(suite.__path__):
        if module.name.startswith("test_"):
            importlib.import_module(f"{suite.__name__}.{module.name}")
    return {name: len(rows) for name, rows in HOSTILE_TABLES.items()}


def per_surface(tables: dict[str, int]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for name, rows in tables.items():
        counts[SURFACES[name]] += rows
    return counts


def test_every_table_has_a_surface_and_the_issues_surfaces_hold_forty_rows():
    tables = load_tables()
    assert sorted(set(tables) - set(SURFACES)) == []  # a new table: name its surface above
    assert sorted(set(SURFACES) - set(tables)) == []
    counts = per_surface(tables)
    assert all(counts[surface] > 0 for surface in ISSUE_SURFACES), counts
    assert sum(counts[surface] for surface in ISSUE_SURFACES) >= 40, counts


if __name__ == "__main__":
    tables = load_tables()
    for surface, rows in sorted(per_surface(tables).items(), key=lambda kv: -kv[1]):
        names = ", ".join(f"{n} {c}" for n, c in tables.items() if SURFACES[n] == surface)
        print(f"{surface:24} {rows:4}   ({names})")
    print(f"{'total':24} {sum(tables.values()):4}")
