"""Whether Temporal's sandbox will compile the workflow modules again for every workflow.

The sandbox imports each workflow's module anew for every workflow it starts (the project's
other modules are passed through and imported once). Python loads a module from its `.pyc`
when a fresh one exists and compiles the source otherwise; under PYTHONDONTWRITEBYTECODE
(many images set it, and some dev machines) nothing writes one, so every run, debrief and
agent entity compiles `workflows/agent_run.py` and its package again: about 3.5 ms of
worker CPU per run (bench/sandbox_bytecode.py). The fix is a build step, `python -m
compileall workflows` (the Dockerfile and the Makefile's targets run it); the worker only
says so, once, at start: it does not write into a tree it was told not to write bytecode in.
Only a worker that sandboxes the project's workflows (`REACTIVE_TEMPORAL_SANDBOX_WORKFLOWS`,
`reactive_temporal/hosting/sandbox.py`) imports them per workflow, so only such a worker checks.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

logger = logging.getLogger(__name__)

_HEADER = 16
"""A .pyc's header: magic, flags, then the source's mtime and size (PEP 552)."""


def sandboxed_sources(workflows: Iterable[type]) -> list[Path]:
    """The source files the sandbox imports for these workflow classes: each class's module
    and the `__init__.py` of every package above it."""
    found: list[Path] = []
    for cls in workflows:
        module = sys.modules[cls.__module__]
        parts = cls.__module__.split(".")
        for depth in range(1, len(parts)):
            package = sys.modules.get(".".join(parts[:depth]))
            init = getattr(package, "__file__", None)
            if init is not None:
                found.append(Path(init))
        if module.__file__ is not None:
            found.append(Path(module.__file__))
    return list(dict.fromkeys(p for p in found if p.suffix == ".py"))


def has_fresh_bytecode(source: Path) -> bool:
    """Whether the import system would load `source` from bytecode instead of compiling it:
    a `.pyc` where it looks (`cache_from_source`) with this Python's magic number, and the
    source's mtime and size (or a hash-based one, which it does not recheck against mtimes)."""
    try:
        with open(importlib.util.cache_from_source(str(source)), "rb") as f:
            header = f.read(_HEADER)
        stat = source.stat()
    except (OSError, NotImplementedError, ValueError):
        return False
    if len(header) < _HEADER or header[:4] != importlib.util.MAGIC_NUMBER:
        return False
    if int.from_bytes(header[4:8], "little") & 0b1:  # hash-based (PEP 552)
        return True
    mtime = int.from_bytes(header[8:12], "little")
    size = int.from_bytes(header[12:16], "little")
    return mtime == int(stat.st_mtime) & 0xFFFFFFFF and size == stat.st_size & 0xFFFFFFFF


def compiled_per_workflow(workflows: Iterable[type]) -> list[Path]:
    """The sandboxed sources that every workflow will compile again: none while Python may
    write bytecode (the first import writes it), else those without fresh bytecode."""
    if not sys.dont_write_bytecode:
        return []
    return [p for p in sandboxed_sources(workflows) if not has_fresh_bytecode(p)]


def warn_when_compiled_per_workflow(workflows: Sequence[type]) -> None:
    """One warning at worker start when the sandbox would compile workflow code per workflow."""
    missing = compiled_per_workflow(workflows)
    if missing:
        logger.warning(
            "PYTHONDONTWRITEBYTECODE is set and %s %s no bytecode: Temporal's sandbox will "
            "compile them again for every workflow it starts (~3.5 ms of worker CPU per run). "
            "Compile them once when you build: python -m compileall %s",
            ", ".join(str(p) for p in missing),
            "has" if len(missing) == 1 else "have",
            " ".join(sorted({str(p.parent) for p in missing})),
        )
