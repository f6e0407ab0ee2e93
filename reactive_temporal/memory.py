"""What an agent remembers of earlier runs, and how the model is shown it: as quoted data.

Lessons and earlier tool output were written by a model from what tools and web pages said;
any of it can carry instructions an attacker planted. So memory never goes into the system
prompt. It reaches the model in a user-role message labelled as notes from earlier runs,
every line quoted, with the label saying they are data and not instructions. Lessons carry
their source run and time, expire (30 days unless configured), and are chosen by relevance to
the task at hand (Postgres full-text search, in the store), a few at most.

Pure functions: the store reads (without credentials: `activities/memory_redaction.py`),
these format.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from reactive_temporal.js_numbers import js_round
from reactive_temporal.prompts import CHAT_NOTES_LABEL, NOTES_LABEL, quoted_block

LESSON_TTL_DAYS = 30
"""Lessons older than this are no longer used (AGENT_LESSON_TTL_DAYS changes it)."""
PRIOR_LESSONS = 5
"""At most this many lessons reach a run."""
LESSON_MAX_CHARS = 300
NOTES_MAX_CHARS = 2_500
"""The whole notes message, label included, stays under this."""
QUERY_MAX_CHARS = 2_000
"""How much of the task the relevance search reads (a 100k-character task is not a query)."""


@dataclass(frozen=True)
class LessonNote:
    """A stored lesson, as a run is shown it."""

    text: str
    run_id: str
    created_at: datetime


@dataclass(frozen=True)
class PriorRun:
    """The agent's last run, as the next run is shown it."""

    run_id: str
    outcome: str
    summary: str
    age_hours: float
    errors: Sequence[str] = ()


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def run_notes(prior: PriorRun | None, lessons: Iterable[LessonNote]) -> str | None:
    """The notes a new run starts with, or None when there is nothing to remember; at most
    NOTES_MAX_CHARS as the model reads them, quoted. Quoting puts "> " before every line: a
    summary, an error or a lesson of many short lines made notes of 4,000 characters, where
    the budget had counted each as one line. The last run's summary and errors are read as one
    line each (their line breaks spaces); a lesson is kept only while the whole fits."""
    lines: list[str] = []
    if prior is not None:
        lines += [
            f"Last run ({js_round(prior.age_hours)}h ago, {prior.run_id}): {prior.outcome}",
            _clip(_one_line(prior.summary), 600),
        ]
        errors = [_clip(_one_line(e), 200) for e in list(prior.errors)[:5]]
        if errors:
            lines.append("Errors in that run: " + "; ".join(errors))
    for lesson in lessons:
        line = (
            f"Lesson from {lesson.run_id} ({lesson.created_at:%Y-%m-%d}): "
            f"{_clip(lesson.text, LESSON_MAX_CHARS)}"
        )
        if len(quoted_block(NOTES_LABEL, "\n".join([*lines, line]))) > NOTES_MAX_CHARS:
            break
        lines.append(line)
    if not lines:
        return None
    return quoted_block(NOTES_LABEL, "\n".join(lines))


def _one_line(text: str) -> str:
    return " ".join(text.split())


def chat_notes(context: str) -> str | None:
    """What chat knows of the agent's runs (debrief, tool results, live state), quoted."""
    return quoted_block(CHAT_NOTES_LABEL, context) if context.strip() else None


def relevance_query_text(task: str) -> str:
    """The part of the task the full-text search reads."""
    return task[:QUERY_MAX_CHARS]
