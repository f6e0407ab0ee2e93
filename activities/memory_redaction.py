"""Credentials kept out of what agents remember: where text enters their memory (a debrief, its
lessons, the last run chat quotes) and where it leaves it for a prompt (the notes a run starts
with, chat's context), so rows written before the scan are covered as well.

Within a run, what its tools read is the run's own data; its debrief and lessons go into
every later run's prompt, every chat and every operator's `lessons` listing, for weeks. The
scan (`reactive_temporal/secrets_scan.py`) replaces each credential by a marker naming its
kind. Each one found is counted (`reactive_temporal_secrets_redacted{where, kind}`) and logged
as a warning naming the run and the kinds, never the value: the tool output it came from is
where to look, and a lesson read with one is better deleted (`starter.py lessons delete`).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import TypeVar

from reactive_temporal.contracts.entity import RunFinished
from reactive_temporal.secrets_scan import redact_value
from reactive_temporal.telemetry.metrics import record_redactions

log = logging.getLogger(__name__)
T = TypeVar("T")


def redacted(value: T, *, where: str, owner: str) -> T:
    """`value` with the credentials in its strings replaced (the same object when there were
    none); counted and logged under `where`, naming `owner` ("run …", "agent …")."""
    clean, found = redact_value(value)
    if found:
        _report(found, where=where, owner=owner)
    return clean


def redacted_run(run: RunFinished, *, where: str) -> RunFinished:
    """A finished run as chat will quote it: its debrief and observations redacted, its agent's
    configuration (the operator's) as it is."""
    debrief, observations = redacted(
        (run.debrief, run.observations), where=where, owner=f"run {run.run_id}"
    )
    if debrief is run.debrief and observations is run.observations:
        return run
    return run.model_copy(update={"debrief": debrief, "observations": observations})


WHERE = {
    "synthesis": "the debrief its synthesis wrote",
    "debrief": "the debrief kept for it",
    "last_run": "what chat quotes of it",
    "earlier_debrief": "its debrief, read for a later run",
    "lessons": "a lesson it taught, read from memory",
    "live_runs": "its progress, quoted to chat",
    "chat": "the notes a chat turn is sent",
}
"""What each `where` names, for the warning."""


def _report(found: Counter[str], *, where: str, owner: str) -> None:
    record_redactions(where, found)
    kinds = ", ".join(f"{kind} ×{count}" if count > 1 else kind for kind, count in found.items())
    log.warning(
        "%s: %s replaced by a marker in %s (the value is not logged)",
        owner[:300],
        kinds,
        WHERE.get(where, where),
    )
