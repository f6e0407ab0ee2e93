"""reactive-temporal: durable ReAct agents on Temporal.

\b
run TASK             a durable run, with live progress, then its answer and debrief
debrief RUN_ID       a run's debrief (--rich waits for the synthesized one)
chat MESSAGE         one chat turn with the agent about its runs
session              an interactive chat session (history ID / end ID)
agent reset NAME     end an agent's stuck chat workflow and start a fresh one (--force)
runs                 recent runs: status, terminated_by, outcome (filters, --json)
cancel RUN_ID        stop a running run gracefully: it ends as cancelled, with its debrief
approvals            tool calls waiting for approval (run id, call id, tool, arguments, since)
approve RUN_ID       approve a run's waiting tool calls (CALL_ID…, default all; --by NAME)
deny RUN_ID          deny them with --reason TEXT (the model reads it)
watch RUN_ID         a run's live output: text as generated, tool calls, its end (--json)
progress RUN_ID      where a run is, what it is stuck on (a step retried and why, no worker)
replay ID | --file   replay a run's history against the current code
export ID            a run's history as JSON
rerun ID             re-execute a failed run from its last good point (--from-start)
lessons              what the agent learned from its runs (lessons delete ID… | --all)
costs                what each agent's runs spent over the last --days, and how they ended
check                a read-only preflight of what a worker would use: Temporal, Postgres,
                     model endpoints, the task queue (exit 1 when a check fails)
migrate              apply the agents database's schema migrations (DATABASE_URL)
prune                delete live output and transcripts of runs idle past --older-than days
codec-server         decrypt encrypted histories for the Web UI and temporal CLI
worker               a worker for TEMPORAL_ADDRESS / DATABASE_URL (or the dev stack), until Ctrl-C
dev                  the embedded stack, a worker and the Web UI, until Ctrl-C
"""

from __future__ import annotations

import typer

from reactive_temporal.cli import (
    agent_commands,
    chat_commands,
    check_commands,
    codec_commands,
    control_commands,
    cost_commands,
    lesson_commands,
    migrate_commands,
    operate_commands,
    run_commands,
    serve_commands,
    serve_options,
)

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help=__doc__, pretty_exceptions_show_locals=False
)


@app.callback()
def connection_profile(profile: serve_options.ProfileOption = None) -> None:
    # `starter.py --profile prod run …`: every command connects with that temporal.toml profile.
    serve_options.use_profile(profile)


app.command()(run_commands.run)
app.command()(run_commands.debrief)
app.command()(chat_commands.chat)
app.add_typer(chat_commands.session_app, name="session")
app.add_typer(agent_commands.agent_app, name="agent")
app.add_typer(lesson_commands.lessons_app, name="lessons")
app.command()(cost_commands.costs)
app.command()(operate_commands.runs)
app.command()(control_commands.cancel)
app.command()(control_commands.approvals)
app.command()(control_commands.approve)
app.command()(control_commands.deny)
app.command()(control_commands.watch)
app.command()(control_commands.progress)
app.command("replay")(operate_commands.replay_command)
app.command()(operate_commands.export)
app.command()(operate_commands.rerun)
app.command("codec-server")(codec_commands.codec_server)
app.command()(check_commands.check)
app.command()(migrate_commands.migrate)
app.command("prune")(migrate_commands.prune_command)
app.command()(serve_commands.worker)
app.command()(serve_commands.dev)

worker_app = typer.Typer(
    add_completion=False, help=serve_commands.worker.__doc__, pretty_exceptions_show_locals=False
)
"""`python worker.py`: the `worker` command on its own."""
worker_app.command()(serve_commands.worker)
