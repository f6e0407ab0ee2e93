"""The worker's Postgres pool, as Prometheus series: psycopg_pool's own `get_stats()` read at
each scrape.

A pool too small for the load shows first as requests waiting for a connection: each LLM and
tool step writes its record through the pool, and a step that waits holds its activity slot
(and, for the runs' local-activity writes, its workflow's task) meanwhile. Nothing showed it:
the steps were only slower. psycopg_pool counts it all already (requests, waits, connections
opened, lost and failed); this reads those counts when Prometheus asks, so the event loop pays
nothing between scrapes.

Counters psycopg_pool has not incremented yet are absent from its stats: served as 0, so a
rate over them starts at the pool's start, not at its first wait. Its milliseconds are served
in seconds, as Prometheus names them.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Iterator
from typing import Any, Protocol

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

log = logging.getLogger(__name__)

PREFIX = "reactive_temporal_db_pool_"


class Pool(Protocol):
    """What is read of a psycopg_pool pool (sync or async)."""

    def get_stats(self) -> dict[str, int]: ...


GAUGES: tuple[tuple[str, str, str], ...] = (
    ("pool_size", "connections", "Connections the pool holds open, in use or idle."),
    ("pool_available", "connections_idle", "Connections idle in the pool, ready to hand out."),
    ("pool_max", "connections_max", "The most connections the pool opens (its max_size)."),
    ("pool_min", "connections_min", "The connections the pool keeps open when idle."),
    (
        "requests_waiting",
        "requests_waiting",
        "Requests for a connection waiting now: every connection is in use.",
    ),
)
"""psycopg_pool's measures of now: (its stat, our name after PREFIX, help)."""

COUNTERS: tuple[tuple[str, str, float, str], ...] = (
    ("requests_num", "requests", 1.0, "Requests for a connection."),
    ("requests_queued", "requests_queued", 1.0, "Requests that had to wait for a connection."),
    (
        "requests_wait_ms",
        "requests_wait_seconds",
        0.001,
        "Time requests waited for a connection, summed (its rate is how many wait on average).",
    ),
    (
        "requests_errors",
        "requests_errors",
        1.0,
        "Requests that got no connection: the pool's timeout passed (10 s) or it was closing.",
    ),
    ("usage_ms", "usage_seconds", 0.001, "Time connections were held by their users, summed."),
    ("returns_bad", "returns_bad", 1.0, "Connections returned to the pool in a bad state."),
    ("connections_num", "connections_opened", 1.0, "Connections the pool tried to open."),
    ("connections_ms", "connect_seconds", 0.001, "Time spent opening connections, summed."),
    (
        "connections_errors",
        "connection_errors",
        1.0,
        "Connections the pool failed to open (Postgres down, refusing, out of connections).",
    ),
    (
        "connections_lost",
        "connections_lost",
        1.0,
        "Connections found broken when checked (a Postgres restart, a dropped network path).",
    ),
)
"""psycopg_pool's counters since the pool opened: (its stat, our name after PREFIX without
`_total`, the scale to our unit, help)."""


class PoolStats:
    """The pools this process watches, by name (the `pool` label); read at each scrape."""

    def __init__(self) -> None:
        self._pools: dict[str, weakref.ref[Any]] = {}
        self._lock = threading.Lock()

    def watch(self, name: str, pool: Pool) -> str:
        """Serve `pool`'s stats under `name` (`name-2`, `name-3`… while one of that name is
        watched already, as several workers in one process have); returns the name used.
        Forgotten when `forget` is called or the pool is gone."""
        with self._lock:
            self._drop_gone()
            label, n = name, 1
            while label in self._pools:
                n += 1
                label = f"{name}-{n}"
            self._pools[label] = weakref.ref(pool)
            return label

    def forget(self, pool: Pool) -> None:
        with self._lock:
            self._pools = {k: ref for k, ref in self._pools.items() if ref() not in (None, pool)}

    def _drop_gone(self) -> None:
        self._pools = {k: ref for k, ref in self._pools.items() if ref() is not None}

    def watched(self) -> list[tuple[str, Pool]]:
        with self._lock:
            return [
                (name, pool) for name, ref in self._pools.items() if (pool := ref()) is not None
            ]

    def describe(self) -> Iterator[Metric]:
        """The families this serves, without samples (what tests/support/exported.py reads)."""
        return iter(self._families())

    def collect(self) -> Iterator[Metric]:
        """Each watched pool's stats now (prometheus_client's Collector protocol)."""
        families = self._families()
        for name, pool in self.watched():
            try:
                stats = pool.get_stats()
            except RuntimeError as err:  # its stats changed while read (another thread)
                log.debug("pool %s's stats not read this scrape: %s", name, err)
                continue
            for family, stat, scale in zip(families, self._stats(), self._scales(), strict=True):
                family.add_metric([name], stats.get(stat, 0) * scale)
        return iter(families)

    @staticmethod
    def _families() -> list[GaugeMetricFamily | CounterMetricFamily]:
        gauges: list[GaugeMetricFamily | CounterMetricFamily] = [
            GaugeMetricFamily(PREFIX + ours, text, labels=["pool"]) for _, ours, text in GAUGES
        ]
        counters: list[GaugeMetricFamily | CounterMetricFamily] = [
            CounterMetricFamily(PREFIX + ours, text, labels=["pool"])
            for _, ours, _, text in COUNTERS
        ]
        return gauges + counters

    @staticmethod
    def _stats() -> list[str]:
        return [stat for stat, _, _ in GAUGES] + [stat for stat, _, _, _ in COUNTERS]

    @staticmethod
    def _scales() -> list[float]:
        return [1.0 for _ in GAUGES] + [scale for _, _, scale, _ in COUNTERS]
