"""The options `worker` and `dev` share, and what they make of them: the settings of a
process that serves runs, and the command line a worker of `worker --processes N` runs.

Kept apart from the commands (`serve_commands.py`) so that each reads top to bottom: here,
what a user can pass; there, what serving does with it.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from reactive_temporal.cli.common import CliError, cli_settings
from reactive_temporal.config import Settings
from reactive_temporal.hosting.worker_lifecycle import WorkerOptions
from reactive_temporal.key_files import read_llm_keys
from reactive_temporal.worker_settings import MAX_WORKER_PROCESSES

ToolsOption = Annotated[
    list[str] | None,
    typer.Option(
        "--tools", metavar="MODULE", help="Load the @tool functions of MODULE (repeatable)."
    ),
]
McpOption = Annotated[
    list[str] | None,
    typer.Option(
        "--mcp",
        metavar="SPEC",
        help="An MCP server: NAME=URL or 'NAME=COMMAND ARGS' (repeatable); tools are NAME/tool.",
    ),
]
McpEnvOption = Annotated[
    list[str] | None,
    typer.Option(
        "--mcp-env",
        metavar="NAME",
        help="Pass variable NAME to stdio MCP servers (repeatable); they get only "
        "PATH, HOME, LANG and these.",
    ),
]
McpHeaderOption = Annotated[
    list[str] | None,
    typer.Option(
        "--mcp-header",
        metavar="'NAME=Header: value'",
        help="A header sent to HTTP MCP server NAME (repeatable), e.g. "
        "'docs=Authorization: Bearer ${DOCS_TOKEN}': ${VARIABLE} is read from the "
        "environment, so the secret is not on the command line; ${file:PATH} from a file, "
        "read again for each new session and when the server refuses it (a rotated token).",
    ),
]


MetricsPortOption = Annotated[
    int | None,
    typer.Option(
        "--metrics-port",
        min=1,
        max=65_535,
        help="Serve Prometheus metrics at :PORT/metrics and /healthz "
        "(env REACTIVE_TEMPORAL_METRICS_PORT).",
    ),
]
GracefulShutdownOption = Annotated[
    float | None,
    typer.Option(
        "--graceful-shutdown",
        metavar="SECONDS",
        min=0,
        help="On SIGTERM or Ctrl-C, let in-flight activities finish for up to SECONDS "
        "(env REACTIVE_TEMPORAL_GRACEFUL_SHUTDOWN; default 30).",
    ),
]
MaxActivitiesOption = Annotated[
    int | None,
    typer.Option(
        "--max-concurrent-activities",
        min=1,
        help="Activity slots: LLM and tool calls in flight "
        "(env REACTIVE_TEMPORAL_MAX_CONCURRENT_ACTIVITIES; default 500).",
    ),
]
MaxWorkflowTasksOption = Annotated[
    int | None,
    typer.Option(
        "--max-concurrent-workflow-tasks",
        min=2,
        help="Workflow task slots (env REACTIVE_TEMPORAL_MAX_CONCURRENT_WORKFLOW_TASKS; "
        "default 100).",
    ),
]
DeploymentNameOption = Annotated[
    str | None,
    typer.Option(
        "--deployment-name",
        help="Worker Versioning: the worker deployment (env TEMPORAL_DEPLOYMENT_NAME).",
    ),
]
BuildIdOption = Annotated[
    str | None,
    typer.Option(
        "--build-id",
        help="Worker Versioning: this build's id (env TEMPORAL_WORKER_BUILD_ID).",
    ),
]
ProcessesOption = Annotated[
    int | None,
    typer.Option(
        "--processes",
        min=1,
        max=MAX_WORKER_PROCESSES,
        help="Run N worker processes here, one per core you can give them: one process "
        "uses one core (env REACTIVE_TEMPORAL_WORKER_PROCESSES; default 1). Worker i serves "
        "metrics on --metrics-port + i.",
    ),
]
ProfileOption = Annotated[
    str | None,
    typer.Option(
        "--profile",
        help="The temporal.toml profile to connect with (env TEMPORAL_PROFILE).",
    ),
]


def worker_options(
    tools: list[str] | None,
    mcp: list[str] | None,
    mcp_env: list[str] | None,
    mcp_header: list[str] | None = None,
) -> WorkerOptions:
    """The options, their MCP servers' specs, names and headers checked (and `${VARIABLE}`s
    read) now: a mistake there is said before anything is connected."""
    from reactive_temporal.mcp_tools import McpToolbox

    options = WorkerOptions(
        tool_modules=tools or [],
        mcp_specs=mcp or [],
        mcp_env=mcp_env or [],
        mcp_headers=mcp_header or [],
    )
    try:
        McpToolbox(options.mcp_specs, env=options.mcp_env, headers=options.mcp_headers)
    except ValueError as e:
        raise CliError(str(e)) from e
    return options


def serving_settings(
    metrics_port: int | None,
    graceful_shutdown: float | None,
    max_concurrent_activities: int | None,
    max_concurrent_workflow_tasks: int | None,
    deployment_name: str | None,
    build_id: str | None,
    processes: int | None = None,
) -> Settings:
    """The settings of a process that serves runs: its options over the environment, and
    Worker Versioning's two names checked together."""
    settings = cli_settings(
        metrics_port=metrics_port,
        graceful_shutdown_seconds=graceful_shutdown,
        max_concurrent_activities=max_concurrent_activities,
        max_concurrent_workflow_tasks=max_concurrent_workflow_tasks,
        deployment_name=deployment_name,
        build_id=build_id,
        worker_processes=processes,
    )
    try:
        settings.worker_version()
        read_llm_keys(settings)
    except ValueError as e:
        raise CliError(str(e)) from e
    return settings


def worker_command(
    tools: list[str] | None,
    mcp: list[str] | None,
    mcp_env: list[str] | None,
    mcp_header: list[str] | None,
    graceful_shutdown: float | None,
    max_concurrent_activities: int | None,
    max_concurrent_workflow_tasks: int | None,
    deployment_name: str | None,
    build_id: str | None,
) -> list[str]:
    """This `worker` command as one process runs it: the options given, the rest from the
    environment it inherits (a --profile is in it already: `use_profile`)."""
    command = [sys.executable, "-m", "reactive_temporal.cli", "worker"]
    for flag, values in (
        ("--tools", tools),
        ("--mcp", mcp),
        ("--mcp-env", mcp_env),
        ("--mcp-header", mcp_header),  # as given: each process reads its ${VARIABLE}s and
        # ${file:PATH}s, so no secret goes on a command line
    ):
        for value in values or []:
            command += [flag, value]
    for flag, given in (
        ("--graceful-shutdown", graceful_shutdown),
        ("--max-concurrent-activities", max_concurrent_activities),
        ("--max-concurrent-workflow-tasks", max_concurrent_workflow_tasks),
        ("--deployment-name", deployment_name),
        ("--build-id", build_id),
    ):
        if given is not None:
            command += [flag, str(given)]
    return command


def use_profile(profile: str | None) -> None:
    """`--profile NAME`: as TEMPORAL_PROFILE, for everything this process connects."""
    if profile:
        os.environ["TEMPORAL_PROFILE"] = profile
