"""The agents database's upkeep: `migrate` applies its schema migrations, as a role that may
create tables; `prune` deletes what it keeps of runs long over (never of a run still going,
which Temporal tells).

Workers apply missing migrations themselves when their role may; where workers connect as a
read/write-only role (docker-compose.yml, deploy/kubernetes), this runs first as the owner.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Annotated

import psycopg
import typer
from temporalio.service import RPCError

from activities.migrations import MIGRATIONS
from activities.retention import PRUNED_TABLES, prune
from activities.store import Store, StoreUnavailable
from reactive_temporal.api.approval_listing import runs_still_going
from reactive_temporal.cli.common import CliError, cli_runtime, cli_settings, out, run_command
from reactive_temporal.config import Settings
from reactive_temporal.database_settings import conninfo_now
from reactive_temporal.embedded.orphans import EMBEDDED_TEMPORAL_DB
from reactive_temporal.embedded.stack import read_published_stack
from reactive_temporal.hosting.runtime import Runtime


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
                "migrate needs DATABASE_URL or DATABASE_URL_FILE (the embedded Postgres is "
                "migrated by its worker)"
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
async def agents_store(settings: Settings, runtime: Runtime | None = None) -> AsyncIterator[Store]:
    """The agents' database: DATABASE_URL, else the running `dev` stack's, else the embedded
    one (started for the command, as `run` does on a fresh clone); `runtime`'s when the
    command has one. A database never migrated is said so, in one line."""
    published = read_published_stack(settings.data_dir.resolve())
    url = settings.database_url or (published.database_url if published else None)
    opened = None
    if url is None:
        if runtime is None:
            runtime = opened = await cli_runtime(settings, worker=False)
        url = conninfo_now(runtime.database_url) if runtime.database_url else None
    if url is None:
        raise CliError("no database: set DATABASE_URL")
    try:
        try:
            # the embedded Postgres is the project's own: brought up to date here as its
            # worker would, or `lessons` on a fresh clone said to run `migrate`, which
            # refuses it (no DATABASE_URL)
            store = await Store.open(url, migrate=settings.database_url is None)
        except StoreUnavailable as e:
            raise CliError(str(e)) from e
        try:
            yield store
        except psycopg.errors.UndefinedTable as e:  # a database not migrated: a traceback
            raise CliError(await _not_migrated(store, e)) from e
        finally:
            await store.close()
    finally:
        if opened is not None:
            await opened.close()


async def _not_migrated(store: Store, error: psycopg.errors.UndefinedTable) -> str:
    """A command's table is missing: the database was never migrated, or not since an
    upgrade added the table (`costs` on a database that has runs and no `chat_usage`)."""
    missing = await store.missing_migrations()
    if len(missing) < len(MIGRATIONS):
        said = f"lacks schema migrations {', '.join(map(str, missing))}"
    else:
        said = "has none of the agents' tables"
    return (
        f"the database {said} ({error.diag.message_primary}): run `python starter.py migrate` first"
    )


def _no_temporal_of_its_runs(settings: Settings) -> str | None:
    """Why the Temporal prune would ask cannot know DATABASE_URL's runs, or None.

    With DATABASE_URL and no TEMPORAL_ADDRESS (nor a profile), prune asks the embedded
    Temporal: right where runs ran on it, and its file in the data directory says they may
    have. Without that file it would be started new, knowing no run, so every run parked
    on an approval past --older-than would lose its transcript: a cron job or a container
    given the production database and not the cluster.
    """
    if settings.database_url is None or settings.temporal_address is not None:
        return None
    data_dir = settings.data_dir.resolve()
    if read_published_stack(data_dir) is not None or (data_dir / EMBEDDED_TEMPORAL_DB).exists():
        return None
    return (
        "DATABASE_URL is set but not TEMPORAL_ADDRESS, and no embedded Temporal ever ran in "
        f"{data_dir}: a new one would know none of the database's runs. Set TEMPORAL_ADDRESS "
        "(or --profile) to the Temporal the runs are on"
    )


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
    lessons. Runs still going (Temporal says which) keep theirs, however long they have waited;
    debriefs, live lessons and chat sessions stay; a pruned run cannot be rerun."""

    async def main() -> int:
        settings = cli_settings()
        nothing = "prune asks Temporal which runs are still going: nothing was deleted"
        if (why := _no_temporal_of_its_runs(settings)) is not None:
            raise CliError(f"{why} ({nothing})")
        try:
            runtime = await cli_runtime(settings, worker=False)
        except CliError as e:
            raise CliError(f"{e} ({nothing})") from e
        try:
            temporal = runtime.client.service_client.config.target_host
            try:
                going = await runs_still_going(runtime.client)
            except RPCError as e:
                raise CliError(
                    f"cannot list the runs going at {temporal}: {e.message} ({nothing})"
                ) from e
            async with agents_store(settings, runtime) as store:
                if not as_json:
                    out.print(
                        f"pruning runs idle for {older_than:g} days: {', '.join(PRUNED_TABLES)};"
                        f" keeping the {len(going):,} still going at {temporal}…"
                    )
                try:
                    deleted = await prune(store, timedelta(days=older_than), keep=going)
                except StoreUnavailable as e:
                    raise CliError(str(e)) from e
                except psycopg.errors.UndefinedTable as e:  # a database never migrated
                    raise CliError(
                        f"the database has none of the agents' tables ({e.diag.message_primary}):"
                        " run `python starter.py migrate` first (nothing was deleted)"
                    ) from e
        finally:
            await runtime.close()
        if as_json:
            print(json.dumps({"deleted": deleted, "kept_going": len(going)}))
        else:
            out.print(
                ", ".join(f"{table}: {rows:,} rows deleted" for table, rows in deleted.items())
            )
        return 0

    run_command(main, as_json=as_json)
