"""The CLI's shape: one worker command behind `worker.py` and `starter.py worker`, with the
options `dev` has."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from reactive_temporal.cli import serve_commands
from reactive_temporal.cli.app import app, worker_app


def options(command: Callable[..., Any]) -> dict[str, Any]:
    return {p.name: p.annotation for p in inspect.signature(command).parameters.values()}


def test_worker_py_and_starter_worker_are_one_command():
    assert [c.callback for c in worker_app.registered_commands] == [serve_commands.worker]
    assert serve_commands.worker in [c.callback for c in app.registered_commands]


def test_worker_takes_the_worker_options_dev_takes():
    worker, dev = options(serve_commands.worker), options(serve_commands.dev)
    assert set(worker) == {"tools", "mcp", "mcp_env"}
    assert worker.items() <= dev.items()  # same names, same types, same help
