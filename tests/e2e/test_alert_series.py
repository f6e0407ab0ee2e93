"""Every series and label the alert rules select is one a real worker serves.

The busy worker of tests/support/busy_worker.py meets what the rules watch for (LLM requests
retried and refused, tools failing, runs stopped by their deadline, a run its code cannot
replay failing its workflow task, an agent's chat workflow stuck…). Its /metrics, scraped as
Prometheus would, must then hold every name, label and label value the rules select
(tests/support/alert_rules.py), so renaming a series in reactive_temporal/telemetry/metrics.py,
or an SDK upgrade renaming one of Temporal's, fails here instead of silencing an alert.

Served only after an outage: the SDK's poll failures, from a worker whose dev server is
killed (the second test). Checked against the project's enumerations rather than a scrape:
label values no test run produces (a run ending `budget_exceeded` or `error`, an endpoint
that cuts prompts or writes harmony channels; `KNOWN_VALUES`). The client certificate's
expiry gauge is served without TLS too, as 0 (the rules skip 0).
"""

from __future__ import annotations

import pytest

from tests.support.alert_rules import rules, selections, unserved
from tests.support.busy_worker import AFTER_AN_OUTAGE, Scrape

pytestmark = pytest.mark.e2e

SELECTIONS = [s for rule in rules() for s in selections(rule)]


async def test_every_series_the_alerts_select_is_served_by_a_real_worker(busy_worker: Scrape):
    wanted = [s for s in SELECTIONS if s.metric not in AFTER_AN_OUTAGE]
    problems = unserved(wanted, busy_worker.text)
    assert problems == [], "the alert rules select what this worker does not serve:\n" + (
        "\n".join(problems)
    )
    assert 'failure_reason="NonDeterminismError"' in busy_worker.text  # the rule's failure
    assert 'failure_reason="PayloadsTooLarge"' in busy_worker.text  # the stuck chat's


async def test_the_poll_failures_an_alert_selects_are_served_when_temporal_is_gone(
    worker_after_an_outage: Scrape,
):
    wanted = [s for s in SELECTIONS if s.metric in AFTER_AN_OUTAGE]
    assert {s.metric for s in wanted} == AFTER_AN_OUTAGE, "no rule selects these any more"
    problems = unserved(wanted, worker_after_an_outage.text)
    assert problems == [], "\n".join(problems) + "\n" + worker_after_an_outage.log_tail()
