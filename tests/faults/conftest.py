"""The fault tests use the workflow tests' in-process worker harness too."""

from tests.workflow.conftest import harness  # noqa: F401 — a fixture, used by name
