"""`worker` and `dev`: the processes that serve runs.

`worker` serves a Temporal server and Postgres that run elsewhere (TEMPORAL_ADDRESS and
DATABASE_URL, or the `dev` stack running here); the top-level `worker.py` is this command.
`dev` starts the embedded stack (Temporal with its Web UI, Postgres, the offline model when no
LLM is configured) and serves it. Both take the same options, start a worker the same way and
stop it the same way (`hosting/worker_lifecycle.py`): Ctrl-C or SIGTERM finish the tasks in
flight, then close everything they opened.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from typing import Annotated

import typer
from rich.panel import Panel

from reactive_temporal.cli.common import (
    OFFLINE_NOTICE,
    CliError,
    cli_settings,
    out,
    run_command,
)
from reactive_temporal.cli.terminal import safe
from reactive_temporal.config import Settings
from reactive_temporal.embedded.stack import (
    EmbeddedStack,
    StackError,
    connect,
    read_published_stack,
)
from reactive_temporal.hosting.worker_lifecycle import (
    NoServerError,
    WorkerOptions,
    WorkerTarget,
    start_embedded_worker,
    start_worker_host,
    stop_signals,
)

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


def worker_options(
    tools: list[str] | None, mcp: list[str] | None, mcp_env: list[str] | None
) -> WorkerOptions:
    return WorkerOptions(tool_modules=tools or [], mcp_specs=mcp or [], mcp_env=mcp_env or [])


def worker(tools: ToolsOption = None, mcp: McpOption = None, mcp_env: McpEnvOption = None) -> None:
    """Run a worker: every workflow and activity, built-in and user tools, until Ctrl-C.

    It serves TEMPORAL_ADDRESS and DATABASE_URL, or the `starter.py dev` stack running here.
    Several workers may serve one task queue; Temporal spreads runs across them.
    """
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )

    async def main() -> int:
        settings = cli_settings()
        try:
            target = WorkerTarget.resolve(settings)
        except NoServerError as e:
            raise CliError(str(e)) from e
        if target.offline_model:
            print(
                "note: no OPENAI_BASE_URL or OPENAI_API_KEY: "
                "serving runs with the offline scripted model"
            )
        try:
            client = await connect(
                target.temporal_address,
                settings.temporal_namespace,
                settings.encryption_keys,
                encryption_required=settings.encryption_required,
            )
            host = await start_worker_host(
                client,
                settings,
                database_url=target.database_url,
                llm_base_url=target.llm_base_url,
                options=worker_options(tools, mcp, mcp_env),
                task_queue=target.task_queue,
                offline_model=target.offline_model,
            )
        except (StackError, ValueError, RuntimeError) as e:
            raise CliError(str(e)) from e
        with stop_signals() as stop:  # until the worker is closed: no half-closed exit
            try:
                print(
                    f"worker on {target.temporal_address}, task queue {target.task_queue!r}, "
                    f"tools: {', '.join(host.tool_names)}",
                    flush=True,
                )
                await host.wait(stop)
            finally:
                try:
                    await host.stop()
                except Exception as e:
                    raise CliError(f"the worker stopped: {e}", code=1) from e
        return 0

    run_command(main)


def dev(
    port: Annotated[int, typer.Option(help="Temporal frontend port.")] = 7233,
    ui_port: Annotated[int, typer.Option(help="Temporal Web UI port.")] = 8233,
    tools: ToolsOption = None,
    mcp: McpOption = None,
    mcp_env: McpEnvOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the stack's addresses as one JSON object.")
    ] = False,
) -> None:
    """Run the embedded stack (Temporal + Web UI, Postgres) and a worker until Ctrl-C."""

    async def main() -> int:
        settings = cli_settings()
        published = read_published_stack(settings.data_dir.resolve())
        if published is not None:
            raise CliError(
                f"a dev stack is already running (pid {published.pid}); Web UI {published.web_ui}"
            )
        try:
            stack, host = await start_embedded_worker(
                settings,
                worker_options(tools, mcp, mcp_env),
                ui=True,
                port=port,
                ui_port=ui_port,
            )
        except (ValueError, RuntimeError) as e:  # StackError is a RuntimeError
            raise CliError(str(e)) from e
        # installed before the stack is announced, kept until everything is closed
        with stop_signals() as stop:
            try:
                published = stack.publish()
                if as_json:
                    print(json.dumps(asdict(published)), flush=True)
                else:
                    _print_banner(stack, settings, host.tool_names)
                await host.wait(stop)
                if not as_json:
                    out.print("[dim]stopping worker, Temporal and Postgres…[/]")
            finally:
                try:
                    await host.stop()
                except Exception as e:
                    raise CliError(f"the worker stopped: {e}", code=1) from e
                finally:
                    await stack.stop()
        if not as_json:
            out.print("stopped.")
        return 0

    run_command(main, as_json=as_json)


def _print_banner(stack: EmbeddedStack, settings: Settings, tools: list[str]) -> None:
    postgres = (
        f"embedded, {settings.data_dir / 'postgres'}"
        if settings.database_url is None
        else "DATABASE_URL"
    )
    out.print(
        Panel.fit(
            f"Temporal      {safe(stack.temporal_address)} · {safe(settings.temporal_namespace)}\n"
            f"Web UI        [bold cyan]{safe(stack.web_ui or 'external server')}[/]\n"
            f"Postgres      {safe(postgres)}\n"
            f"Task queue    {safe(settings.temporal_task_queue)}\n"
            f"Tools         {safe(', '.join(tools))}\n\n"
            'Start runs from another terminal: python starter.py run "What is (17 * 23) + 4?"\n'
            "Ctrl-C stops everything.",
            title="reactive-temporal dev",
            border_style="cyan",
        )
    )
    if stack.offline_model:
        out.print(Panel(OFFLINE_NOTICE, border_style="yellow"))
