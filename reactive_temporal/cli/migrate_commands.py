"""`migrate`: apply the agents database's schema migrations, as a role that may create tables.

Workers apply missing migrations themselves when their role may; where workers connect as a
read/write-only role (docker-compose.yml, deploy/kubernetes), this runs first as the owner.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from activities.store import Store, StoreUnavailable
from reactive_temporal.cli.common import CliError, cli_settings, out, run_command


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
