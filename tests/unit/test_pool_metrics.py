"""The Postgres pool's series: psycopg_pool's `get_stats()` served as gauges and counters under
the pool's name, read at each scrape. A real pool's waits on a real Postgres are
tests/workflow/test_pool_waits.py's; here, what the collector makes of the stats it reads
(the dict psycopg_pool 3.3 returns: counters absent until first incremented, times in ms)."""

from __future__ import annotations

import gc

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from reactive_temporal.telemetry.pool_metrics import COUNTERS, GAUGES, PREFIX, PoolStats


class StatsOf:
    """A pool as the collector reads it: what its `get_stats()` returns."""

    def __init__(self, stats: dict[str, int] | Exception) -> None:
        self.stats = stats

    def get_stats(self) -> dict[str, int]:
        if isinstance(self.stats, Exception):
            raise self.stats
        return dict(self.stats)


FRESH = {"pool_min": 16, "pool_max": 50, "pool_size": 16, "pool_available": 16,
         "requests_waiting": 0}  # fmt: skip
"""A pool just opened: psycopg_pool's measures, and no counter yet."""
BUSY = {**FRESH, "pool_size": 50, "pool_available": 0, "requests_waiting": 3,
        "requests_num": 1200, "requests_queued": 40, "requests_wait_ms": 2500,
        "requests_errors": 2, "usage_ms": 90_000, "connections_num": 52, "connections_ms": 640,
        "connections_errors": 2, "connections_lost": 1, "returns_bad": 1}  # fmt: skip


def scrape(collector: PoolStats) -> dict[tuple[str, str], float]:
    """(sample name, pool) → value, as Prometheus reads the collector."""
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {
        (sample.name, sample.labels["pool"]): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.name.endswith("_created")
    }


def test_a_pool_s_stats_are_served_in_seconds_and_counters_it_has_not_started_as_0():
    stats = PoolStats()
    busy, fresh = StatsOf(BUSY), StatsOf(FRESH)
    assert stats.watch("store", busy) == "store"
    assert stats.watch("other", fresh) == "other"
    served = scrape(stats)
    assert served[(PREFIX + "requests_waiting", "store")] == 3
    assert served[(PREFIX + "connections", "store")] == 50
    assert served[(PREFIX + "connections_idle", "store")] == 0
    assert served[(PREFIX + "connections_max", "store")] == 50
    assert served[(PREFIX + "requests_total", "store")] == 1200
    assert served[(PREFIX + "requests_queued_total", "store")] == 40
    assert served[(PREFIX + "requests_wait_seconds_total", "store")] == pytest.approx(2.5)
    assert served[(PREFIX + "usage_seconds_total", "store")] == pytest.approx(90)
    assert served[(PREFIX + "connection_errors_total", "store")] == 2
    assert served[(PREFIX + "connections_lost_total", "store")] == 1
    # a fresh pool: every series there, its counters at 0, so a rate starts at its start
    fresh_series = {name: value for (name, pool), value in served.items() if pool == "other"}
    assert len(fresh_series) == len(GAUGES) + len(COUNTERS)
    assert fresh_series[PREFIX + "requests_wait_seconds_total"] == 0
    assert fresh_series[PREFIX + "connections_min"] == 16


def test_every_stat_psycopg_pool_keeps_is_served():
    """psycopg_pool names its stats in class constants: one it adds (or renames) fails here."""
    from psycopg_pool.base import BasePool

    kept = {value for name, value in vars(BasePool).items() if name.startswith(("_POOL_",
            "_REQUESTS_", "_CONNECTIONS_", "_USAGE_", "_RETURNS_"))}  # fmt: skip
    served = {stat for stat, *_ in GAUGES} | {stat for stat, *_ in COUNTERS}
    assert kept == served


def test_two_pools_of_one_name_are_told_apart_and_a_closed_one_is_no_longer_served():
    stats = PoolStats()
    first, second = StatsOf(FRESH), StatsOf(BUSY)
    assert stats.watch("store", first) == "store"
    assert stats.watch("store", second) == "store-2"  # two workers in one process
    assert {pool for _, pool in scrape(stats)} == {"store", "store-2"}
    stats.forget(first)
    assert {pool for _, pool in scrape(stats)} == {"store-2"}
    assert stats.watch("store", StatsOf(FRESH)) == "store"  # its name is free again


def test_a_pool_gone_without_being_forgotten_is_not_served():
    stats = PoolStats()
    stats.watch("store", StatsOf(FRESH))  # nothing else holds it
    gc.collect()
    assert scrape(stats) == {}


def test_a_pool_whose_stats_cannot_be_read_now_is_left_out_of_this_scrape():
    stats = PoolStats()
    kept = StatsOf(BUSY)
    racing = StatsOf(RuntimeError("dictionary changed size during iteration"))
    stats.watch("store", kept)
    stats.watch("racing", racing)
    assert {pool for _, pool in scrape(stats)} == {"store"}


def test_what_it_describes_is_what_it_serves():
    """tests/support/exported.py reads the series from `describe()`."""
    stats = PoolStats()
    pool = StatsOf(BUSY)
    stats.watch("store", pool)
    described = {(f.name, f.type) for f in stats.describe()}
    collected = {(f.name, f.type) for f in stats.collect()}
    assert described == collected
    assert all(list(f.samples) == [] for f in stats.describe())
