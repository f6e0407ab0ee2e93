"""Every series and label the Grafana dashboard selects is one a real worker serves, and the
series the unit tests take as exported (tests/support/exported.py) are the ones it serves.

The busy worker of tests/support/busy_worker.py (shared with the alert rules' test) runs what
each panel draws: runs ending in several ways and debriefed, LLM requests ok, retried,
refused and cancelled with their tokens and cost (and an estimate for the unreported), an
endpoint adaptation, tools ok, failing and cancelled, the runs' Postgres writes and its pool,
a tool call approved after waiting for it (the runs waiting are counted at the worker's
start, and each minute), a credential redacted from a debrief, and a workflow task failing.
Each panel's and each variable's query, its variables standing for any value, must then
select names and labels of its scrape; a value a matcher names must be served or be one the
project enumerates.

Not produced by a short run, and how they are checked instead:
- `temporal_long_request_failure` (Workers › Poll failures): the SDK serves it once polls have
  failed; a worker whose dev server is killed serves it (the second test).
- terminated_by `final_answer` and `end_turn` (the runs that succeeded): a run ends so on an
  operator's `final_answer` signal or a model that stops without the final-answer tool; they
  are in `TerminatedBy`, the enumeration `KNOWN_VALUES` accepts.
- Approval decisions other than `approved` (`denied`, `timed_out`, `abandoned`): in
  `names.APPROVAL_DECISIONS`, which `KNOWN_VALUES` accepts (tests/workflow/test_run_metrics.py
  counts each on a real server).
- The client certificate's expiry (Credentials › Client certificate expires in): served as 0
  without TLS, which the panel leaves out; tests/e2e/test_secure_connections.py serves a real
  one.
"""

from __future__ import annotations

from typing import cast

import annotated_types
import pytest
from prometheus_client.parser import text_string_to_metric_families

from reactive_temporal.contracts.run import AgentConfig
from tests.support.alert_rules import served, unserved
from tests.support.busy_worker import AFTER_AN_OUTAGE, Scrape
from tests.support.dashboard import dashboard, dashboard_selections
from tests.support.exported import disagreements, exported

pytestmark = pytest.mark.e2e

SELECTIONS = dashboard_selections(dashboard())


async def test_every_series_the_dashboard_selects_is_served_by_a_real_worker(busy_worker: Scrape):
    wanted = [s for s in SELECTIONS if s.metric not in AFTER_AN_OUTAGE]
    problems = unserved(wanted, busy_worker.text)
    assert problems == [], "the dashboard selects what this worker does not serve:\n" + (
        "\n".join(problems)
    )


async def test_the_poll_failures_the_dashboard_selects_are_served_when_temporal_is_gone(
    worker_after_an_outage: Scrape,
):
    wanted = [s for s in SELECTIONS if s.metric in AFTER_AN_OUTAGE]
    assert {s.metric for s in wanted} == AFTER_AN_OUTAGE, "no panel selects these any more"
    problems = unserved(wanted, worker_after_an_outage.text)
    assert problems == [], "\n".join(problems) + "\n" + worker_after_an_outage.log_tail()


async def test_the_series_taken_as_exported_are_the_ones_a_real_worker_serves(
    busy_worker: Scrape, worker_after_an_outage: Scrape
):
    busy, outage = served(busy_worker.text), served(worker_after_an_outage.text)
    assert disagreements(busy) == []
    assert disagreements(outage) == []
    never = sorted(set(exported()) - set(busy) - set(outage))
    assert never == [], f"taken as exported, and served by neither worker: {never}"


def longest_timeout() -> float:
    """The longest an agent may let a tool or its model run (AgentConfig's bounds)."""
    bounds = [
        float(cast(float, m.le))
        for name in ("tool_timeout_seconds", "llm_timeout_seconds")
        for m in AgentConfig.model_fields[name].metadata
        if isinstance(m, annotated_types.Le)
    ]
    assert len(bounds) == 2
    return max(bounds)


DURATIONS = {
    "reactive_temporal_llm_request_seconds": 1.0,
    "reactive_temporal_tool_seconds": 1.0,
    "temporal_activity_execution_latency": 1000.0,  # the SDK's milliseconds
}
"""Histograms of calls an agent's timeout bounds, whose quantiles the dashboard and the alerts
take, and their units per second."""


async def test_the_duration_histograms_reach_the_longest_timeout(busy_worker: Scrape):
    """Past its last finite bucket a histogram's quantile reads as that bucket's bound: the
    SDK's activity latency ended at 60 s and the LLM requests' at 300 s, so a tool or a model
    slow for 20 minutes was drawn as 60 s or 300 s."""
    top: dict[str, float] = {}
    for family in text_string_to_metric_families(busy_worker.text):
        if family.name in DURATIONS:
            for sample in family.samples:
                if sample.name.endswith("_bucket") and sample.labels["le"] != "+Inf":
                    bound = float(sample.labels["le"]) / DURATIONS[family.name]
                    top[family.name] = max(top.get(family.name, 0.0), bound)
    assert top.keys() == DURATIONS.keys(), top
    assert all(bound >= longest_timeout() for bound in top.values()), top
