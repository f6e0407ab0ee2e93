"""What a worker process has counted already, so that a workflow task tried again counts
nothing twice there.

`workflow.metric_meter()` records nothing while a workflow replays, but a workflow task that
failed or timed out after it counted (a bug, a slow worker past the task timeout, the
server refusing the task's completion because a signal came in meanwhile) left none of its
commands in history: its next try runs the same code anew, not replayed, and counted again
(measured: a run's end counted 2 after its last task failed once; tests/workflow/
test_metric_retries.py). The workflows count their events here first, keyed by the workflow
execution's run id and what they count, and add to a counter only the first time.

Its reach is the process: the server sends a failed task's next try to any worker of the
queue (a failure clears the run's sticky worker), and one that has not seen the key counts
it again. A deployment of N workers counts such an event at most N times; the alerts and the
dashboard read these counters knowing so (README, "Metrics, health and traces").

Pure and dependency-free so that workflow code may import it (passed through the sandbox).
It decides nothing a workflow does.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

KEPT = 10_000
"""Keys kept: the latest ones (a retried task follows its failed try within minutes)."""


class CountedOnce:
    """The latest `kept` keys this process counted."""

    def __init__(self, kept: int = KEPT) -> None:
        self.kept = kept
        self._keys: OrderedDict[tuple[str, ...], None] = OrderedDict()
        self._lock = threading.Lock()  # workflow tasks run on the worker's threads

    def first(self, *key: str) -> bool:
        """Whether `key` is new to this process (and now counted)."""
        with self._lock:
            if key in self._keys:
                self._keys.move_to_end(key)
                return False
            self._keys[key] = None
            if len(self._keys) > self.kept:
                self._keys.popitem(last=False)
            return True


COUNTED = CountedOnce()
"""The workflows' counts in this worker process (workflows/run_metrics.py)."""
