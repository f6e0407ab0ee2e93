"""What every CLI command shares: consoles, errors, exit handling, settings, agents."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable

import typer
from pydantic import ValidationError
from pydantic_settings import SettingsError
from rich.console import Console
from temporalio.service import RPCError

from reactive_temporal.access import TemporalAccessDenied
from reactive_temporal.api.agents import Agent
from reactive_temporal.api.builder import AgentBuilder
from reactive_temporal.api.workflow_ids import agent_name_problem, workflow_id_problem
from reactive_temporal.cli.terminal import safe
from reactive_temporal.codec import unreadable_payload
from reactive_temporal.config import (
    Settings,
    environment_variable,
    load_settings,
    settings_error_message,
)
from reactive_temporal.connection import ConnectionConfigError
from reactive_temporal.embedded.dev_server import StackError
from reactive_temporal.errors import causes, describe_validation_error
from reactive_temporal.hosting.runtime import Runtime, open_runtime

out = Console()
err = Console(stderr=True)

OFFLINE_NOTICE = (
    "Running on the [bold]offline scripted model[/] (no OPENAI_BASE_URL or OPENAI_API_KEY set): "
    "it does arithmetic and tells the time, nothing more.\n"
    "For a real model: [cyan]export OPENAI_API_KEY=sk-…[/] (OpenAI) or "
    "[cyan]export OPENAI_BASE_URL=http://localhost:11434/v1 AGENT_MODEL=llama3.1[/] (Ollama)."
)

OFFLINE_DEV_NOTICE = (
    "Running on the [bold]offline scripted model[/]: the [cyan]starter.py dev[/] stack running "
    "here was started without OPENAI_BASE_URL or OPENAI_API_KEY, and its worker answers every "
    "run. Restart [cyan]dev[/] with them set for a real model."
)


class CliError(Exception):
    """A failure to report in one line, with an exit status."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def run_id_given(value: str | None) -> str | None:
    """A run id named on the command line, refused as a usage error (exit 2, before any
    server is asked) when no run can have it."""
    if value is not None and (problem := workflow_id_problem(value)) is not None:
        raise typer.BadParameter(problem)
    return value


def workflow_id_given(value: str | None) -> str | None:
    """`run_id_given` for a command that takes any workflow's id."""
    if value is not None and (problem := workflow_id_problem(value, "a workflow id")):
        raise typer.BadParameter(problem)
    return value


def agent_name_given(value: str | None) -> str | None:
    """An agent name to filter by, refused as a usage error when no agent can have it."""
    if value is not None and (problem := agent_name_problem(value)) is not None:
        raise typer.BadParameter(problem)
    return value


def path_given(value: str | None) -> str | None:
    """A file name named on the command line, refused as a usage error when it is empty.

    Typed as a Path, "" became "." (the current directory): `replay --file ""` said "cannot
    read history file .: Is a directory", and `export -o ""` fetched the history, then
    could not write it.
    """
    if value is not None and not value:
        raise typer.BadParameter("the path is empty: name a file")
    return value


def finish(code: int) -> None:
    """Flush and leave without interpreter teardown (temporalio sdk-python issue #300)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def known_failure(e: BaseException) -> CliError | None:
    """An error no command caught that still has a one-line cause for the user: a payload
    that cannot be read (an encryption key missing or wrong) or a request the Temporal server
    refused (a namespace that does not exist); None for anything else. An authorizer's refusal
    says itself what was refused and what to grant (`reactive_temporal/access.py`)."""
    if (problem := unreadable_payload(e)) is not None:
        return CliError(f"cannot read a payload: {problem}", code=1)
    if denied := next((c for c in causes(e) if isinstance(c, TemporalAccessDenied)), None):
        return CliError(str(denied), code=1)
    refused = next((c for c in causes(e) if isinstance(c, RPCError)), None)
    if refused is not None:
        return CliError(f"the Temporal server refused the request: {refused.message}", code=1)
    return None


def run_command(coro: Callable[[], Awaitable[int]], *, as_json: bool = False) -> None:
    try:
        code: int = asyncio.run(coro())  # type: ignore[arg-type]
    except CliError as e:  # the command's own words (its cause may be an RPCError it read)
        code = _report(e, as_json)
    except KeyboardInterrupt:
        code = 130
    except Exception as e:
        if (known := known_failure(e)) is None:
            raise
        code = _report(known, as_json)
    finish(code)


def _report(e: CliError, as_json: bool) -> int:
    if as_json:
        print(json.dumps({"error": str(e)}))
    # One line whatever the width: wrapped, a log or a test would see several.
    err.print(f"[red]error:[/] {safe(e)}", highlight=False, soft_wrap=True)
    return e.code


def cli_settings(**overrides: object) -> Settings:
    """The settings, with the command's options over the environment (None: not given)."""
    try:
        return load_settings(**overrides)
    except ValidationError as e:
        given = {k for k, v in overrides.items() if v is not None}

        def named(field: str) -> str:  # an option as its field, the environment by its name
            return field if field in given else environment_variable(field)

        raise CliError(f"invalid configuration: {describe_validation_error(e, named)}") from e
    except SettingsError as e:  # e.g. a JSON variable that is not JSON
        raise CliError(f"invalid configuration: {settings_error_message(e)}") from e
    except ConnectionConfigError as e:  # a missing profile, config file or certificate
        raise CliError(str(e)) from e


async def cli_runtime(settings: Settings | None = None, *, worker: bool = True) -> Runtime:
    """The runtime a command needs, or a one-line error (unreachable server, bad keys…);
    `worker=False` for a command that only reads (no worker started for it)."""
    try:
        return await open_runtime(settings or cli_settings(), worker=worker)
    except (StackError, ValueError) as e:
        raise CliError(str(e)) from e


def agent_builder(settings: Settings, name: str) -> AgentBuilder:
    return AgentBuilder(settings=settings).with_name(name)


async def open_agent(settings: Settings, name: str) -> Agent:
    try:
        config = agent_builder(settings, name).config()
        runtime = await open_runtime(settings)
    except (ValueError, StackError) as e:
        raise CliError(str(e)) from e
    return Agent(config, runtime, configured=False)  # chat uses the agent's own settings
