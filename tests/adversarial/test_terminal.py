"""The terminal: model text, chat replies, debriefs, ids and option values as the CLI prints them.

Rows: `input` is the CLI's argv ("{run}", "{agent}", "{chat_agent}", "{session}" are filled
from the runs the fixture makes first); `expect` is text that must appear literally in the
output; `options["code"]` is the exit status. The CLI runs as users run it, with colours
forced on (FORCE_COLOR=1) so Rich writes to it as to a terminal: whatever a model wrote must
print as text, and none of its escape sequences may reach the terminal.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from temporalio.client import Client

from reactive_temporal.contracts import names
from reactive_temporal.contracts.run import RunProgress
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from tests.adversarial.cases import Hostile, params, table
from tests.adversarial.conftest import (
    StoreSnapshot,
    assert_no_failed_tasks,
    fetch,
    owned_by,
    unique,
)
from tests.conftest import wait_for
from tests.processes import CliResult, clean_env, starter_async
from tests.workflow.conftest import Harness

OSC8 = "\x1b]8;;http://evil.example/\x1b\\click me\x1b]8;;\x1b\\"
HOSTILE_TEXT = (
    f"[/] [bold]x[/bold] {OSC8} \x1b[2J\x1b]0;pwned\x07 see [docs](http://evil.example/d)"
)
"""Markup that is not ours (`[/]` made a successful run exit 1), a terminal hyperlink, a
clear-screen, a window-title change, and a Markdown link."""
MARKUP_ARGUMENT = "[/][bold][link=http://evil.example/]x[/link]"
SGR = re.compile(r"\x1b\[[0-9;]*m")  # Rich's own colours (FORCE_COLOR=1): allowed

TERMINAL = table("terminal", [
    Hostile("cli-answer-markup-escapes", ["run", "Say it", "--agent", "{agent}"],
            "[/] [bold]x[/bold]", "a MarkupError and exit 1 for a successful run", {"code": 0}),
    Hostile("cli-answer-json", ["run", "Say it", "--agent", "{agent}", "--json"], HOSTILE_TEXT,
            "JSON keeps the data exactly", {"code": 0, "json": True}),
    Hostile("cli-debrief-link", ["debrief", "{run}"], "docs (http://evil.example/d)",
            "a Markdown link became a terminal hyperlink", {"code": 0}),
    Hostile("cli-chat-reply-markup", ["chat", "hi", "--agent", "{chat_agent}", "--no-tools"],
            "[/] [bold]x[/bold]", "the reply parsed as markup", {"code": 0}),
    Hostile("cli-session-history-markup", ["session", "history", "{session}", "--agent",
            "{chat_agent}"], "[/] [bold]x[/bold]", "history parsed as markup", {"code": 0}),
    Hostile("cli-runs-bad-status", ["runs", "--status", "[/x]"], "unknown status '[/x]'",
            "MarkupError traceback", {"code": 2, "one_line": True}),
    Hostile("cli-runs-bad-limit", ["runs", "--limit", "[/x]"], "Invalid value for '--limit'",
            "a boxed multi-line error", {"code": 2, "one_line": True}),
    Hostile("cli-bad-option-json", ["runs", "--limit", "x", "--json"],
            "Invalid value for '--limit'", "no JSON for scripts", {"code": 2, "json_error": True}),
    Hostile("cli-unknown-command-escapes", [f"{OSC8}\x1b[2J"], "No such command",
            "escape sequences echoed to the terminal", {"code": 2, "one_line": True}),
    Hostile("cli-error-with-markup", ["debrief", "[/][bold]"], "no run with id '[/][bold]'",
            "MarkupError traceback instead of the error", {"code": 1, "one_line": True}),
    Hostile("cli-watch-streamed-text", ["watch", "{run}"], "[/] [bold]x[/bold]",
            "the model's text, as streamed, parsed as markup and its escapes obeyed",
            {"code": 0}),
    Hostile("cli-lessons-markup-escapes", ["lessons", "--agent", "{agent}"],
            "[/] [bold]x[/bold]", "a lesson (text a model wrote) parsed as markup", {"code": 0}),
    Hostile("cli-approvals-arguments", ["approvals", "--agent", "{approver}"],
            json.dumps({"expression": MARKUP_ARGUMENT}),
            "a waiting call's arguments (the model's) parsed as markup", {"code": 0}),
])  # fmt: skip


def forbidden(text: str) -> list[str]:
    """What the hostile text tries to send the terminal: OSC sequences (hyperlinks, window
    titles), clearing the screen, the bell, 8-bit CSI. (Rich's own colours and its progress
    line's cursor moves are not in the list.)"""
    return re.findall(r"\x1b\]|\x1b\[2J|\x07|\x9b", text)


@pytest.fixture(scope="module")
async def cli(
    adv: Harness,
    llm: ScriptedLLM,
    client: Client,
    temporal_address: str,
    database_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    agent, chat_agent = unique("cli"), unique("cli-chat")
    model = llm.script(unique("cli"), [Reply(f"FINAL ANSWER: {HOSTILE_TEXT}")], repeat_last=True)
    earlier = await adv.run(model, "Say it", agent_id=agent)
    await earlier.debrief_rich()
    session = adv.agent(model, agent_id=chat_agent, memory=False).session(unique("s"))
    await session.chat("hi", use_tools=False)
    await fetch(  # a lesson as a model might write it
        database_url,
        "INSERT INTO agent_lessons (run_id, position, agent_id, lesson, expires_at)"
        " VALUES (%s, 99, %s, %s, now() + interval '1 day') RETURNING id",
        (earlier.run_id, agent, HOSTILE_TEXT),
    )
    approver = unique("cli-approve")  # a run waiting for approval of a hostile call
    asks = llm.script(approver, [
        Reply(None, [call("calculator", expression=MARKUP_ARGUMENT)]),
        Reply("FINAL ANSWER: never approved"),
    ])  # fmt: skip
    waiting = adv.agent(asks, agent_id=approver, memory=False, approve_tools=["calculator"])
    parked = await waiting.start("Compute it")

    async def parked_for_approval() -> bool:
        progress = await parked.query(names.PROGRESS_QUERY, result_type=RunProgress)
        return progress.waiting_for == "approval"

    await wait_for(parked_for_approval, seconds=60)
    fill = {"{agent}": agent, "{chat_agent}": chat_agent, "{run}": earlier.run_id,
            "{session}": session.id, "{approver}": approver}  # fmt: skip
    workdir = tmp_path_factory.mktemp("terminal")
    env = clean_env(
        COLUMNS="200", FORCE_COLOR="1", TEMPORAL_ADDRESS=temporal_address,
        TEMPORAL_TASK_QUEUE=adv.task_queue, DATABASE_URL=database_url, AGENT_MODEL=model,
        REACTIVE_TEMPORAL_DATA_DIR=str(workdir / "data"),
    )  # fmt: skip
    before = await StoreSnapshot.take(database_url)
    results = await asyncio.gather(*(
        starter_async(*[fill.get(a, a) for a in row.input], env=env, cwd=workdir, seconds=120)
        for row in TERMINAL
    ))  # fmt: skip
    after = await StoreSnapshot.take(database_url)
    cancelled = await waiting.cancel(parked.id)
    assert cancelled.terminated_by == "cancelled"
    # every workflow the cases touched: the runs the CLI started, and the chat agent's entity
    # (runs start none: they keep themselves in Postgres for their agent)
    started = await fetch(
        database_url,
        "SELECT DISTINCT run_id FROM run_messages WHERE run_id LIKE %s",
        (f"run-{agent}-%",),
    )
    assert len(started) >= 3, started  # the fixture's run and the two `run` rows'
    await assert_no_failed_tasks(
        client,
        *(run_id for (run_id,) in started),
        names.agent_workflow_id(chat_agent),
        parked.id,
    )
    return {
        "results": dict(zip([r.id for r in TERMINAL], results, strict=True)),
        "changes": after.changes_since(
            before,
            own=owned_by(f"run-{agent}", f"run-{chat_agent}", agent, chat_agent, parked.id),
        ),
    }


@pytest.mark.parametrize("row", params(TERMINAL))
def test_the_terminal_prints_text_never_markup_or_escapes(row: Hostile, cli: dict[str, Any]):
    result: CliResult = cli["results"][row.id]
    assert result.code == row.options["code"], result.describe()
    assert "Traceback" not in result.stderr, result.describe()
    assert forbidden(result.stdout) == [] and forbidden(result.stderr) == [], result.describe()
    shown = SGR.sub("", result.stdout + result.stderr)
    if row.options.get("json"):
        assert json.loads(result.stdout)["output"] == row.expect
    else:
        assert row.expect in " ".join(shown.split()), result.describe()
    if row.options.get("json_error"):
        assert row.expect in json.loads(result.stdout)["error"]
    if row.options.get("one_line"):
        assert SGR.sub("", result.stderr).strip().count("\n") == 0, result.describe()
    if row.expect.startswith("[/]"):
        assert "click me" in shown, result.describe()
        assert "http://evil.example/\x1b" not in shown, result.describe()


def test_the_cli_cases_changed_nothing_stored(cli: dict[str, Any]):
    assert cli["changes"] == []


def test_clean_keeps_text_and_drops_what_a_terminal_would_obey():
    from reactive_temporal.cli.terminal import clean, safe

    assert clean(HOSTILE_TEXT) == "[/] [bold]x[/bold] click me  see [docs](http://evil.example/d)"
    assert clean("tab\tnew\nline\r\nbell\x07 \x9b31m csi \u202eevil\u202c") == (
        "tab\tnew\nline\nbell  csi evil"
    )
    assert clean("lone \ud800 surrogate") == "lone \ufffd surrogate"
    assert safe("[/x] and [bold]") == "\\[/x] and \\[bold]"
