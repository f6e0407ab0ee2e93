"""Histories as another release's worker would have left them, for replay tests."""

from __future__ import annotations

import json

from temporalio.client import WorkflowHistory


def with_bundle_in_input(history: WorkflowHistory, bundle: str) -> WorkflowHistory:
    """The run's history as if its starter had put `bundle` in its input (`patch_bundle`)
    while the worker that ran it did what it did: how a run looks that a starter one deploy
    ahead of its worker started."""
    started = history.events[0].workflow_execution_started_event_attributes
    payload = started.input.payloads[0]
    payload.data = json.dumps({**json.loads(payload.data), "patch_bundle": bundle}).encode()
    return history
