"""The layers a reader can see, held by tests: what each layer may import, and what importing
a workflow costs.

- Workflow modules are replayed, and imported again for every workflow when a worker
  sandboxes them (`REACTIVE_TEMPORAL_SANDBOX_WORKFLOWS=true`, and the `replay` command):
  importing one must not pull in the Temporal client, openai, psycopg, cryptography or
  http.server (checked in a fresh interpreter, since this one has imported everything
  already).
- Every import arrow points down: contracts, config and tool definitions import nothing from
  `workflows/`, `activities/` or the client side; workflows and activities never import each
  other; only the top layer (worker factory, runtime, Python API, CLI) imports them.
- No two modules share a name, so "worker" or "agent" always means one file.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import reactive_temporal

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("reactive_temporal", "workflows", "activities")
ENTRY_POINTS = ("worker.py", "starter.py")
HEAVY = ("temporalio.client", "openai", "psycopg", "cryptography", "http.server")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files() -> list[Path]:
    files = [p for package in PACKAGES for p in sorted((REPO / package).rglob("*.py"))]
    return files + [REPO / name for name in ENTRY_POINTS]


MODULES = {module_name(p): p for p in source_files()}
WORKFLOW_MODULES = sorted(m for m in MODULES if m.startswith("workflows."))


def imports_in_a_fresh_interpreter(module: str) -> list[str]:
    """The heavy modules that importing `module` loads, in a new Python process."""
    code = (
        f"import json, sys; import {module}; "
        f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module", WORKFLOW_MODULES)
def test_a_workflow_module_imports_nothing_heavy(module: str):
    assert imports_in_a_fresh_interpreter(module) == []


@pytest.mark.parametrize("module", ["reactive_temporal", "reactive_temporal.contracts.names"])
def test_the_package_and_its_contracts_import_nothing_heavy(module: str):
    assert imports_in_a_fresh_interpreter(module) == []


def test_the_heavy_import_check_can_fail():
    """The check above sees a heavy import when there is one (the worker has them all)."""
    assert set(imports_in_a_fresh_interpreter("reactive_temporal.hosting.worker_factory")) >= {
        "temporalio.client",
        "openai",
        "psycopg",
    }


def test_the_command_line_imports_no_model_client_until_it_hosts_a_worker():
    """The worker's modules (the model client, MCP, the activities) were a second of every
    command's start, ~90 such starts in the bad-input table; only hosting a worker needs them."""
    heavy = imports_in_a_fresh_interpreter("reactive_temporal.cli.app")
    assert "openai" not in heavy and "temporalio.client" in heavy


def test_the_package_exports_its_public_names_lazily():
    assert sorted(reactive_temporal.__all__) == sorted(reactive_temporal._EXPORTS)
    for name in reactive_temporal.__all__:
        assert getattr(reactive_temporal, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        reactive_temporal.nope  # noqa: B018


# -- every import arrow points down -------------------------------------------------------------

FOUNDATION, EMBEDDED, WORKFLOWS, ACTIVITIES, HOSTING, API, CLI, ENTRY = (
    "foundation", "embedded", "workflows", "activities", "hosting", "api", "cli", "entry",
)  # fmt: skip
MAY_IMPORT = {
    FOUNDATION: {FOUNDATION},
    EMBEDDED: {FOUNDATION, EMBEDDED},
    WORKFLOWS: {FOUNDATION, WORKFLOWS},
    ACTIVITIES: {FOUNDATION, ACTIVITIES},
    HOSTING: {FOUNDATION, EMBEDDED, WORKFLOWS, ACTIVITIES, HOSTING},
    API: {FOUNDATION, EMBEDDED, WORKFLOWS, HOSTING, API},
    CLI: {FOUNDATION, EMBEDDED, WORKFLOWS, ACTIVITIES, HOSTING, API, CLI},
    ENTRY: {CLI},
}


def layer(module: str) -> str:
    head, _, rest = module.partition(".")
    if head in ("workflows", "activities"):
        return head
    if head in ("worker", "starter"):
        return ENTRY
    sub = rest.partition(".")[0]
    return {"embedded": EMBEDDED, "hosting": HOSTING, "api": API, "cli": CLI}.get(sub, FOUNDATION)


def _type_checking_only(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def our_imports(path: Path) -> set[str]:
    """The project modules `path` imports at run time (anywhere in it)."""
    tree = ast.parse(path.read_text())
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if _type_checking_only(node, parents):
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                submodule = f"{node.module}.{a.name}"
                found.add(submodule if submodule in MODULES else node.module)
    return {m for m in found if m in MODULES}


IMPORTS = {m: our_imports(p) for m, p in MODULES.items() if m != "reactive_temporal"}
"""The package `__init__` is exempt: it only names what it exports, lazily."""


def test_every_import_arrow_points_down():
    wrong = [
        f"{importer} ({layer(importer)}) imports {imported} ({layer(imported)})"
        for importer, imported_modules in sorted(IMPORTS.items())
        for imported in sorted(imported_modules)
        if layer(imported) not in MAY_IMPORT[layer(importer)]
    ]
    assert wrong == []


def test_the_layer_check_sees_the_imports():
    """Not vacuous: the top layer does import workflows and activities, and the entry points
    the CLI."""
    assert "workflows.agent_run" in IMPORTS["reactive_temporal.hosting.worker_factory"]
    assert "activities.llm_step" in IMPORTS["reactive_temporal.hosting.worker_factory"]
    assert "reactive_temporal.contracts.names" in IMPORTS["workflows.agent_run"]
    assert layer("reactive_temporal.contracts.run") == FOUNDATION
    assert layer("workflows.agent_run") not in MAY_IMPORT[FOUNDATION]


def test_no_two_modules_share_a_name():
    names = Counter(p.stem for p in source_files() if p.stem != "__init__")
    assert [name for name, count in names.items() if count > 1] == []


LLM_CALL = re.compile(r"completions\.create\(|\.post\(\s*\"/chat/completions\"")


def test_one_module_calls_the_llm():
    """llm_step, chat_direct and synthesize_debrief share `activities/llm_calls.py`: no other
    module builds its own call (errors, timeouts, usage and cost would drift apart)."""
    callers = sorted(name for name, path in MODULES.items() if LLM_CALL.search(path.read_text()))
    assert callers == ["activities.llm_calls"]
    for name in ("activities.llm_step", "activities.chat", "activities.debrief_synthesis"):
        assert "activities.llm_calls" in IMPORTS[name]


def imports_of_test_modules(source: str) -> list[int]:
    """The lines of `source` that import a test module (`tests.….test_*`)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            imported = [a.name for a in node.names]
        else:
            continue
        if any(
            m.startswith("tests.") and m.rsplit(".", 1)[-1].startswith("test_") for m in imported
        ):
            lines.append(node.lineno)
    return lines


def test_no_test_module_imports_another():
    """Helpers shared by tests live in helper modules (tests/processes.py, tests/support/) or
    in a conftest; a test module imported by another ties unrelated tests together."""
    wrong = {
        str(path.relative_to(REPO)): found
        for path in sorted((REPO / "tests").rglob("test_*.py"))
        if (found := imports_of_test_modules(path.read_text()))
    }
    assert wrong == {}


@pytest.mark.parametrize(
    "source",
    [
        "from tests.e2e.test_cli_run import clean_env",
        "from tests.e2e import test_cli_run",
        "import tests.faults.test_worker_faults",
    ],
)
def test_an_import_of_a_test_module_is_seen(source: str):
    assert imports_of_test_modules(source) == [1]
    assert imports_of_test_modules("from tests.processes import clean_env") == []


def test_every_public_name_is_documented():
    """What `from reactive_temporal import …` gives has a docstring, and so do the public
    methods of its classes (ruff's pydocstyle rules check the same modules at lint time)."""
    undocumented = []
    for name in reactive_temporal.__all__:
        obj = getattr(reactive_temporal, name)
        if not inspect.getdoc(obj):
            undocumented.append(name)
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                function = member.fget if isinstance(member, property) else member
                if not attr.startswith("_") and inspect.isfunction(function):
                    if not (function.__doc__ or "").strip():
                        undocumented.append(f"{name}.{attr}")
    assert undocumented == []


def test_a_worker_with_no_mcp_server_does_not_import_the_mcp_sdk():
    """Every worker opens an MCP toolbox, most with no server; the SDK is ~0.4 s of CPU to
    import (a tenth of `starter.py run` on the embedded stack), so only a server loads it."""
    code = (
        "import asyncio, sys\n"
        "from reactive_temporal.hosting import worker_factory, worker_lifecycle\n"
        "from reactive_temporal.mcp_tools import McpToolbox, parse_mcp_spec\n"
        "async def main():\n"
        "    async with McpToolbox([]) as toolbox:\n"
        "        assert toolbox.tools == []\n"
        "asyncio.run(main())\n"
        "parse_mcp_spec('fs=npx server /tmp')\n"
        "print(sorted(m for m in ('mcp', 'mcp_types') if m in sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"
