"""What became of a model's reply, as a test sees it: what a watcher of the live output ends
up seeing (its text cut in random deltas, folded as readers fold them), what the step's
record keeps as its thinking, and what the worker counted it adapted to."""

from __future__ import annotations

import random

import psycopg

from reactive_temporal.contracts.events import RunEvent
from reactive_temporal.live_output import Shown, TextFold
from reactive_temporal.telemetry.metrics import REGISTRY


def cuts(text: str, rng: random.Random) -> list[str]:
    """`text` in random pieces (a tag may be split anywhere)."""
    pieces, start = [], 0
    while start < len(text):
        end = start + rng.randint(1, 4)
        pieces.append(text[start:end])
        start = end
    return pieces


def folded(
    deltas: list[tuple[int, str]], *, step: int = 1, calls_in_text: bool = False
) -> tuple[list[Shown], TextFold]:
    """What a fold shows of one step's `(attempt, delta)`s, positions counted per attempt,
    and the reply read as ended at the end (`calls_in_text`: as the deltas of a model whose
    calls are read from its text)."""
    fold, shown, written = TextFold(), [], dict[int, int]()
    for attempt, delta in deltas:
        position = written.get(attempt, 0)
        written[attempt] = position + len(delta)
        shown += fold.take(step, attempt, position, delta, calls_in_text=calls_in_text)
    return shown + [piece for _, piece in fold.settle()], fold


def view(shown: list[Shown]) -> tuple[str, str]:
    """The step's thinking and answer as a watcher ends up seeing them."""
    thinking, answer = "", ""
    for piece in shown:
        if piece.restart:
            thinking, answer = "", ""
        if piece.thinking:
            thinking += piece.text
        else:
            answer += piece.text
    return thinking, answer


def seen_by_step(events: list[RunEvent]) -> dict[int, tuple[str, str]]:
    """Each step's thinking and answer as a watcher of `events` ends up seeing them."""
    seen: dict[int, tuple[str, str]] = {}
    for e in events:
        if e.type != "text" or e.step is None:
            continue
        thinking, answer = ("", "") if e.restart else seen.get(e.step, ("", ""))
        delta = e.delta or ""
        seen[e.step] = (thinking + delta, answer) if e.thinking else (thinking, answer + delta)
    return seen


def thinking_of(database_url: str, run_id: str) -> list[str | None]:
    """Each model reply's thinking as its step's record keeps it, in order."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT step_result->>'thinking' FROM run_messages"
            " WHERE run_id = %s AND role = 'assistant' ORDER BY seq",
            (run_id,),
        ).fetchall()
    return [r[0] for r in rows]


def adaptations(model: str, kind: str) -> float:
    """What `reactive_temporal_llm_adaptations` counts of `kind` for `model` in this process."""
    sample = REGISTRY.get_sample_value(
        "reactive_temporal_llm_adaptations_total", {"model": model, "kind": kind}
    )
    return sample or 0.0
