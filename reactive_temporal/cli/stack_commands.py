"""`dev`: the embedded stack and a worker in the foreground."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from dataclasses import asdict
from typing import Annotated

import typer
from rich.panel import Panel

from reactive_temporal.cli.common import OFFLINE_NOTICE, CliError, cli_settings, out, run_command
from reactive_temporal.cli.terminal import safe
from reactive_temporal.config import Settings
from reactive_temporal.embedded.stack import EmbeddedStack, StackError, read_published_stack
from reactive_temporal.hosting.worker_factory import create_worker
from reactive_temporal.mcp_tools import McpToolbox


def dev(
    port: Annotated[int, typer.Option(help="Temporal frontend port.")] = 7233,
    ui_port: Annotated[int, typer.Option(help="Temporal Web UI port.")] = 8233,
    tools: Annotated[list[str] | None, typer.Option(help="Module with @tool functions.")] = None,
    mcp: Annotated[
        list[str] | None,
        typer.Option("--mcp", help="MCP server: NAME=URL or 'NAME=COMMAND ARGS' (repeatable)."),
    ] = None,
    mcp_env: Annotated[
        list[str] | None,
        typer.Option(
            "--mcp-env",
            metavar="NAME",
            help="Pass variable NAME to stdio MCP servers (repeatable); they get only "
            "PATH, HOME, LANG and these.",
        ),
    ] = None,
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
        async with contextlib.AsyncExitStack() as resources:
            try:
                stack = await EmbeddedStack(settings).start(ui=True, port=port, ui_port=ui_port)
            except (StackError, ValueError) as e:
                raise CliError(str(e)) from e
            resources.push_async_callback(stack.stop)
            try:
                toolbox = await resources.enter_async_context(
                    McpToolbox(mcp or [], env=mcp_env or [])
                )
                assert stack.client is not None
                agent_worker = await create_worker(
                    stack.client,
                    settings,
                    database_url=stack.database_url,
                    llm_base_url=stack.llm_base_url,
                    tool_modules=tools or [],
                    extra_tools=toolbox.tools,
                )
            except (ValueError, RuntimeError) as e:
                raise CliError(str(e)) from e
            stop = asyncio.Event()  # before announcing the stack: a Ctrl-C right after is handled
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            published = stack.publish()
            if as_json:
                print(json.dumps(asdict(published)), flush=True)
            else:
                _print_banner(stack, settings, agent_worker.registry.names)
            worker_task = asyncio.create_task(agent_worker.worker.run())
            await asyncio.wait(
                {worker_task, asyncio.ensure_future(stop.wait())}, return_when="FIRST_COMPLETED"
            )
            if not as_json:
                out.print("[dim]stopping worker, Temporal and Postgres…[/]")
            await agent_worker.worker.shutdown()
            await agent_worker.close()
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
