"""The row type of every adversarial table, and the register of tables."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest

HOSTILE_TABLES: dict[str, list[Hostile]] = {}
"""Every table by name, as registered by `table()`: the suite's inventory."""


@dataclass(frozen=True)
class Hostile:
    """One hostile input and the clear outcome it must get."""

    id: str
    input: Any
    """What the attacker controls: tool arguments, a server route, a CLI argv, a body…"""
    expect: str
    """A distinctive part of the clear outcome (an error message, an observation)."""
    why: str = ""
    """What it would have done before it was handled (wedged, froze, leaked, lost data)."""
    options: dict[str, Any] = field(default_factory=dict)
    """Anything else the table's runner reads (e.g. the exit status for a CLI row)."""


def table(name: str, rows: Iterable[Hostile]) -> list[Hostile]:
    """Register a table; ids must be unique across the suite (they name the test cases)."""
    rows = list(rows)
    seen = {row.id for rows_ in HOSTILE_TABLES.values() for row in rows_}
    for row in rows:
        if row.id in seen:
            raise ValueError(f"two adversarial rows are named {row.id!r}")
        seen.add(row.id)
    HOSTILE_TABLES[name] = rows
    return rows


def params(rows: Iterable[Hostile]) -> list[Any]:
    """The rows as pytest parameters named by their ids."""
    return [pytest.param(row, id=row.id) for row in rows]
