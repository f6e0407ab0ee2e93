"""The reactive-temporal CLI: start runs, watch them, run the embedded stack.

python starter.py run "What is (17 * 23) + 4?"     # a durable run, with live progress
python starter.py run "…" --json                   # one JSON object (the AgentResult)
python starter.py dev                              # embedded stack + worker + Web UI
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown
from rich.panel import Panel
from rich.text import Text
from temporalio.client import WorkflowHandle

from reactive_temporal.agent import (
    Agent,
    AgentBuilder,
    AgentRunError,
    RunResult,
    build_run_input,
    describe_validation_error,
    load_debrief,
)
from reactive_temporal.chat import ChatError
from reactive_temporal.chat_contracts import ChatReply, SessionHistory
from reactive_temporal.config import Settings, load_settings
from reactive_temporal.contracts import AgentResult, RunProgress
from reactive_temporal.runtime import open_runtime
from reactive_temporal.stack import EmbeddedStack, StackError, read_published_stack
from reactive_temporal.worker import create_worker

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help=__doc__, pretty_exceptions_show_locals=False
)
out = Console()
err = Console(stderr=True)

OFFLINE_NOTICE = (
    "Running on the [bold]offline scripted model[/] (no OPENAI_BASE_URL or OPENAI_API_KEY set): "
    "it does arithmetic and tells the time, nothing more.\n"
    "For a real model: [cyan]export OPENAI_API_KEY=sk-…[/] (OpenAI) or "
    "[cyan]export OPENAI_BASE_URL=http://localhost:11434/v1 AGENT_MODEL=llama3.1[/] (Ollama)."
)


class CliError(Exception):
    """A failure to report in one line, with an exit status."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def _finish(code: int) -> None:
    """Flush and leave without interpreter teardown (temporalio sdk-python issue #300)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _main(coro: Callable[[], Awaitable[int]], *, as_json: bool = False) -> None:
    try:
        code: int = asyncio.run(coro())  # type: ignore[arg-type]
    except CliError as e:
        code = e.code
        if as_json:
            print(json.dumps({"error": str(e)}))
        err.print(f"[red]error:[/] {e}", highlight=False)
    except KeyboardInterrupt:
        code = 130
    _finish(code)


def _settings() -> Settings:
    try:
        return load_settings()
    except ValidationError as e:
        raise CliError(f"invalid configuration: {describe_validation_error(e)}") from e


@app.command()
def run(
    task: Annotated[str, typer.Argument(help="What the agent should do.")],
    agent: Annotated[str, typer.Option(help="Agent name (its runs, memory and chat).")] = "agent",
    model: Annotated[str | None, typer.Option(help="Model name; default AGENT_MODEL.")] = None,
    max_iterations: Annotated[int, typer.Option(min=1, max=500)] = 10,
    required_tool: Annotated[
        list[str] | None, typer.Option(help="A tool the agent must call before finishing.")
    ] = None,
    no_memory: Annotated[
        bool, typer.Option("--no-memory", help="No debrief for this run.")
    ] = False,
    audit_rationale: Annotated[
        bool, typer.Option("--audit-rationale", help="Ask for a rationale per tool call.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the AgentResult as JSON.")] = False,
) -> None:
    """Run TASK durably, with live progress; exit 0 only when the run succeeded."""

    async def main() -> int:
        settings = _settings()
        builder = (
            AgentBuilder(settings=settings)
            .with_name(agent)
            .with_provider("openai", model=model)
            .with_reasoning(
                max_iterations=max_iterations,
                required_tools=required_tool,
                audit_rationale=audit_rationale,
            )
        )
        if no_memory:
            builder.without_memory()
        try:
            config = builder.config()
            build_run_input(config, task)  # refuse bad input before starting anything
            starting = (
                settings.temporal_address is None
                and read_published_stack(settings.data_dir.resolve()) is None
            )
            if starting and not as_json:
                err.print("[dim]starting the embedded stack (Temporal dev server, Postgres)…[/]")
            runtime = await open_runtime(settings)
        except (ValueError, StackError) as e:
            raise CliError(str(e)) from e
        try:
            if runtime.offline_model and not as_json:
                err.print(Panel(OFFLINE_NOTICE, border_style="yellow"))
            agent_ = Agent(config, runtime)
            handle = await agent_.start(task)
            if not as_json:
                err.print(f"[dim]run {handle.id} on task queue {runtime.task_queue}[/]")
            result = await _watch(agent_, handle, show=not as_json)
            if as_json:
                print(result.model_dump_json())
            else:
                _print_result(result)
            if result.debrief is not None and runtime.worker is not None:
                # This process hosts the only worker: finish the rich debrief before leaving.
                if not as_json:
                    err.print("[dim]writing the rich debrief…[/]")
                rich = await result.debrief_rich()
                if rich is not None and rich.synthesized and not as_json:
                    out.print(Markdown(rich.markdown))
        except ValueError as e:
            raise CliError(str(e)) from e
        except AgentRunError as e:
            raise CliError(str(e), code=1) from e
        finally:
            await runtime.close()
        return 0 if result.success else 1

    _main(main, as_json=as_json)


async def _watch(
    agent: Agent, handle: WorkflowHandle[Any, AgentResult], *, show: bool
) -> RunResult:
    """Await the run's result, showing its live progress (from the `progress` query)."""
    result = asyncio.ensure_future(agent.result(handle))
    if not show:
        return await result
    last_line = ""
    live = Live(console=err, transient=True, refresh_per_second=8) if err.is_terminal else None
    if live:
        live.start()
    try:
        while not result.done():
            try:
                progress = await handle.query("progress", result_type=RunProgress)
                line = _progress_line(progress)
            except Exception:  # the first workflow task may not have run yet
                line = "waiting for a worker…"
            if live:
                live.update(Text.from_markup(f"[cyan]⟳[/] {line}"))
            elif line != last_line:
                err.print(f"  {line}", highlight=False)
            last_line = line
            await asyncio.wait({result}, timeout=0.25)
    finally:
        if live:
            live.stop()
    return await result


def _progress_line(p: RunProgress) -> str:
    tool = f" · tool {p.current_tool}" if p.current_tool else ""
    return f"iteration {p.iteration + 1}/{p.max_iterations}{tool} · {p.tokens:,} tokens"


def _print_result(result: AgentResult) -> None:
    style = "green" if result.success else "red"
    title = f"{'✓' if result.success else '✗'} {result.terminated_by} · {result.format}"
    out.print(
        Panel(result.output or "(no output)", title=title, border_style=style, title_align="left")
    )
    m = result.metadata
    out.print(
        f"[dim]run {result.run_id} · {m.iterations} iterations · {m.steps_count} steps · "
        f"{m.tokens_used:,} tokens · ${m.cost:.4f} · {m.duration_ms / 1000:.1f}s[/]"
    )
    if result.error:
        out.print(f"[red]error:[/] {result.error}", highlight=False)
    if result.debrief is not None:
        out.print(Markdown(result.debrief.markdown))


@app.command()
def debrief(
    run_id: Annotated[str, typer.Argument(help="The run's id (printed by `run`).")],
    rich: Annotated[bool, typer.Option("--rich", help="Wait for the synthesized debrief.")] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the AgentDebrief as JSON.")
    ] = False,
) -> None:
    """Show a run's debrief: the best one available now, or with --rich the synthesized one."""

    async def main() -> int:
        settings = _settings()
        try:
            runtime = await open_runtime(settings)
        except StackError as e:
            raise CliError(str(e)) from e
        try:
            found = await load_debrief(runtime.client, run_id, wait_for_rich=rich)
        except ValueError as e:
            raise CliError(str(e), code=1) from e
        finally:
            await runtime.close()
        if found is None:
            raise CliError(f"run {run_id!r} has no debrief (it ran with --no-memory)", code=1)
        if as_json:
            print(found.model_dump_json())
        else:
            kind = "synthesized" if found.synthesized else "deterministic"
            err.print(f"[dim]{kind} debrief of {run_id}[/]")
            out.print(Markdown(found.markdown))
        return 0

    _main(main, as_json=as_json)


def _agent_for(settings: Settings, name: str) -> AgentBuilder:
    return AgentBuilder(settings=settings).with_name(name)


async def _open_agent(settings: Settings, name: str) -> Agent:
    try:
        config = _agent_for(settings, name).config()
        runtime = await open_runtime(settings)
    except (ValueError, StackError) as e:
        raise CliError(str(e)) from e
    return Agent(config, runtime)


def _print_reply(reply: ChatReply) -> None:
    out.print(Markdown(reply.message))
    tools = f" · tools {', '.join(reply.tools_used)}" if reply.tools_used else ""
    err.print(f"[dim]{reply.routed_via}{tools} · {reply.tokens:,} tokens · ${reply.cost:.4f}[/]")


@app.command()
def chat(
    message: Annotated[str, typer.Argument(help="What to ask or tell the agent.")],
    agent: Annotated[str, typer.Option(help="Agent name.")] = "agent",
    session: Annotated[str | None, typer.Option(help="Session id (default: agent chat).")] = None,
    use_tools: Annotated[
        bool | None,
        typer.Option("--use-tools/--no-tools", help="Force the tool path or the direct path."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the ChatReply as JSON.")] = False,
) -> None:
    """One chat turn with an agent about its runs (routed to tools or not by intent)."""

    async def main() -> int:
        settings = _settings()
        agent_ = await _open_agent(settings, agent)
        try:
            if session is None:
                reply = await agent_.chat(message, use_tools=use_tools)
            else:
                reply = await agent_.session(session).chat(message, use_tools=use_tools)
        except ChatError as e:
            raise CliError(str(e)) from e
        finally:
            await agent_.dispose()
        if as_json:
            print(reply.model_dump_json())
        else:
            _print_reply(reply)
        return 0

    _main(main, as_json=as_json)


session_app = typer.Typer(help="Chat sessions: interactive, or their history, or end one.")
app.add_typer(session_app, name="session")


@session_app.callback(invoke_without_command=True)
def session_repl(
    ctx: typer.Context,
    agent: Annotated[str, typer.Option(help="Agent name.")] = "agent",
    id: Annotated[str | None, typer.Option("--id", help="Resume this session.")] = None,
) -> None:
    """An interactive session: type messages, /end to save and finish, /quit to leave it open."""
    if ctx.invoked_subcommand is not None:
        return

    async def main() -> int:
        settings = _settings()
        agent_ = await _open_agent(settings, agent)
        try:
            session = agent_.session(id)
            try:
                history = await session.open()
            except ChatError as e:
                raise CliError(str(e)) from e
            err.print(
                f"[bold]session {session.id}[/] with {agent} — /end saves and ends, /quit leaves"
            )
            for m in history:
                who = "[cyan]you[/]" if m.role == "user" else "[green]agent[/]"
                out.print(f"{who}: {m.content}", highlight=False)
            while True:
                try:
                    line = (await asyncio.to_thread(input, "you> ")).strip()
                except EOFError:
                    break
                if line in ("/quit", "/exit"):
                    break
                if line == "/end":
                    saved = await session.end()
                    err.print(
                        f"[dim]session {session.id} saved ({len(saved)} messages) and ended[/]"
                    )
                    break
                if not line:
                    continue
                try:
                    _print_reply(await session.chat(line))
                except ChatError as e:
                    err.print(f"[red]refused:[/] {e}")
        finally:
            await agent_.dispose()
        return 0

    _main(main)


@session_app.command("history")
def session_history(
    session_id: Annotated[str, typer.Argument(metavar="ID")],
    agent: Annotated[str, typer.Option(help="Agent name.")] = "agent",
    as_json: Annotated[bool, typer.Option("--json", help="Print the history as JSON.")] = False,
) -> None:
    """A session's messages, oldest first."""

    async def main() -> int:
        agent_ = await _open_agent(_settings(), agent)
        try:
            messages = await agent_.session(session_id).history()
        finally:
            await agent_.dispose()
        if as_json:
            payload = SessionHistory(session_id=session_id, messages=messages)
            print(payload.model_dump_json())
        else:
            for m in messages:
                out.print(f"[dim]{m.timestamp:%H:%M:%S}[/] {m.role}: {m.content}", highlight=False)
            if not messages:
                err.print(f"[dim]session {session_id} has no messages open[/]")
        return 0

    _main(main, as_json=as_json)


@session_app.command("end")
def session_end(
    session_id: Annotated[str, typer.Argument(metavar="ID")],
    agent: Annotated[str, typer.Option(help="Agent name.")] = "agent",
    as_json: Annotated[bool, typer.Option("--json", help="Print what was saved as JSON.")] = False,
) -> None:
    """Save a session to Postgres and clear it (resume it later with --id)."""

    async def main() -> int:
        agent_ = await _open_agent(_settings(), agent)
        try:
            saved = await agent_.session(session_id).end()
        except ChatError as e:
            raise CliError(str(e)) from e
        finally:
            await agent_.dispose()
        if as_json:
            print(SessionHistory(session_id=session_id, messages=saved).model_dump_json())
        else:
            err.print(f"session {session_id} saved ({len(saved)} messages) and ended")
        return 0

    _main(main, as_json=as_json)


@app.command()
def dev(
    port: Annotated[int, typer.Option(help="Temporal frontend port.")] = 7233,
    ui_port: Annotated[int, typer.Option(help="Temporal Web UI port.")] = 8233,
    tools: Annotated[list[str] | None, typer.Option(help="Module with @tool functions.")] = None,
) -> None:
    """Run the embedded stack (Temporal + Web UI, Postgres) and a worker until Ctrl-C."""

    async def main() -> int:
        settings = _settings()
        published = read_published_stack(settings.data_dir.resolve())
        if published is not None:
            raise CliError(
                f"a dev stack is already running (pid {published.pid}); Web UI {published.web_ui}"
            )
        try:
            stack = await EmbeddedStack(settings).start(ui=True, port=port, ui_port=ui_port)
        except StackError as e:
            raise CliError(str(e)) from e
        try:
            assert stack.client is not None
            agent_worker = await create_worker(
                stack.client,
                settings,
                database_url=stack.database_url,
                llm_base_url=stack.llm_base_url,
                tool_modules=tools or [],
            )
        except BaseException:
            await stack.stop()
            raise
        stack.publish()
        postgres = (
            f"embedded, {settings.data_dir / 'postgres'}"
            if settings.database_url is None
            else "DATABASE_URL"
        )
        out.print(
            Panel.fit(
                f"Temporal      {stack.temporal_address} · {settings.temporal_namespace}\n"
                f"Web UI        [bold cyan]{stack.web_ui or 'external server'}[/]\n"
                f"Postgres      {postgres}\n"
                f"Task queue    {settings.temporal_task_queue}\n"
                f"Tools         {', '.join(agent_worker.registry.names)}\n\n"
                'Start runs from another terminal: python starter.py run "What is (17 * 23) + 4?"\n'
                "Ctrl-C stops everything.",
                title="reactive-temporal dev",
                border_style="cyan",
            )
        )
        if stack.offline_model:
            out.print(Panel(OFFLINE_NOTICE, border_style="yellow"))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        worker_task = asyncio.create_task(agent_worker.worker.run())
        await asyncio.wait(
            {worker_task, asyncio.ensure_future(stop.wait())}, return_when="FIRST_COMPLETED"
        )
        out.print("[dim]stopping worker, Temporal and Postgres…[/]")
        await agent_worker.worker.shutdown()
        await agent_worker.close()
        await stack.stop()
        out.print("stopped.")
        return 0

    _main(main)


if __name__ == "__main__":
    app()
