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
from collections.abc import Callable
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


PER_TASK = frozenset({"now", "info"})
"""`workflow.now()` and `workflow.info()` (history length, continue-as-new suggested): what
Temporal gives each task, which a wait condition must not read (README, "Changing workflow
code")."""

LEGACY_CONDITIONS = frozenset({"_due"})
"""Conditions that read those figures only for runs begun before that rule, as their
histories were made (`workflows/entity_lifetime.py`)."""


def _called(node: ast.AST) -> set[str]:
    """The names `node` calls or refers to as attributes (`f()`, `self.f`, `self.f()`)."""
    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute):
            names.add(sub.attr)
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
            names.add(sub.func.id)
    return names


def _functions(trees: list[ast.Module]) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [
        f
        for tree in trees
        for f in ast.walk(tree)
        if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


def _doing(trees: list[ast.Module], does: Callable[[ast.AST], bool]) -> set[str]:
    """The names of the functions that do it, or call (by name) one that does."""
    functions = _functions(trees)
    doers = {f.name for f in functions if does(f)}
    while grown := {f.name for f in functions if f.name not in doers and _called(f) & doers}:
        doers |= grown
    return doers


def workflow_sources() -> list[str]:
    return [path.read_text() for path in sorted(WORKFLOWS.glob("*.py"))]


def _reads_per_task(node: ast.AST) -> bool:
    return any(
        isinstance(sub, ast.Call)
        and isinstance(sub.func, ast.Attribute)
        and sub.func.attr in PER_TASK
        and ast.unparse(sub.func.value) == "workflow"
        for sub in ast.walk(node)
    )


def conditions_reading_the_task(sources: list[str]) -> list[str]:
    """`wait_condition` calls whose condition reads a task's figures, directly or through the
    functions it calls (by name, across every module given)."""
    trees = [ast.parse(source) for source in sources]
    readers = _doing(trees, _reads_per_task)
    found = []
    for tree in trees:
        for call in ast.walk(tree):
            if not (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "wait_condition"
                and call.args
            ):
                continue
            condition = call.args[0]
            if _reads_per_task(condition) or (_called(condition) & readers) - LEGACY_CONDITIONS:
                found.append(f"{call.lineno}: {ast.unparse(condition)}")
    return found


def test_no_wait_condition_reads_the_task_s_figures():
    assert conditions_reading_the_task(workflow_sources()) == []


def test_the_condition_check_sees_the_clock_and_info_through_methods():
    source = (
        "class W:\n"
        "    def _late(self):\n"
        "        return workflow.now() > self.deadline\n"
        "    def _long(self):\n"
        "        return self._length() > 10\n"
        "    def _length(self):\n"
        "        return workflow.info().get_current_history_length()\n"
        "    async def run(self):\n"
        "        await workflow.wait_condition(lambda: workflow.now() > self.deadline)\n"
        "        await workflow.wait_condition(self._late)\n"
        "        await workflow.wait_condition(lambda: self.done or self._long())\n"
        "        await workflow.wait_condition(lambda: self.done)\n"
        "        await workflow.wait_condition(workflow.all_handlers_finished)\n"
    )
    assert conditions_reading_the_task([source]) == [
        "9: lambda: workflow.now() > self.deadline",
        "10: self._late",
        "11: lambda: self.done or self._long()",
    ]


MUTATING_METHODS = frozenset(
    {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "add"}
)


def _roots_at_self(node: ast.expr) -> bool:
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return isinstance(node, ast.Name) and node.id == "self"


def _mutates_self(function: ast.AST) -> bool:
    for node in ast.walk(function):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in MUTATING_METHODS
        ):
            targets = [node.func.value]
        if any(isinstance(t, ast.Attribute | ast.Subscript) and _roots_at_self(t) for t in targets):
            return True
    return False


def _live_only(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A query or an update's validator: code that runs live and never on replay."""
    for decorator in function.decorator_list:
        called = decorator.func if isinstance(decorator, ast.Call) else decorator
        text = ast.unparse(called)
        if text == "workflow.query" or text.endswith(".validator"):
            return True
    return False


def live_only_code_changing_state(sources: list[str]) -> list[str]:
    """Queries and validators that change the workflow's state, directly or through the
    functions they call (by name, across every module given): a replay never runs them, so
    what they change would differ between a run and its replay."""
    trees = [ast.parse(source) for source in sources]
    mutators = _doing(trees, _mutates_self)
    return [
        f"{f.lineno}: {f.name}"
        for f in _functions(trees)
        if _live_only(f) and (_mutates_self(f) or _called(f) & mutators)
    ]


def test_queries_and_validators_leave_the_state_alone():
    assert live_only_code_changing_state(workflow_sources()) == []


def test_the_state_check_sees_assignments_and_mutations_through_methods():
    source = (
        "class W:\n"
        "    def _count(self):\n"
        "        self.seen += 1\n"
        "    def _read(self):\n"
        "        return list(self.items)\n"
        "    @workflow.query(name='a')\n"
        "    def a(self):\n"
        "        self.items.append(1)\n"
        "    @workflow.query\n"
        "    def b(self):\n"
        "        return self._read()\n"
        "    @chat.validator\n"
        "    def c(self, request):\n"
        "        self._count()\n"
        "    @chat.validator\n"
        "    def d(self, request):\n"
        "        local = []\n"
        "        local.append(request)\n"
        "        self.state.sessions[request] = local\n"
    )
    assert live_only_code_changing_state([source]) == ["7: a", "13: c", "16: d"]
