"""Some of the project's modules as a git revision had them, importable beside this tree's:
for the benches that time a pure function before and after in one process, alternating."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def modules_at(
    revision: str, into: Path, package: str, names: tuple[str, ...], *, every: bool = False
) -> None:
    """`reactive_temporal/<name>.py` of `revision` for each of `names` it has (each of them,
    with `every`), written into `into/package/`, their imports of each other pointed there
    (everything else they import is this tree's)."""
    (into / package).mkdir()
    (into / package / "__init__.py").write_text("")
    ours = re.compile(rf"\breactive_temporal\.({'|'.join(map(re.escape, names))})\b")
    for name in names:
        shown = subprocess.run(
            ["git", "show", f"{revision}:reactive_temporal/{name}.py"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=every,
        )
        if shown.returncode == 0:  # an older revision has fewer
            (into / package / f"{name}.py").write_text(ours.sub(rf"{package}.\1", shown.stdout))
    sys.path.insert(0, str(into))


def module_at(
    revision: str, into: Path, package: str, names: tuple[str, ...], *, every: bool = False
) -> ModuleType:
    """`names[0]` as `revision` had it (with the rest of `names` as it had them)."""
    modules_at(revision, into, package, names, every=every)
    return importlib.import_module(f"{package}.{names[0]}")
