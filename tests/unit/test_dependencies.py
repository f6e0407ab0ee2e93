"""Reproducible installs: bounded dependencies, lock files that pin them, installs from them.

pyproject.toml says which versions may work (a lower bound the code needs, an upper bound at the
next release that may break it); requirements.lock (the worker image: runtime + `otel`) and
requirements-test.lock (`make setup`, CI: + `test`) say which versions do, with hashes.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
SELF = canonicalize_name(PROJECT["name"])
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def requirements(*extras: str) -> list[Requirement]:
    """The project's requirements with the given extras, self-references expanded."""
    found = [Requirement(text) for text in PROJECT["dependencies"]]
    pending, seen = list(extras), set()
    while pending:
        extra = pending.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for text in PROJECT["optional-dependencies"][extra]:
            req = Requirement(text)
            if canonicalize_name(req.name) == SELF:
                pending += sorted(req.extras)
            else:
                found.append(req)
    return found


def lock(name: str) -> dict[str, tuple[Version, int]]:
    """package → (pinned version, number of hashes) from a pip-compile style lock file."""
    pins: dict[str, tuple[Version, int]] = {}
    current: str | None = None
    for line in (ROOT / name).read_text().splitlines():
        match = _PIN.match(line)
        if match:
            current = canonicalize_name(match.group(1))
            pins[current] = (Version(match.group(2)), 0)
        elif line.strip().startswith("--hash=sha256:") and current is not None:
            version, hashes = pins[current]
            pins[current] = (version, hashes + 1)
        elif not line.startswith(" "):
            current = None
    return pins


ALL_REQUIREMENTS = requirements(*PROJECT["optional-dependencies"])


@pytest.mark.parametrize("req", ALL_REQUIREMENTS, ids=str)
def test_every_dependency_has_a_lower_and_an_upper_bound(req):
    operators = {spec.operator for spec in req.specifier}
    assert operators & {">=", "~=", "=="}, f"{req} has no lower bound"
    assert operators & {"<", "~=", "=="}, f"{req} has no upper bound: a new major could break it"


def test_mcp_bound_provides_what_the_code_imports():
    # mcp_types, mcp.server.mcpserver and streamable_http_client first shipped in mcp 2.0;
    # streamable_http_client's max_sse_event_size (mcp_http's cap on an SSE event) in 2.3.
    (mcp,) = [r for r in ALL_REQUIREMENTS if r.name == "mcp"]
    assert not mcp.specifier.contains("2.2.0")
    assert mcp.specifier.contains("2.3.0")
    # mcp_http builds the httpx2 client the SDK takes: a direct dependency, declared
    assert [r.name for r in ALL_REQUIREMENTS].count("httpx2") == 1


@pytest.mark.parametrize(
    ("lock_file", "extras"),
    [("requirements.lock", ("otel",)), ("requirements-test.lock", ("otel", "test"))],
)
def test_lock_pins_every_requirement_inside_its_bounds_with_hashes(lock_file, extras):
    pins = lock(lock_file)
    assert pins, f"{lock_file} pins nothing"
    for req in requirements(*extras):
        name = canonicalize_name(req.name)
        assert name in pins, f"{lock_file} does not pin {req.name}"
        version, hashes = pins[name]
        assert req.specifier.contains(version, prereleases=True), (
            f"{lock_file} pins {req.name}=={version}, outside {req.specifier}: re-run `make lock`"
        )
    unhashed = [name for name, (_, hashes) in pins.items() if hashes == 0]
    assert not unhashed, f"{lock_file}: no hashes for {unhashed}"


def test_the_test_lock_agrees_with_the_runtime_lock():
    runtime, test = lock("requirements.lock"), lock("requirements-test.lock")
    differing = {n: (v, test[n][0]) for n, (v, _) in runtime.items() if test[n][0] != v}
    assert not differing, f"the two locks pin different versions: {differing}"


def test_setup_ci_and_the_image_install_from_the_locks():
    makefile = (ROOT / "Makefile").read_text()
    assert "pip install --quiet --require-hashes -r requirements-test.lock" in makefile
    assert "pip install --quiet --no-deps -e ." in makefile
    assert re.search(r"pip install[^\n]*-e '?\.\[", makefile) is None, "setup must not resolve"
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "pip install --require-hashes -r requirements.lock" in dockerfile
    assert "pip install --no-deps ." in dockerfile
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"-m venv \"\$fresh\"", ci)
    assert '"$fresh/bin/pip" install --quiet --require-hashes -r requirements.lock' in ci
    assert '"$fresh/bin/pip" check' in ci
