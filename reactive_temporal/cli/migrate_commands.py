"""The agents database's upkeep: `migrate` applies its schema migrations, as a role that may
create tables; `prune` deletes what it keeps of runs long over.

Workers apply missing migrations themselves when their role may; where workers connect as a
read/write-only role (docker-compose.yml, deploy/kubernetes), this runs first as the owner.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Annotated

import typer

from activities.retention import PRUNED_TABLES, prune
from activities.store import Store, StoreUnavailable
from reactive_temporal.cli.common import CliError, cli_runtime, cli_settings, out, run_command
from reactive_temporal.config import Settings
from reactive_temporal.embedded.stack import read_published_stack


def migrate(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print what was applied as one JSON object.")
    ] = False,
) -> None:
    """Apply the schema migrations DATABASE_URL's database lacks (idempotent)."""

    async def main() -> int:
        settings = cli_settings()
        if settings.database_url is None:
            raise CliError(
                "migrate needs DATABASE_URL (the embedded Postgres is migrated by its worker)"
            )
        try:
            store = await Store.open(settings.database_url, migrate=False)
        except StoreUnavailable as e:
            raise CliError(str(e)) from e
        try:
            missing = await store.missing_migrations()
            await store.migrate()
        except StoreUnavailable as e:
            raise CliError(str(e)) from e
        finally:
            await store.close()
        if as_json:
            print(json.dumps({"applied": missing}))
        elif missing:
            out.print(f"applied schema migrations {', '.join(map(str, missing))}")
        else:
            out.print("schema up to date")
        return 0

    run_command(main, as_json=as_json)


@asynccontextmanager
async def agents_store(settings: Settings) -> AsyncIterator[Store]:
    """The agents' database: DATABASE_URL, else the running `dev` stack's, else the embedded
    one (started for the command, as `run` does on a fresh clone)."""
    published = read_published_stack(settings.data_dir.resolve())
    url = settings.database_url or (published.database_url if published else None)
    runtime = None
    if url is None:
        runtime = await cli_runtime(settings, worker=False)
        assert runtime.stack is not None
        url = runtime.stack.database_url
    try:
        try:
            store = await Store.open(url, migrate=False)
        except StoreUnavailable as e:
            raise CliError(str(e)) from e
        try:
            yield store
        finally:
            await store.close()
    finally:
        if runtime is not None:
            await runtime.close()


def prune_command(
    older_than: Annotated[
        float,
        typer.Option(
            "--older-than", min=1, help="Days since anything of a run was written (at least 1)."
        ),
    ] = 30,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the rows deleted by table as one JSON object.")
    ] = False,
) -> None:
    """Delete the live output and transcripts of runs idle for --older-than days, and expired
    lessons. Debriefs, live lessons and chat sessions stay; a pruned run cannot be rerun."""

    async def main() -> int:
        async with agents_store(cli_settings()) as store:
            if not as_json:
                out.print(f"pruning runs idle for {older_than:g} days: {', '.join(PRUNED_TABLES)}…")
            try:
                deleted = await prune(store, timedelta(days=older_than))
            except StoreUnavailable as e:
                raise CliError(str(e)) from e
        if as_json:
            print(json.dumps({"deleted": deleted}))
        else:
            out.print(
                ", ".join(f"{table}: {rows:,} rows deleted" for table, rows in deleted.items())
            )
        return 0

    run_command(main, as_json=as_json)
