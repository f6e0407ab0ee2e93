"""Whether the sandbox compiles workflow code per workflow (hosting/bytecode.py)."""

from __future__ import annotations

import importlib.util
import logging
import os
import py_compile
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from reactive_temporal.hosting.bytecode import (
    compiled_per_workflow,
    has_fresh_bytecode,
    sandboxed_sources,
    warn_when_compiled_per_workflow,
)
from reactive_temporal.hosting.worker_factory import WORKFLOWS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def workflow_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[type]:
    """A workflow-like class in a package of its own, imported without writing bytecode."""
    package = tmp_path / "bytecode_probe"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "flow.py").write_text("class ProbeWorkflow:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    from bytecode_probe.flow import ProbeWorkflow  # type: ignore[import-not-found]

    yield ProbeWorkflow
    for name in ("bytecode_probe.flow", "bytecode_probe"):
        sys.modules.pop(name, None)


def test_the_sources_are_each_workflows_module_and_its_packages():
    sources = sandboxed_sources(WORKFLOWS)
    assert ROOT / "workflows" / "__init__.py" in sources
    assert ROOT / "workflows" / "agent_run.py" in sources
    assert len(sources) == len(set(sources))


def test_bytecode_is_fresh_only_for_the_source_it_was_compiled_from(workflow_package: type):
    init, flow = sandboxed_sources([workflow_package])
    assert flow.name == "flow.py" and init.name == "__init__.py"
    assert not has_fresh_bytecode(flow)  # nothing wrote it

    py_compile.compile(str(flow), doraise=True)
    assert has_fresh_bytecode(flow)

    flow.write_text("class ProbeWorkflow:\n    changed = True\n")  # another size
    assert not has_fresh_bytecode(flow)
    py_compile.compile(str(flow), doraise=True)
    stat = flow.stat()
    os.utime(flow, (stat.st_atime, stat.st_mtime + 10))  # same size, another mtime
    assert not has_fresh_bytecode(flow)

    hashed = py_compile.PycInvalidationMode.CHECKED_HASH
    py_compile.compile(str(flow), doraise=True, invalidation_mode=hashed)
    assert has_fresh_bytecode(flow)

    Path(importlib.util.cache_from_source(str(flow))).write_bytes(b"\x00" * 16)  # not a .pyc
    assert not has_fresh_bytecode(flow)


def test_only_sources_without_bytecode_are_compiled_per_workflow(
    workflow_package: type, monkeypatch: pytest.MonkeyPatch
):
    init, flow = sandboxed_sources([workflow_package])
    py_compile.compile(str(init), doraise=True)
    assert compiled_per_workflow([workflow_package]) == [flow]
    # Python that may write bytecode writes it at the first import: nothing to say
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert compiled_per_workflow([workflow_package]) == []


def test_the_worker_names_the_files_and_the_fix_once(
    workflow_package: type, caplog: pytest.LogCaptureFixture
):
    with caplog.at_level(logging.WARNING, logger="reactive_temporal.hosting.bytecode"):
        warn_when_compiled_per_workflow([workflow_package])
    (record,) = caplog.records
    message = record.getMessage()
    assert "PYTHONDONTWRITEBYTECODE" in message and "flow.py" in message
    assert re.search(r"python -m compileall \S*bytecode_probe$", message)

    caplog.clear()
    for source in sandboxed_sources([workflow_package]):
        py_compile.compile(str(source), doraise=True)
    with caplog.at_level(logging.WARNING, logger="reactive_temporal.hosting.bytecode"):
        warn_when_compiled_per_workflow([workflow_package])
    assert caplog.records == []


def test_make_setup_compiles_the_workflow_modules():
    """`make demo`, `dev` and `test` all pass through `setup`, which leaves the workflow
    modules compiled (as the Dockerfile does for the image)."""
    makefile = (ROOT / "Makefile").read_text()
    setup = re.search(r"^setup:.*\n((?:\t.*\n)*)", makefile, re.MULTILINE)
    assert setup is not None
    assert "-m compileall" in setup.group(1) and "workflows" in setup.group(1)
    for target in ("demo", "dev", "lint"):
        assert re.search(rf"^{target}: .*\bsetup\b", makefile, re.MULTILINE), target
