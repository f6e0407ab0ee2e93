"""The CLI's shape: one worker command behind `worker.py` and `starter.py worker`, with the
options `dev` has; a `runs` listing whose run ids survive any terminal width."""

from __future__ import annotations

import inspect
import io
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from rich.console import Console

from reactive_temporal.api.runs import RunSummary
from reactive_temporal.cli import serve_commands
from reactive_temporal.cli.app import app, worker_app
from reactive_temporal.cli.operate_commands import runs_view


def options(command: Callable[..., Any]) -> dict[str, Any]:
    return {p.name: p.annotation for p in inspect.signature(command).parameters.values()}


def test_worker_py_and_starter_worker_are_one_command():
    assert [c.callback for c in worker_app.registered_commands] == [serve_commands.worker]
    assert serve_commands.worker in [c.callback for c in app.registered_commands]


def test_worker_takes_the_worker_options_dev_takes():
    worker, dev = options(serve_commands.worker), options(serve_commands.dev)
    assert set(worker) == {
        "tools", "mcp", "mcp_env", "mcp_header",
        # operating a worker (issue 13)
        "metrics_port", "graceful_shutdown", "max_concurrent_activities",
        "max_concurrent_workflow_tasks", "deployment_name", "build_id", "profile",
        "processes",  # several worker processes here (issue 14)
    }  # fmt: skip
    del worker["processes"]  # `dev` runs its one worker in its own process
    assert worker.items() <= dev.items()  # same names, same types, same help


# -- `runs`: a run id is never cut, and the listing stays usable at 80 columns -------------------

NOW = datetime(2026, 1, 1, tzinfo=UTC)
RUNS = [
    RunSummary(
        run_id="run-billing-0123456789ab", agent="billing", status="completed",
        terminated_by="final_answer_tool", outcome="success", iterations=2, tokens=12_345,
        debrief_status="synthesized", started_at=NOW, closed_at=NOW,
        task="Summarize the three latest pull requests and list their authors " * 3,
    ),
    RunSummary(
        run_id="run-a-rather-long-agent-name-for-support-chat-0123456789ab",
        agent="a-rather-long-agent-name-for-support", status="running", terminated_by=None,
        outcome=None, iterations=None, tokens=None, debrief_status=None, started_at=NOW,
        closed_at=None, task=None,
    ),
]  # fmt: skip


def rendered(width: int) -> list[str]:
    console = Console(width=width, file=io.StringIO(), color_system=None, legacy_windows=False)
    console.print(runs_view(RUNS, width))
    assert isinstance(console.file, io.StringIO)
    return console.file.getvalue().splitlines()


@pytest.mark.parametrize("width", [80, 100, 140, 200])
def test_runs_never_cuts_a_run_id_and_fits_the_terminal(width: int):
    lines = rendered(width)
    assert all(len(line) <= width for line in lines), "\n".join(lines)
    for run in RUNS:
        assert any(run.run_id in line for line in lines), "\n".join(lines)
    assert any("final_answer_tool" in line for line in lines)  # the rest is still there


def test_runs_is_a_table_when_the_terminal_is_wide_enough():
    header = next(line for line in rendered(200) if "run" in line)
    assert "terminated by" in header and "tokens" in header
