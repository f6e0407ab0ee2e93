"""What the fault tests share: the workflow tests' in-process worker harness, and a slow
offline model."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reactive_temporal.embedded.scripted_llm import Reply, Step, demo_responder
from tests.workflow.conftest import harness  # noqa: F401 — a fixture, used by name


def slow_demo(delay: float) -> Callable[[dict[str, Any]], Step]:
    """The offline demo model (stateless: a retried request gets the same answer), slowed."""

    def respond(request: dict[str, Any]) -> Step:
        step = demo_responder(request)
        if isinstance(step, Reply):
            step.delay = delay
        return step

    return respond
