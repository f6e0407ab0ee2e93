"""`check`: a preflight an operator runs before deploying workers (or while they run).

It reads the settings a `worker` would (`serving_settings`, `WorkerTarget.resolve`) and asks
Temporal, Postgres and each model endpoint whether a worker would get on with them; the
checks are `api/readiness.py`'s. Read-only: nothing is registered, migrated or written.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.table import Table

from reactive_temporal.cli.common import CliError, cli_settings, out, run_command
from reactive_temporal.cli.serve_options import ProfileOption, serving_settings, use_profile
from reactive_temporal.cli.terminal import plain
from reactive_temporal.config import Settings

if TYPE_CHECKING:  # the checks import psycopg and the worker's modules: when they run
    from reactive_temporal.hosting.preflight import Check

STYLES = {"ok": "green", "warn": "yellow", "fail": "bold red"}
DEFAULT_TIMEOUT_SECONDS = 5.0
"""Each call's deadline: a server that answers at all does so in milliseconds."""


def check(
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            metavar="SECONDS",
            min=0.1,
            max=120,
            help="How long each call to a server may take before its check fails.",
        ),
    ] = DEFAULT_TIMEOUT_SECONDS,
    profile: ProfileOption = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help='One JSON object: {"ok": …, "checks": [{name, status, detail}…]}.'
        ),
    ] = False,
) -> None:
    """A read-only preflight of what a worker started here would use (exit 1: a check failed).

    Temporal (reachable, its namespace, what the credentials may do there, search attributes,
    the workflow updates it takes, client certificate), Postgres (reachable, migrated,
    writable), each model endpoint (GET /models with its key) and whether a worker polls the
    task queue; warnings leave the exit status 0."""
    use_profile(profile)

    async def main() -> int:
        from reactive_temporal.api.readiness import run_checks

        settings, configuration = _settings()
        if settings is None:
            rows = [configuration]
        else:
            rows = [configuration, *await run_checks(settings, timeout)]
        failed = any(row.status == "fail" for row in rows)
        if as_json:  # one object, as every command's --json
            print(json.dumps({"ok": not failed, "checks": [row.as_json() for row in rows]}))
        else:
            out.print(_table(rows))
        return 1 if failed else 0

    run_command(main, as_json=as_json)


def _settings() -> tuple[Settings | None, Check]:
    """The worker's settings and the `configuration` row: the settings unreadable fail it
    and stop there; a Worker Versioning pair or a model key file a worker would refuse fail
    it and the rest is checked still."""
    from reactive_temporal.hosting.preflight import Check

    try:
        settings = serving_settings(None, None, None, None, None, None)
    except CliError as err:
        problem = str(err)
        try:
            settings = cli_settings()
        except CliError:
            return None, Check("configuration", "fail", problem)
        return settings, Check("configuration", "fail", problem)
    return settings, Check("configuration", "ok", "the settings a worker reads are valid")


def _table(rows: list[Check]) -> Table:
    """A row per check: its name, its status in colour, and what was found or is to do."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1, 0, 0), pad_edge=False)
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("detail", overflow="fold")
    for row in rows:
        table.add_row(plain(row.name), plain(row.status, STYLES[row.status]), plain(row.detail))
    return table
