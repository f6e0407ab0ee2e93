"""Label values of the metrics' series, at most MAX_LABELS distinct ones per label a process.

Whoever starts a run names its model and its agent: a multi-tenant deployment may name one
agent per customer. Prometheus keeps every series a process ever reported (the SDK runtime's
exporter, which serves the workflows' counters, too), so without a cap each new name made new
series for good and a scrape grew without end. Past the cap, names share `OTHER`.

Pure and dependency-free so that workflow code may import it (passed through the sandbox: one
count per worker process, like the series themselves). What a label says never feeds a
workflow decision.
"""

from __future__ import annotations

MAX_LABELS = 100
"""Distinct values one label takes in a worker process; later ones are `OTHER`."""
OTHER = "(other)"


class CappedLabel:
    """One label's values: each as itself while fewer than `cap` were seen, else `OTHER`."""

    def __init__(self, cap: int = MAX_LABELS) -> None:
        self.cap = cap
        self.seen: set[str] = set()

    def __call__(self, value: str) -> str:
        if value in self.seen:
            return value
        if len(self.seen) >= self.cap:
            return OTHER
        self.seen.add(value)
        return value


model_label = CappedLabel()
"""The `model` label of the LLM series (reactive_temporal.telemetry.metrics)."""
agent_label = CappedLabel()
"""The `agent` label of the runs and approvals counters (workflows/run_wrapup.py,
workflows/run_controls.py)."""
tool_label = CappedLabel()
"""The `tool` label of the tool and approvals series: a worker's tools are its own, but an MCP
server may list hundreds (and the series of a tool it drops stay for good)."""
