"""Contracts of a run's live output: the events watchers get and the rows activities write.

`watch`, `agent.events()` and `agent.run_stream()` yield `RunEvent`s.

A run's events live in Postgres (`run_events`), not in its Temporal history, so streaming a
reply in 1 or 50 chunks adds nothing to the history (measured in bench/streaming.py). Each
stored event has a dense per-run `offset`: a watcher that attaches late or reconnects reads
from 0 or from where it stopped. `finished` is not stored: the reader makes it from the
run's close (its result, or its status when it ended without one).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from reactive_temporal.contracts.internal import InternalPayload
from reactive_temporal.contracts.result import AgentResult

RunEventType = Literal["iteration", "text", "tool_start", "tool_end", "approval", "finished"]

STORED_EVENT_TYPES: tuple[RunEventType, ...] = (
    "iteration",
    "text",
    "tool_start",
    "tool_end",
    "approval",
)


class NewEvent(BaseModel):
    """One event as an activity appends it to the run's log."""

    type: RunEventType
    step: int
    """The transcript position of the LLM step or tool call it belongs to."""
    position: int = 0
    """`text`: the delta's character offset in its step's reply (with `"thinking": true` in
    its data, in the thinking its endpoint sent apart)."""
    data: dict[str, Any] = Field(default_factory=dict)
    key: str | None = None
    """Events with a key are written once per run, however often their activity is retried
    (`once_key`); text deltas have none."""


def once_key(kind: str, step: int, temporal_run: str | None) -> str:
    """The key of an event written once for a step of one Temporal run (`tool_start:12:…`).

    A retried attempt does not write it again, and a reset run's new timeline (a new run id,
    the same positions) writes its own, where the old timeline's key hid it from watchers.
    """
    return f"{kind}:{step}:{temporal_run or ''}"


class RecordRunEventsInput(InternalPayload):
    """The `record_run_events` activity's input (the run's approval events)."""

    run_id: str
    events: list[NewEvent]


class RunEvent(BaseModel):
    """One event of a run's live output, as watchers receive it.

    `watch --json` prints one per line, without its unset fields.
    """

    type: RunEventType
    run_id: str
    offset: int | None = None
    """Its place in the run's log (resume with `from_offset=offset + 1`); None for
    `finished`, which is not stored."""
    at: datetime | None = None
    step: int | None = None
    iteration: int | None = None
    delta: str | None = None
    """`text`: the model's new text. The deltas of a step join to its reply (its thinking
    and its answer, each joined apart); after a `restart`, from the restart on."""
    thinking: bool | None = None
    """`text`: True when the delta is the model's thinking, not its answer: thinking it
    wrote into its text (`<think>…</think>`, Magistral's `[THINK]…[/THINK]`, tags left out)
    or that its endpoint sent apart (`reasoning_content`, `reasoning`). A step's thinking
    comes before its answer; joined, each is what the step's record keeps."""
    restart: bool | None = None
    """`text`: what was shown of the step so far (thinking and answer) is replaced, from
    this delta on: a retried call that answered differently, or text shown as the answer
    that turned out to be thinking (a `</think>` the chat template had opened). A restart
    can be followed by more deltas of the same stored row (its answer after its thinking),
    with the same `offset`."""
    call_id: str | None = None
    tool: str | None = None
    arguments: str | None = None
    success: bool | None = None
    duration_ms: int | None = None
    preview: str | None = None
    """`tool_end`: the start of the observation the model reads."""
    status: str | None = None
    """`approval`: pending, approved or denied; `finished`: completed, terminated, …"""
    by: str | None = None
    reason: str | None = None
    result: AgentResult | None = None
    """`finished`: the run's result (None when it ended without one: terminated, failed)."""
