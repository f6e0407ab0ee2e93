"""Replaying a run's history against the workflow code this process has.

A change to a workflow must not break the runs in flight. `starter.py replay` and `export`,
the recorded histories of tests/histories and `api.replay_batch` check a history here, which
tells a change that breaks it (and the event it disagreed at) from a history this client
cannot read (an encryption key), so that neither is taken for the other.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from temporalio import workflow
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from reactive_temporal.api.workflow_ids import shown
from reactive_temporal.codec import unreadable_payload


@dataclass(frozen=True)
class ReplayReport:
    """Whether a history still replays against the current code, and where not."""

    workflow_id: str
    ok: bool
    events: int
    error: str | None = None
    event_id: int | None = None
    """The history event the current code disagreed with, when the error names one."""
    unreadable: bool = False
    """The history's payloads could not be read (an encryption key): not the code's fault."""
    foreign: bool = False
    """The history is of a workflow type this code does not define: nothing to patch."""


HISTORY_FILE_MAX_BYTES = 200_000_000
"""A history file read for replay is read this far and no further: Temporal keeps at most
50 MB of history per workflow run (protobuf), whose JSON is larger by its field names and
base64 payloads, but not four times as large. Read whole, `--file /dev/zero` (or a log named
by mistake) took every byte of memory until the kernel killed the process, or another."""

HISTORY_FILE_MAX_VALUES = 4_000_000
"""Objects and lists in a history file read for replay, at most (counted by their opening
brackets, before it is parsed): the Python a small one becomes is 50-60 times its two bytes
of JSON, so a file of `{},{},…` within HISTORY_FILE_MAX_BYTES took 1.8 GB per 20 MB parsed
(and then its replay ran for hours). An export holds about 9 per event (the committed
histories at most 8.4), and a run has at most 51,200 events."""
HISTORY_EVENTS_MAX = 4 * 51_200
"""Events in a history file read for replay, at most: Temporal ends a run at 51,200 (its
default limit.historyCount.error), and a file of more empty ones replayed for minutes, an
event at a time."""

_EVENT_ID = re.compile(r"(?:HistoryEvent\(id|event[_ ]?id|event)\W{0,3}(\d+)", re.IGNORECASE)


def history_to_json(history: WorkflowHistory) -> str:
    """The history as `temporal workflow show -o json` writes it, plus its workflow id.

    Replay needs the id: our workflows derive ids from it.
    """
    data = json.loads(history.to_json())
    return json.dumps({"workflowId": history.workflow_id, **data}, indent=1)


def load_history_file(path: Path, workflow_id: str | None = None) -> WorkflowHistory:
    """A history exported with `starter.py export` or `temporal workflow show -o json`.

    The latter has no workflow id: pass it, or the file name (without .json) is used.
    """
    try:
        with path.open("rb") as file:  # a pipe or /dev/stdin too: read as far as the limit
            text = file.read(HISTORY_FILE_MAX_BYTES + 1)
    except OSError as err:
        raise ValueError(f"cannot read history file {path}: {err}") from err
    if len(text) > HISTORY_FILE_MAX_BYTES:
        raise ValueError(
            f"{path} holds more than {HISTORY_FILE_MAX_BYTES:,} bytes, more than the JSON of any "
            "history Temporal keeps (50 MB at most, as protobuf): not a history export"
        )
    values = text.count(b"{") + text.count(b"[")
    if values > HISTORY_FILE_MAX_VALUES:
        raise ValueError(
            f"{path} holds {values:,} JSON objects and lists, more than the "
            f"{HISTORY_FILE_MAX_VALUES:,} of any history Temporal keeps: not a history export"
        )
    try:
        data = json.loads(text)
    except ValueError as err:
        raise ValueError(f"{path} is not a Temporal history JSON: {err}") from err
    except RecursionError:
        raise ValueError(
            f"{path} is not a Temporal history JSON: nested deeper than a JSON parser takes"
        ) from None
    if not isinstance(data, dict) or "events" not in data:
        raise ValueError(f"{path} is not a Temporal history JSON: no 'events'")
    events = data["events"]
    if not events or not isinstance(events, list) or not isinstance(events[0], dict):
        raise ValueError(f"{path} is not a Temporal history JSON: it holds no events")
    if len(events) > HISTORY_EVENTS_MAX:
        raise ValueError(
            f"{path} is not a Temporal history JSON: it holds {len(events):,} events, more "
            f"than the {HISTORY_EVENTS_MAX:,} of any run's history"
        )
    first = str(events[0].get("eventType", ""))
    if first not in ("EVENT_TYPE_WORKFLOW_EXECUTION_STARTED", "WorkflowExecutionStarted"):
        raise ValueError(
            f"{path} is not a Temporal history JSON: its first event is {shown(first)}, "
            "not WorkflowExecutionStarted"
        )
    found = data.pop("workflowId", None)
    if found is not None and not isinstance(found, str):
        raise ValueError(
            f"{path} is not a Temporal history JSON: its workflowId is a "
            f"{type(found).__name__}, not text"
        )
    try:
        return WorkflowHistory.from_json(workflow_id or found or path.stem, data)
    except Exception as err:
        raise ValueError(f"{path} is not a Temporal history JSON: {err}") from err


async def unreadable_history(history: WorkflowHistory, replayer: Replayer) -> str | None:
    """Why the replayer's converter cannot read the history's input, or None.

    A key missing or wrong, or plaintext refused: a replay that fails on that fails before
    any workflow code runs, and its failure says only "Encoded failure".
    """
    converter = replayer.config().get("data_converter")
    if converter is None or not history.events:
        return None
    started = history.events[0].workflow_execution_started_event_attributes
    try:
        await converter.decode(list(started.input.payloads))
    except Exception as err:
        return unreadable_payload(err)
    return None


def foreign_type(history: WorkflowHistory, replayer: Replayer) -> str | None:
    """Why the history is not one of the replayer's workflows (its type is another's), or None.

    Replayed, such a history failed as a change to the code does ("Workflow class … is not
    registered"), and `replay` said to guard the change with workflow.patched().
    """
    definitions = [workflow._Definition.from_class(cls) for cls in replayer.config()["workflows"]]
    defined = sorted(d.name for d in definitions if d is not None and d.name is not None)
    if len(defined) < len(definitions) or not history.events:
        return None  # a dynamic workflow takes any type
    started = history.events[0].workflow_execution_started_event_attributes
    if started.workflow_type.name in defined:
        return None
    return (
        f"its workflow type {started.workflow_type.name!r} is none of this code's "
        f"({', '.join(defined)}): a history of another application, not a change to patch"
    )


async def replay(history: WorkflowHistory, replayer: Replayer) -> ReplayReport:
    """Replay a history against the workflows this process has; never raises on a mismatch."""
    if (other := foreign_type(history, replayer)) is not None:
        return ReplayReport(
            history.workflow_id, False, len(history.events), error=other, foreign=True
        )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    failure = result.replay_failure
    if failure is None:
        return ReplayReport(history.workflow_id, True, len(history.events))
    if (problem := await unreadable_history(history, replayer)) is not None:
        return ReplayReport(
            history.workflow_id, False, len(history.events), error=problem, unreadable=True
        )
    message = str(failure)
    match = _EVENT_ID.search(message)
    return ReplayReport(
        history.workflow_id,
        False,
        len(history.events),
        error=f"{type(failure).__name__}: {message}",
        event_id=int(match.group(1)) if match else None,
    )
