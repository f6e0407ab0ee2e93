"""reactive-temporal: durable ReAct agents on Temporal.

\b
run TASK             a durable run, with live progress, then its answer and debrief
debrief RUN_ID       a run's debrief (--rich waits for the synthesized one)
chat MESSAGE         one chat turn with the agent about its runs
session              an interactive chat session (history ID / end ID)
runs                 recent runs: status, terminated_by, outcome (filters, --json)
replay ID | --file   replay a run's history against the current code
export ID            a run's history as JSON
rerun ID             re-execute a failed run from its last good point (--from-start)
migrate              apply the agents database's schema migrations (DATABASE_URL)
codec-server         decrypt encrypted histories for the Web UI and temporal CLI
dev                  the embedded stack, a worker and the Web UI, until Ctrl-C
"""

from __future__ import annotations

import typer

from reactive_temporal.cli import chat, codec, migrate, operate, runs, stack

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help=__doc__, pretty_exceptions_show_locals=False
)
app.command()(runs.run)
app.command()(runs.debrief)
app.command()(chat.chat)
app.add_typer(chat.session_app, name="session")
app.command()(operate.runs)
app.command("replay")(operate.replay_command)
app.command()(operate.export)
app.command()(operate.rerun)
app.command("codec-server")(codec.codec_server)
app.command()(migrate.migrate)
app.command()(stack.dev)

if __name__ == "__main__":
    app()
