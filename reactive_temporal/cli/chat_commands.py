"""`chat` and `session`: talk to an agent about its runs, in one turn or in sessions."""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated

import typer

from reactive_temporal.api.agents import Agent
from reactive_temporal.api.chat_refusals import ChatError, ChatUnavailable
from reactive_temporal.api.sessions import valid_session_id
from reactive_temporal.api.watching import LiveOutputUnavailable
from reactive_temporal.cli.common import CliError, cli_settings, err, open_agent, out, run_command
from reactive_temporal.cli.live_view import LivePrinter
from reactive_temporal.cli.terminal import markdown, safe
from reactive_temporal.contracts.entity import ChatReply, SessionHistory


def session_id_given(value: str | None) -> str | None:
    """A session id named on the command line, refused as a usage error when it is none."""
    try:
        return None if value is None else valid_session_id(value)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from e


def _print_reply(reply: ChatReply) -> None:
    out.print(markdown(reply.message))
    tools = f" · tools {', '.join(reply.tools_used)}" if reply.tools_used else ""
    err.print(
        f"[dim]{safe(reply.routed_via)}{safe(tools)} · {reply.tokens:,} tokens · "
        f"${reply.cost:.4f}[/]"
    )


async def _print_live(agent: Agent, stream_id: str, turn: asyncio.Future[ChatReply]) -> None:
    """The turn's live output on stderr as it comes: the reply as the model writes it, or
    the tool path's run (its text and tool calls)."""
    printer = LivePrinter(sys.stderr)
    try:
        async for event in agent.chat_events(stream_id, turn):
            printer.show(event)
    except LiveOutputUnavailable as e:
        err.print(f"[dim]no live output: {safe(e)}[/]")
    if printer.mid_line:
        sys.stderr.write("\n")


def chat(
    message: Annotated[str, typer.Argument(help="What to ask or tell the agent.")],
    agent: Annotated[str, typer.Option(help="Agent name.")] = "agent",
    session: Annotated[
        str | None,
        typer.Option(callback=session_id_given, help="Session id (default: agent chat)."),
    ] = None,
    use_tools: Annotated[
        bool | None,
        typer.Option("--use-tools/--no-tools", help="Force the tool path or the direct path."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the ChatReply as JSON.")] = False,
) -> None:
    """One chat turn with an agent about its runs (routed to tools or not by intent)."""

    async def main() -> int:
        settings = cli_settings()
        agent_ = await open_agent(settings, agent)
        try:
            live = err.is_terminal and not as_json and agent_.runtime.database_url is not None
            stream_id = agent_.new_chat_stream_id() if live else None
            if session is None:
                asked = agent_.chat(message, use_tools=use_tools, stream_id=stream_id)
            else:
                asked = agent_.session(session).chat(
                    message, use_tools=use_tools, stream_id=stream_id
                )
            turn = asyncio.ensure_future(asked)
            if stream_id is not None:
                await _print_live(agent_, stream_id, turn)
            reply = await turn
        except ChatError as e:
            raise _failed(e) from e
        finally:
            await agent_.dispose()
        if as_json:
            print(reply.model_dump_json())
        else:
            _print_reply(reply)
        return 0

    run_command(main, as_json=as_json)


def _failed(e: ChatError) -> CliError:
    """Exit 1 when the agent can take no request now, 2 when this request is wrong."""
    return CliError(str(e), code=1 if isinstance(e, ChatUnavailable) else 2)


session_app = typer.Typer(help="Chat sessions: interactive, or their history, or end one.")


@session_app.callback(invoke_without_command=True)
def session_repl(
    ctx: typer.Context,
    agent: Annotated[str, typer.Option(help="Agent name.")] = "agent",
    id: Annotated[
        str | None, typer.Option("--id", callback=session_id_given, help="Resume this session.")
    ] = None,
) -> None:
    """An interactive session: type messages, /end to save and finish, /quit to leave it open."""
    if ctx.invoked_subcommand is not None:
        return

    async def main() -> int:
        settings = cli_settings()
        agent_ = await open_agent(settings, agent)
        try:
            session = agent_.session(id)
            try:
                history = await session.open()
            except ChatError as e:
                raise _failed(e) from e
            err.print(
                f"[bold]session {safe(session.id)}[/] with {safe(agent)} — /end saves and ends, "
                "/quit leaves"
            )
            for m in history:
                who = "[cyan]you[/]" if m.role == "user" else "[green]agent[/]"
                out.print(f"{who}: {safe(m.content)}", highlight=False)
            while True:
                try:
                    line = (await asyncio.to_thread(input, "you> ")).strip()
                except EOFError:
                    break
                if line in ("/quit", "/exit"):
                    break
                if line == "/end":
                    try:
                        saved = await session.end()
                    except ChatError as e:  # not ended: the person may /quit or try again
                        err.print(f"[red]not ended:[/] {safe(e)}")
                        continue
                    err.print(
                        f"[dim]session {safe(session.id)} saved ({len(saved)} messages) "
                        "and ended[/]"
                    )
                    break
                if not line:
                    continue
                try:
                    _print_reply(await session.chat(line))
                except ChatError as e:
                    err.print(f"[red]refused:[/] {safe(e)}")
        finally:
            await agent_.dispose()
        return 0

    run_command(main)


@session_app.command("history")
def session_history(
    session_id: Annotated[str, typer.Argument(metavar="ID", callback=session_id_given)],
    agent: Annotated[str, typer.Option(help="Agent name.")] = "agent",
    as_json: Annotated[bool, typer.Option("--json", help="Print the history as JSON.")] = False,
) -> None:
    """A session's messages, oldest first."""

    async def main() -> int:
        agent_ = await open_agent(cli_settings(), agent)
        try:
            messages = await agent_.session(session_id).history()
        except ChatError as e:  # no worker can read it for us now, saying why
            raise CliError(str(e), code=1) from e
        finally:
            await agent_.dispose()
        if as_json:
            payload = SessionHistory(session_id=session_id, messages=messages)
            print(payload.model_dump_json())
        else:
            for m in messages:
                out.print(
                    f"[dim]{m.timestamp:%H:%M:%S}[/] {safe(m.role)}: {safe(m.content)}",
                    highlight=False,
                )
            if not messages:
                err.print(f"[dim]session {safe(session_id)} has no messages open[/]")
        return 0

    run_command(main, as_json=as_json)


@session_app.command("end")
def session_end(
    session_id: Annotated[str, typer.Argument(metavar="ID", callback=session_id_given)],
    agent: Annotated[str, typer.Option(help="Agent name.")] = "agent",
    as_json: Annotated[bool, typer.Option("--json", help="Print what was saved as JSON.")] = False,
) -> None:
    """Save a session to Postgres and clear it (resume it later with --id)."""

    async def main() -> int:
        agent_ = await open_agent(cli_settings(), agent)
        try:
            saved = await agent_.session(session_id).end()
        except ChatError as e:
            raise _failed(e) from e
        finally:
            await agent_.dispose()
        if as_json:
            print(SessionHistory(session_id=session_id, messages=saved).model_dump_json())
        else:
            err.print(f"session {safe(session_id)} saved ({len(saved)} messages) and ended")
        return 0

    run_command(main, as_json=as_json)
