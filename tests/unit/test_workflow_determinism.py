"""Workflow code makes no non-deterministic call: checked in the source of every module in
`workflows/`, on every path, not only the paths a test happens to run.

The project's workflows run outside Temporal's sandbox (`reactive_temporal/hosting/sandbox.py`),
and the sandbox only ever checked the three `workflows/agent_*` files at run time: the rule
modules are passed through it. This check covers them all. The clock is `workflow.now()`,
randomness `workflow.random()` / `workflow.uuid4()`, logging `workflow.logger`; anything that
touches the world is an activity.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"

FORBIDDEN_MODULES = frozenset(
    {
        "concurrent",
        "http",
        "httpx",
        "logging",
        "openai",
        "os",
        "pathlib",
        "psycopg",
        "random",
        "secrets",
        "shutil",
        "socket",
        "subprocess",
        "sys",
        "tempfile",
        "threading",
        "time",
        "urllib",
        "uuid",
    }
)
"""Modules whose use in workflow code is the world or the clock (`workflow.*` has the
deterministic ones)."""

CLOCK = frozenset({"now", "utcnow", "today", "fromtimestamp"})
"""`datetime.now()` and its kin (`workflow.now()` is the workflow's clock)."""

IO_BUILTINS = frozenset({"open", "input", "print", "breakpoint"})


def nondeterministic_uses(source: str) -> list[str]:
    """What in `source` is not deterministic, as `line: what`."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        elif isinstance(node, ast.Call):
            if _reads_the_clock_or_does_io(node.func):
                found.append(f"{node.lineno}: {ast.unparse(node.func)}()")
            continue
        else:
            continue
        found += [
            f"{node.lineno}: import {m}" for m in modules if m.split(".")[0] in FORBIDDEN_MODULES
        ]
    return found


def _reads_the_clock_or_does_io(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in IO_BUILTINS
    return (
        isinstance(func, ast.Attribute)
        and func.attr in CLOCK
        and ast.unparse(func.value).split(".")[-1] in ("datetime", "date")
    )


@pytest.mark.parametrize("path", sorted(WORKFLOWS.glob("*.py")), ids=lambda p: p.name)
def test_workflow_code_makes_no_nondeterministic_call(path: Path):
    assert nondeterministic_uses(path.read_text()) == []


def test_the_check_sees_the_clock_randomness_and_io():
    source = (
        "import random\n"
        "from time import monotonic\n"
        "from datetime import datetime\n"
        "def f(workflow):\n"
        "    a = datetime.now()\n"
        "    b = workflow.now()\n"
        "    open('x')\n"
        "    self.sessions.open()\n"
        "    c = datetime.date.today()\n"
    )
    assert nondeterministic_uses(source) == [
        "1: import random",
        "2: import time",
        "5: datetime.now()",
        "7: open()",
        "9: datetime.date.today()",
    ]
