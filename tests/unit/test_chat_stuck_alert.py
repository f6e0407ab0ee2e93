"""ReactiveTemporalAgentChatStuck pages for an agent's chat workflow whose task keeps failing,
not for one failure that the next attempt got past.

It fired on any single AgentWorkflow workflow-task failure within 15 minutes: a one-off
deadlock-detector failure on a CPU-starved worker (the next attempt completes) paged as a
stuck chat. Evaluated here over counters as a worker exports them
(`temporal_workflow_task_execution_failed`, scraped every 15 s), with tests/support/promql_eval.
"""

from __future__ import annotations

from tests.support.alert_rules import rules
from tests.support.promql_eval import Series, firing

RULE = next(r for r in rules() if r["alert"] == "ReactiveTemporalAgentChatStuck")
SCRAPE = 15.0
HOUR = 3600.0
LABELS = {
    "namespace": "default",
    "task_queue": "agents",
    "workflow_type": "AgentWorkflow",
    "failure_reason": "WorkflowError",
    "instance": "worker-1:9464",
    "job": "workers",
}


def for_seconds() -> float:
    text = str(RULE["for"])
    units = {"s": 1, "m": 60, "h": 3600}
    return float(text[:-1]) * units[text[-1]]


def counter(failures: list[float], *, until: float, labels: dict[str, str] = LABELS) -> Series:
    """The failure counter a worker exports, scraped every SCRAPE seconds until `until`: it
    appears with the first failure (the SDK exports no zero before it)."""
    samples = []
    t = 0.0
    while t <= until:
        count = sum(1 for f in failures if f <= t)
        if count:
            samples.append((t, float(count)))
        t += SCRAPE
    return Series("temporal_workflow_task_execution_failed", labels, samples)


def stuck_attempts(first: float, until: float) -> list[float]:
    """When a task that fails every attempt fails: at once twice, then after a backoff that
    doubles from 10 s up to the server's 10 minutes (history.workflowTaskRetryMaxInterval)."""
    times = [first, first + 1, first + 2]
    wait = 10.0
    while times[-1] + wait <= until:
        times.append(times[-1] + wait)
        wait = min(wait * 2, 600.0)
    return times


def evaluations(until: float) -> list[float]:
    return [t * 30.0 for t in range(int(until // 30) + 1)]  # a rule group's 30 s interval


def test_a_one_off_failure_does_not_page():
    """One failure, the next attempt completes: the counter stays at 1 for good."""
    span = 2 * HOUR
    series = [counter([600.0], until=span)]
    assert firing(RULE["expr"], series, evaluations(span), for_seconds()) == []


def test_two_failures_an_hour_apart_do_not_page():
    span = 3 * HOUR
    series = [counter([600.0, 600.0 + HOUR], until=span)]
    assert firing(RULE["expr"], series, evaluations(span), for_seconds()) == []


def test_a_one_off_on_a_worker_that_failed_long_ago_does_not_page():
    """A series seen before (an old failure) rising once more is still one failure."""
    span = 4 * HOUR
    series = [counter([60.0, 2 * HOUR], until=span)]
    assert firing(RULE["expr"], series, evaluations(span), for_seconds()) == []


def test_a_task_that_keeps_failing_pages_within_minutes_and_until_it_stops():
    """Stuck for 3 hours (retried every 10 minutes once the backoff tops out), then reset."""
    start, reset, span = 600.0, 600.0 + 3 * HOUR, 5 * HOUR
    failures = stuck_attempts(start, reset)
    series = [counter(failures, until=span)]
    fired = firing(RULE["expr"], series, evaluations(span), for_seconds())
    assert fired and fired[0] - start <= 5 * 60, fired[:3]
    # every evaluation from then on while it is stuck
    stuck = [t for t in evaluations(span) if fired[0] <= t <= reset]
    assert set(stuck) <= set(fired), sorted(set(stuck) - set(fired))[:3]
    # and it resolves within 20 minutes of the last failure
    assert max(fired) - failures[-1] <= 20 * 60, (max(fired), failures[-1])


def test_a_worker_restart_while_stuck_keeps_it_paging():
    """The counter starts again from zero on the worker that replaced the first."""
    start, restart, span = 600.0, 600.0 + HOUR, 600.0 + 2 * HOUR
    failures = stuck_attempts(start, span)
    before = [f for f in failures if f < restart]
    after = [f - restart for f in failures if f >= restart]
    second = {**LABELS, "instance": "worker-2:9464"}
    first_worker = counter(before, until=restart)
    replaced = counter(after, until=span - restart, labels=second)
    replaced = Series(replaced.name, second, [(t + restart, v) for t, v in replaced.samples])
    fired = firing(RULE["expr"], [first_worker, replaced], evaluations(span), for_seconds())
    stuck = [t for t in evaluations(span) if fired and fired[0] <= t]
    assert fired and set(stuck) <= set(fired), sorted(set(stuck) - set(fired))[:3]
