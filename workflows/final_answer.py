"""When the agent may finish, and whether a finish is accepted.

Pure functions, no Temporal: the run loop asks them at every step, and the unit tests pin
them to the reference's released behaviour (reactive-agents-semantics.md §1):

- visibility: the `final-answer` tool is offered once at least one turn completed, a real
  tool was used, every required tool was called, and no error is pending (errors are
  forgiven from iteration 4 on);
- the hard gate: a call is judged whether or not the tool was offered — it needs every
  required tool called and some real tool work, a one-shot completion-gap check, and an
  output that parses in the format it declares (json, and csv, which the reference planned
  and never built).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from pydantic import ValidationError

from reactive_temporal.contracts.run import FINAL_ANSWER_TOOL, OUTPUT_FORMATS, FinalAnswerCapture
from workflows.run_limits import answer_too_long

META_TOOLS = frozenset(
    {
        FINAL_ANSWER_TOOL,
        "task-complete",
        "context-status",
        "brief",
        "pulse",
        "todo",
        "find",
        "recall",
        "checkpoint",
        "activate-skill",
        "discover-tools",
        "write_result_to_file",
    }
)
"""Tools that steer the loop rather than do work (the reference's META_TOOLS at HEAD)."""

ERRORS_FORGIVEN_FROM_ITERATION = 4

FINAL_ANSWER_RE = re.compile(r"(?:\*{0,2})final\s*answer(?:\*{0,2})\s*[:：]?\s*", re.IGNORECASE)
"""The legacy text marker, anywhere in the text, colon optional: runs recorded before the
`final-answer-line-anchored` patch replay with it. It ended a run on prose such as "I don't
have the final answer yet", so new runs use FINAL_ANSWER_LINE_RE."""

FINAL_ANSWER_LINE_RE = re.compile(
    r"^[ \t]*(?:\*\*|__)?final[ \t]+answer(?:\*\*|__)?[ \t]*[:：](?:\*\*|__)?[ \t]*",
    re.IGNORECASE | re.MULTILINE,
)
"""The text marker: `FINAL ANSWER:` at the start of a line, any case, optionally in bold
(`**Final Answer:**`, `**FINAL ANSWER**:`), the colon required (ASCII or full-width)."""


def _marker(anchored: bool) -> re.Pattern[str]:
    return FINAL_ANSWER_LINE_RE if anchored else FINAL_ANSWER_RE


def has_final_answer_marker(text: str | None, *, anchored: bool) -> bool:
    return bool(text) and _marker(anchored).search(text or "") is not None


def extract_final_answer(text: str, *, anchored: bool) -> str:
    """The text after the marker, trimmed; the whole text when there is no marker."""
    match = _marker(anchored).search(text)
    if match is None:
        return text.strip()
    return text[match.end() :].strip()


def has_tool_work(tools_used: Collection[str], required_tools: Collection[str]) -> bool:
    """Visibility's "a non-meta tool was called": with no required tools, any tool counts."""
    if any(t not in META_TOOLS for t in tools_used):
        return True
    return not required_tools and len(tools_used) > 0


def should_show_final_answer(
    *,
    required_tools: Collection[str],
    tools_used: Collection[str],
    iteration: int,
    has_errors: bool,
    has_non_meta_tool_called: bool,
) -> bool:
    """Whether `final-answer` is offered to the model at this (0-based) iteration."""
    if any(t not in tools_used for t in required_tools):
        return False
    if iteration < 1:
        return False
    if not has_non_meta_tool_called:
        return False
    return not (has_errors and iteration < ERRORS_FORGIVEN_FROM_ITERATION)


def missing_required_tools(required_tools: Iterable[str], tools_used: Collection[str]) -> list[str]:
    return [t for t in required_tools if t not in tools_used]


def can_complete(required_tools: Collection[str], tools_used: Collection[str]) -> bool:
    """The hard gate's precondition: no iteration or error check (the model's judgement)."""
    if missing_required_tools(required_tools, tools_used):
        return False
    return any(t not in META_TOOLS for t in tools_used) or not required_tools


_WEB_PHRASES = re.compile(r"\b(search online|web search|look up|find online|google)\b", re.I)
_WRITE_PHRASES = re.compile(r"\b(write to|save to|create) (a )?file\b", re.I)
_READ_PHRASES = re.compile(r"\b(read|open|load) (a |the )?file\b", re.I)
_GAP_RULES = (
    (_WEB_PHRASES, ("web-search", "web_search"), "search the web"),
    (_WRITE_PHRASES, ("file-write", "file_write"), "write the file"),
    (_READ_PHRASES, ("file-read", "file_read"), "read the file"),
)


def detect_completion_gaps(
    task: str, tools_used: Collection[str], available_tools: Collection[str]
) -> list[str]:
    """Steps the task names that no tool call has done yet.

    A gap is only reported when this agent has a tool that would close it: asking for a
    web search that no tool can do is not something the model can fix.
    """
    gaps: list[str] = []
    namespaces = sorted({t.split("/", 1)[0] for t in available_tools if "/" in t})
    for ns in namespaces:
        if re.search(rf"\b{re.escape(ns)}\b", task, re.I) and not any(
            t.startswith(ns + "/") for t in tools_used
        ):
            gaps.append(f"use a {ns}/* tool (the task mentions {ns})")
    for pattern, tool_names, what in _GAP_RULES:
        have = [t for t in tool_names if t in available_tools]
        if have and pattern.search(task) and not any(t in tools_used for t in tool_names):
            gaps.append(f"{what} with {have[0]}")
    return gaps


def validate_output(output: str, fmt: str) -> str | None:
    """Why `output` does not parse as `fmt`, or None when it does.

    Total on any input (it runs in workflow code, where an exception would fail the task and
    retry it forever): JSON nested past the parser's depth and CSV fields past the csv
    module's field limit are verdicts, not exceptions.
    """
    if fmt == "json":
        try:
            json.loads(output)
        except RecursionError:
            return (
                "Output format is 'json' but the JSON is nested too deeply to parse. "
                "Flatten it or change format to 'text'."
            )
        except ValueError:
            return (
                "Output format is 'json' but output contains invalid JSON. "
                "Fix the JSON or change format to 'text'."
            )
    elif fmt == "csv":
        try:
            rows = [row for row in csv.reader(io.StringIO(output)) if row]
        except csv.Error as err:
            return f"Output format is 'csv' but it does not parse ({err}). Fix it or use 'text'."
        if not rows:
            return "Output format is 'csv' but output has no rows. Fix the CSV or change format."
        width = len(rows[0])
        for number, row in enumerate(rows[1:], start=2):
            if len(row) != width:
                return (
                    f"Output format is 'csv' but row {number} has {len(row)} columns where "
                    f"the first row has {width}. Fix the CSV or change format to 'text'."
                )
    return None


def operator_answer_problem(
    answer: FinalAnswerCapture, *, bytes_checked: Callable[[], bool] = lambda: False
) -> str | None:
    """Why the operator's `final_answer` signal must be ignored, or None to accept it: the
    same rules as a `final-answer` call's output (non-empty, a known format, within the
    answer limit, parsing in its format); `bytes_checked` as `answer_too_long` takes it."""
    if not answer.output.strip():
        return "the output is empty"
    if answer.format not in OUTPUT_FORMATS:
        return f"unknown format {answer.format[:40]!r}: use one of {', '.join(OUTPUT_FORMATS)}"
    return answer_too_long(answer.output, bytes_checked=bytes_checked) or validate_output(
        answer.output, answer.format
    )


@dataclass(frozen=True)
class FinalAnswerVerdict:
    accepted: bool
    capture: FinalAnswerCapture | None = None
    error: str | None = None
    gap_check_rejected: bool = False
    """The one-shot completion-gap check rejected this call (it will not run again)."""


def parse_final_answer_arguments(
    arguments: str, *, nulls_allowed: Callable[[], bool] = lambda: False
) -> FinalAnswerCapture | str:
    """The capture, or an error the model can act on (never an exception: workflow code).

    `nulls_allowed` (asked only when a call has one): an `output` or `summary` of null is
    taken as missing, as the released semantics take it; runs from before refused it."""
    try:
        raw = json.loads(arguments or "{}")
    except RecursionError:
        return "final-answer arguments are nested too deeply. Send a flat object."
    except ValueError:
        return "final-answer arguments are not valid JSON. Send an object with output and format."
    if not isinstance(raw, dict):
        return "final-answer arguments must be a JSON object with output, format and summary."
    fields = {k: raw[k] for k in ("output", "format", "summary", "confidence") if k in raw}
    nulls = [k for k in ("output", "summary") if k in fields and fields[k] is None]
    if nulls and nulls_allowed():
        fields = {k: v for k, v in fields.items() if k not in nulls}
    try:
        fields = {
            k: v if isinstance(v, str) or v is None else json.dumps(v) for k, v in fields.items()
        }
    except (RecursionError, ValueError):
        return "final-answer fields are nested too deeply. Send 'output' as a string."
    fields["format"] = (fields.get("format") or "text").strip().lower()
    try:
        capture = FinalAnswerCapture.model_validate({"output": "", **fields})
    except ValidationError as err:
        return f"final-answer arguments are invalid: {err.errors()[0]['msg']}"
    if not capture.output.strip():
        return "final-answer needs a non-empty 'output' holding the deliverable itself."
    # the format's head only: a 100,000-character one was the model's observation, and the
    # run's last observation, whole (past the limit of every other observation)
    if capture.format not in OUTPUT_FORMATS:
        return f"Unknown format {capture.format[:40]!r}: use one of {', '.join(OUTPUT_FORMATS)}."
    return capture


def judge_final_answer(
    arguments: str,
    *,
    task: str,
    required_tools: Collection[str],
    tools_used: Collection[str],
    available_tools: Collection[str],
    gap_check_done: bool,
    limit_answer: bool = False,
    nulls_allowed: Callable[[], bool] = lambda: False,
    bytes_checked: Callable[[], bool] = lambda: False,
) -> FinalAnswerVerdict:
    """The hard gate on a `final-answer` call (reference §1.2 and §1.4); with
    `limit_answer`, an output over ANSWER_MAX_CHARS is refused too (and, `bytes_checked`, one
    over ANSWER_MAX_BYTES: `answer_too_long`)."""
    if not can_complete(required_tools, tools_used):
        pending = missing_required_tools(required_tools, tools_used)
        return FinalAnswerVerdict(
            False,
            error="Cannot finalize yet. Still need to call: "
            + (", ".join(pending) or "required tools"),
        )
    if not gap_check_done:
        gaps = detect_completion_gaps(task, tools_used, available_tools)
        if gaps:
            listed = "\n".join(f"  • {g}" for g in gaps)
            return FinalAnswerVerdict(
                False,
                error="Cannot finalize yet. Still need to call: Not done yet — missing steps:\n"
                f"{listed}\nComplete these actions before calling final-answer.",
                gap_check_rejected=True,
            )
    parsed = parse_final_answer_arguments(arguments, nulls_allowed=nulls_allowed)
    if isinstance(parsed, str):
        return FinalAnswerVerdict(False, error=parsed)
    problem = (
        answer_too_long(parsed.output, bytes_checked=bytes_checked) if limit_answer else None
    ) or validate_output(parsed.output, parsed.format)
    if problem is not None:
        return FinalAnswerVerdict(False, error=problem)
    return FinalAnswerVerdict(True, capture=parsed)
