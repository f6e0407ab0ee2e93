"""`worker` and `dev`: the processes that serve runs.

`worker` serves a Temporal server and Postgres that run elsewhere (TEMPORAL_ADDRESS and
DATABASE_URL, or the `dev` stack running here); the top-level `worker.py` is this command.
`dev` starts the embedded stack (Temporal with its Web UI, Postgres, the offline model when no
LLM is configured) and serves it. Both take the same options (`serve_options.py`), start a
worker the same way and stop it the same way (`hosting/worker_lifecycle.py`): Ctrl-C or
SIGTERM finish the tasks in flight, then close everything they opened.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from typing import Annotated

import typer
from rich.panel import Panel

from reactive_temporal.access import TemporalAccessDenied
from reactive_temporal.cli.common import OFFLINE_NOTICE, CliError, out, run_command
from reactive_temporal.cli.serve_options import (
    BuildIdOption,
    DeploymentNameOption,
    GracefulShutdownOption,
    MaxActivitiesOption,
    MaxWorkflowTasksOption,
    McpEnvOption,
    McpHeaderOption,
    McpOption,
    MetricsPortOption,
    ProcessesOption,
    ProfileOption,
    ToolsOption,
    serving_settings,
    use_profile,
    worker_command,
    worker_options,
)
from reactive_temporal.cli.terminal import safe
from reactive_temporal.config import Settings
from reactive_temporal.embedded.dev_server import StackError
from reactive_temporal.embedded.stack import EmbeddedStack, connect, read_published_stack
from reactive_temporal.hosting.credential_watch import CredentialWatch
from reactive_temporal.hosting.observability import Observability
from reactive_temporal.hosting.refusal_logs import RefusalLogs
from reactive_temporal.hosting.worker_lifecycle import (
    NoServerError,
    WorkerTarget,
    start_embedded_worker,
    start_worker_host,
    stop_signals,
)
from reactive_temporal.hosting.worker_processes import run_workers, worker_commands
from reactive_temporal.sanitize import database_named, redact_dsn


def worker(
    tools: ToolsOption = None,
    mcp: McpOption = None,
    mcp_env: McpEnvOption = None,
    mcp_header: McpHeaderOption = None,
    metrics_port: MetricsPortOption = None,
    graceful_shutdown: GracefulShutdownOption = None,
    max_concurrent_activities: MaxActivitiesOption = None,
    max_concurrent_workflow_tasks: MaxWorkflowTasksOption = None,
    deployment_name: DeploymentNameOption = None,
    build_id: BuildIdOption = None,
    processes: ProcessesOption = None,
    profile: ProfileOption = None,
) -> None:
    """Run a worker: every workflow and activity, built-in and user tools, until Ctrl-C.

    It serves TEMPORAL_ADDRESS and DATABASE_URL (or a temporal.toml profile), or the
    `starter.py dev` stack running here. Several workers may serve one task queue; Temporal
    spreads runs across them (--processes N runs N here). SIGTERM drains: polling stops,
    in-flight activities finish (up to --graceful-shutdown seconds), then it exits 0.
    """
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    use_profile(profile)

    async def main() -> int:
        options = worker_options(tools, mcp, mcp_env, mcp_header)
        settings = serving_settings(
            metrics_port,
            graceful_shutdown,
            max_concurrent_activities,
            max_concurrent_workflow_tasks,
            deployment_name,
            build_id,
            processes,
        )
        if settings.worker_processes > 1:
            command = worker_command(
                tools,
                mcp,
                mcp_env,
                mcp_header,
                graceful_shutdown,
                max_concurrent_activities,
                max_concurrent_workflow_tasks,
                deployment_name,
                build_id,
            )
            return await serve_in_processes(command, settings)
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
            observability = Observability.start(settings)
        except ValueError as e:
            raise CliError(str(e)) from e
        RefusalLogs(target.connection, target.task_queue).install()  # its exit says it once
        try:
            client = await connect(
                target.connection,
                encryption_keys=settings.encryption_keys,
                encryption_required=settings.encryption_required,
                runtime=observability.runtime,
                plugins=observability.plugins,
            )
            host = await start_worker_host(
                client,
                settings,
                database_url=target.database_url,
                llm_base_url=target.llm_base_url,
                options=options,
                task_queue=target.task_queue,
                offline_model=target.offline_model,
                observability=observability,
                credentials=CredentialWatch.of(
                    settings,
                    target.connection,
                    runtime=observability.runtime,
                    plugins=observability.plugins,
                ),
            )
        except (StackError, ValueError, RuntimeError, TemporalAccessDenied) as e:
            observability.close()
            raise CliError(str(e)) from e
        # until the worker is closed: no half-closed exit, unless asked twice
        with stop_signals(second_quits=True) as stop:
            try:
                print(
                    f"worker on {target.connection.describe()}, task queue "
                    f"{target.task_queue!r}, Postgres {database_named(target.database_url)}, "
                    f"tools: {', '.join(host.tool_names)}" + _serving(settings),
                    flush=True,
                )
                await host.wait(stop)
                if stop.is_set():
                    print(
                        "stopping: activities in flight have up to "
                        f"{settings.graceful_shutdown_seconds:g} s to finish (again to stop now)",
                        flush=True,
                    )
            finally:
                try:
                    await host.stop()
                except Exception as e:
                    raise CliError(f"the worker stopped: {e}", code=1) from e
        return 0

    run_command(main)


def dev(
    port: Annotated[int, typer.Option(min=1, max=65535, help="Temporal frontend port.")] = 7233,
    ui_port: Annotated[int, typer.Option(min=1, max=65535, help="Temporal Web UI port.")] = 8233,
    tools: ToolsOption = None,
    mcp: McpOption = None,
    mcp_env: McpEnvOption = None,
    mcp_header: McpHeaderOption = None,
    metrics_port: MetricsPortOption = None,
    graceful_shutdown: GracefulShutdownOption = None,
    max_concurrent_activities: MaxActivitiesOption = None,
    max_concurrent_workflow_tasks: MaxWorkflowTasksOption = None,
    deployment_name: DeploymentNameOption = None,
    build_id: BuildIdOption = None,
    profile: ProfileOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the stack's addresses as one JSON object.")
    ] = False,
) -> None:
    """Run the embedded stack (Temporal + Web UI, Postgres) and a worker until Ctrl-C."""
    use_profile(profile)

    async def main() -> int:
        options = worker_options(tools, mcp, mcp_env, mcp_header)
        settings = serving_settings(
            metrics_port,
            graceful_shutdown,
            max_concurrent_activities,
            max_concurrent_workflow_tasks,
            deployment_name,
            build_id,
        )
        published = read_published_stack(settings.data_dir.resolve())
        if published is not None:
            raise CliError(
                f"a dev stack is already running (pid {published.pid}); Web UI {published.web_ui}"
            )
        try:
            observability = Observability.start(settings)
        except ValueError as e:
            raise CliError(str(e)) from e
        try:
            stack, host = await start_embedded_worker(
                settings,
                options,
                observability=observability,
                ui=True,
                port=port,
                ui_port=ui_port,
            )
        except (ValueError, RuntimeError) as e:  # StackError is a RuntimeError
            observability.close()
            raise CliError(str(e)) from e
        # installed before the stack is announced, kept until everything is closed
        with stop_signals() as stop:
            try:
                published = stack.publish()
                if as_json:
                    shown = asdict(published)
                    shown["database_url"] = redact_dsn(published.database_url)
                    print(json.dumps(shown), flush=True)
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


async def serve_in_processes(command: list[str], settings: Settings) -> int:
    """`worker --processes N`: N workers here until Ctrl-C or SIGTERM, or until one exits."""
    n = settings.worker_processes
    try:
        commands = worker_commands(command, n, settings.metrics_port)
    except ValueError as e:
        raise CliError(str(e)) from e
    print(
        f"starting {n} worker processes (each with a Postgres pool of up to "
        f"{settings.store_pool_size()} connections, and one listening for stopped runs)",
        flush=True,
    )
    with stop_signals() as stop:
        return await run_workers(commands, stop, lambda line: print(line, flush=True))


def _serving(settings: Settings) -> str:
    parts = []
    if settings.metrics_port is not None:
        parts.append(f"metrics and /healthz on :{settings.metrics_port}")
    if settings.deployment_name is not None:
        parts.append(f"deployment {settings.deployment_name!r} build {settings.build_id!r}")
    return "".join(f", {part}" for part in parts)


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
            f"Tools         {safe(', '.join(tools))}\n"
            + (
                f"Metrics       http://127.0.0.1:{settings.metrics_port}/metrics (and /healthz)\n"
                if settings.metrics_port is not None
                else ""
            )
            + "\n"
            'Start runs from another terminal: python starter.py run "What is (17 * 23) + 4?"\n'
            "Ctrl-C stops everything.",
            title="reactive-temporal dev",
            border_style="cyan",
        )
    )
    if stack.offline_model:
        out.print(Panel(OFFLINE_NOTICE, border_style="yellow"))
