"""`lessons`: what agents remember, listed with where it came from, and deleted at will.

Lessons steer later runs (as quoted notes), so an operator must be able to see each one, its
source run and when it expires, and remove any of them — one bad lesson should not steer an
agent for good. They live in Postgres; this reads the agents' database directly.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

import typer

from activities.lesson_store import LessonStore
from reactive_temporal.cli.common import (
    CliError,
    agent_name_given,
    cli_settings,
    err,
    out,
    run_command,
)
from reactive_temporal.cli.migrate_commands import agents_store
from reactive_temporal.cli.terminal import safe
from reactive_temporal.config import Settings
from reactive_temporal.contracts.debrief import StoredLesson

LIST_MAX = 100_000
"""The most lessons one listing prints (`--limit` past a bigint was a driver traceback)."""
LESSON_ID_MAX = 2**63 - 1
"""A lesson id is a Postgres bigint: an id past it names no lesson (and was a traceback)."""

lessons_app = typer.Typer(help="The lessons agents learned from their runs: list or delete.")


@asynccontextmanager
async def lesson_store(settings: Settings) -> AsyncIterator[LessonStore]:
    """The agents' lessons, in `agents_store`."""
    async with agents_store(settings) as store:
        yield LessonStore(store)


def _lesson_json(lessons: list[StoredLesson]) -> str:
    return json.dumps({"lessons": [lesson.model_dump(mode="json") for lesson in lessons]})


def _print_lessons(lessons: list[StoredLesson]) -> None:
    for lesson in lessons:
        expires = f"{lesson.expires_at:%Y-%m-%d}" if lesson.expires_at else "never"
        out.print(
            f"[bold]{lesson.id}[/] [dim]{safe(lesson.agent_id)} · run {safe(lesson.run_id)} · "
            f"{lesson.created_at:%Y-%m-%d %H:%M} · expires {expires}[/]\n  {safe(lesson.lesson)}"
        )


@lessons_app.callback(invoke_without_command=True)
def list_lessons(
    ctx: typer.Context,
    agent: Annotated[
        str | None, typer.Option(help="Only this agent's lessons.", callback=agent_name_given)
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=LIST_MAX, help="The newest this many.")] = 200,
    as_json: Annotated[bool, typer.Option("--json", help="Print them as JSON.")] = False,
) -> None:
    """List the lessons in use (newest first), with their ids and the runs that taught them."""
    if ctx.invoked_subcommand is not None:
        return

    async def main() -> int:
        async with lesson_store(cli_settings()) as store:
            lessons = await store.listed(agent, limit=limit)
        if as_json:
            print(_lesson_json(lessons))
        elif lessons:
            _print_lessons(lessons)
        else:
            who = f" for agent {safe(agent)}" if agent else ""
            err.print(f"[dim]no lessons{who}[/]")
        return 0

    run_command(main, as_json=as_json)


@lessons_app.command("delete")
def delete_lessons(
    ids: Annotated[list[int] | None, typer.Argument(metavar="ID...", help="Lesson ids.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Every lesson of --agent.")] = False,
    agent: Annotated[
        str | None, typer.Option(help="The agent, with --all.", callback=agent_name_given)
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask, even in a terminal.")] = (
        False
    ),
    as_json: Annotated[bool, typer.Option("--json", help="Print what was deleted.")] = False,
) -> None:
    """Delete lessons by id, or all of one agent's with --all --agent NAME."""

    async def main() -> int:
        if all_ and ids:
            raise CliError("name lesson ids, or --all --agent NAME, not both")
        if not all_ and not ids:
            raise CliError("name the lesson ids to delete, or --all --agent NAME")
        if all_ and not agent:
            raise CliError("--all needs --agent NAME (lessons are deleted one agent at a time)")
        what = f"every lesson of agent {agent}" if all_ else f"{len(ids or [])} lesson(s)"
        if not yes and not as_json and sys.stdin.isatty() and sys.stdout.isatty():
            if not typer.confirm(f"Delete {what}?", default=False):
                err.print("[dim]nothing deleted[/]")
                return 1
        async with lesson_store(cli_settings()) as store:
            if all_:
                assert agent is not None
                deleted = await store.delete_all(agent)
            else:
                deleted = await store.delete(ids or [])
        missing = sorted(set(ids or []) - {lesson.id for lesson in deleted})
        if as_json:
            print(json.dumps({**json.loads(_lesson_json(deleted)), "not_found": missing}))
        else:
            out.print(f"deleted {len(deleted)} lesson(s)")
            if missing:
                err.print(f"[yellow]no lesson with id {', '.join(map(str, missing))}[/]")
        return 0 if not missing else 1

    run_command(main, as_json=as_json)
