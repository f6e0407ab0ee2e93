"""The terminal prints text, never markup or control sequences, whoever wrote the text.

Model answers, tool output, debriefs, chat replies, run ids, task text and error messages are
data: a `[/]` in them must print as `[/]` (Rich would parse it as markup and crash), and an
escape sequence in them must not reach the terminal (a model could otherwise embed
hyperlinks, retitle the window, or rewrite what was printed before). Every string from
outside goes through one of:

- `safe(value)` inside a markup template: `err.print(f"[red]error:[/] {safe(e)}")`;
- `plain(value)` as a renderable (`Text`, no markup parsed) for panels, tables, `print`;
- `markdown(value)` for text meant as Markdown (answers, debriefs): links printed as text.

and `run_app` turns click's usage errors (a bad option value) into one line and exit status 2.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from typing import Any, NoReturn

import typer
from rich.markdown import Markdown
from rich.markup import escape
from rich.text import Text

try:  # typer >= 0.25 carries its own copy of click
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover — older typer uses click itself
    from click import exceptions as click_exceptions  # type: ignore[no-redef]

_ESCAPE_SEQUENCE = re.compile(
    r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\|$)"  # OSC …BEL / …ST (hyperlinks, window titles)
    r"|\x1b[P^_X][^\x1b]*(?:\x1b\\|$)"  # DCS, PM, APC, SOS strings
    r"|\x1b\[[0-?]*[ -/]*[@-~]"  # CSI (colours, cursor movement, erasing)
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
    r"|\x1b[ -/]*[0-~]?"  # any other escape
)
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 but tab and newline, DEL, C1 (CR goes too: no overwriting)
    "\u202a-\u202e\u2066-\u2069]"  # bidi embeddings, overrides and isolates (reordered text)
)
_SURROGATE = re.compile("[\ud800-\udfff]")


def clean(value: object) -> str:
    """`value` as text a terminal shows as written: escape sequences and control characters
    removed (tab and newline kept, CRLF made LF), lone surrogates replaced by U+FFFD."""
    text = value if isinstance(value, str) else str(value)
    text = _SURROGATE.sub("\ufffd", text)
    text = _ESCAPE_SEQUENCE.sub("", text.replace("\r\n", "\n"))
    return _CONTROL.sub("", text)


def safe(value: object) -> str:
    """`value` cleaned and escaped, to interpolate into a Rich markup template."""
    return escape(clean(value))


def plain(value: object, style: str = "") -> Text:
    """`value` as a Rich renderable that is never parsed as markup."""
    return Text(clean(value), style=style)


def markdown(value: object) -> Markdown:
    """Markdown from a model or a debrief, cleaned; links show their address as text instead
    of becoming terminal hyperlinks."""
    return Markdown(clean(value), hyperlinks=False)


def run_app(app: typer.Typer, args: list[str] | None = None) -> NoReturn:
    """Run the CLI. A usage error (an unknown command, a bad option value) is one line on
    stderr, and with `--json` also `{"error": …}` on stdout; the exit status is click's (2)."""
    argv = sys.argv[1:] if args is None else args
    core_logs_to_python()
    try:
        refuse_undecodable(argv)
        code: Any = app(args=argv, standalone_mode=False)
    except click_exceptions.NoArgsIsHelpError:
        code = 2  # the help is printed already
    except click_exceptions.ClickException as e:
        message = clean(" ".join(e.format_message().split()))
        if "--json" in argv:
            print(json.dumps({"error": message}))
        ctx = getattr(e, "ctx", None)
        hint = f" (see `{clean(ctx.command_path)} --help`)" if ctx is not None else ""
        sys.stderr.write(f"error: {message}{hint}\n")
        code = e.exit_code
    except typer.Abort:
        code = 130
    _exit(code if isinstance(code, int) else 0)


PATH_OPTIONS = ("--file", "--output", "-o")
"""Options whose value is a file name: any bytes are a name Linux allows."""


def refuse_undecodable(argv: list[str]) -> None:
    """A usage error naming the first argument that is not UTF-8 text (Python holds its
    bytes as lone surrogates). A file name may be any bytes; any other text goes into a
    run, a query or a request, where it was a traceback from protobuf's or psycopg's encoder,
    "'utf-8' codec can't encode…", or pydantic's "unable to parse raw data"."""
    for position, arg in enumerate(argv):
        if not _SURROGATE.search(arg):
            continue
        before = argv[position - 1] if position else ""
        name, _, _ = arg.partition("=")
        if before in PATH_OPTIONS or (arg.startswith("-") and name in PATH_OPTIONS):
            continue
        if arg.startswith("--") and "=" in arg:
            what, arg = f"the value of {name}", arg.partition("=")[2]
        elif before.startswith("-"):
            what = f"the value of {before}"
        else:
            what = f"argument {position + 1}"
        shown = repr(arg[:80]) + ("…" if len(arg) > 80 else "")
        raise click_exceptions.UsageError(
            f"{what} is not UTF-8 text: {shown} (its undecodable bytes are shown as \\udcXX)"
        )


def core_logs_to_python() -> None:
    """Temporal's core writes its own warnings (an RPC it retries while the server is gone)
    to stdout, in colour, into a command's output: `--json` lines mixed with log lines. They
    go through Python's logging instead, which writes them to stderr, and its retry warnings
    once a minute per call (`core_log_quiet`)."""
    from temporalio.runtime import Runtime, TelemetryConfig

    from reactive_temporal.hosting.core_log_quiet import RetryWarnings
    from reactive_temporal.telemetry.core_logs import CORE_LOGGER, core_logging

    # one line a minute per call while a server is gone, in every runtime (a worker's
    # metrics runtime logs to the same logger: telemetry.core_logs)
    logging.getLogger(CORE_LOGGER).addFilter(RetryWarnings())
    Runtime.set_default(
        Runtime(telemetry=TelemetryConfig(logging=core_logging())), error_if_already_set=False
    )


def _exit(code: int) -> NoReturn:
    from reactive_temporal.cli.common import finish  # the CLI's one way out

    finish(code)
    raise SystemExit(code)  # pragma: no cover — finish() does not return
