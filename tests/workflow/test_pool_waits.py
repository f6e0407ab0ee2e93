"""The worker's Postgres pool on a real Postgres: a request waiting for a connection, and
the wait it had, are served at the scrape as psycopg_pool counts them
(reactive_temporal/telemetry/pool_metrics.py), under the pool's name, until the pool closes."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from activities.store import Store
from reactive_temporal.telemetry import metrics
from tests.conftest import wait_for

pytestmark = pytest.mark.workflow


def pool_served(label: str) -> dict[str, float]:
    prefix = "reactive_temporal_db_pool_"
    return {
        sample.name.removeprefix(prefix): sample.value
        for family in text_string_to_metric_families(generate_latest(metrics.REGISTRY).decode())
        for sample in family.samples
        if sample.name.startswith(prefix) and sample.labels.get("pool") == label
    }


async def test_the_worker_pool_s_waits_for_a_connection_are_served(database_url: str):
    store = await Store.open(database_url, max_size=1, migrate=False)
    [label] = [name for name, pool in metrics.DB_POOL.watched() if pool is store.pool]
    try:
        assert pool_served(label)["requests_waiting"] == 0
        async with store.pool.connection():  # its one connection, held
            waiting = asyncio.create_task(store.pool.connection().__aenter__())
            await wait_for(lambda: pool_served(label)["requests_waiting"] == 1, seconds=10)
            served = pool_served(label)
            assert (served["connections"], served["connections_idle"]) == (1, 0)
            assert served["connections_max"] == 1
            await asyncio.sleep(0.05)
        conn = await waiting  # it gets the connection once released
        await store.pool.putconn(conn)
        served = pool_served(label)
        assert served["requests_waiting"] == 0
        assert served["requests_queued_total"] >= 1
        assert served["requests_wait_seconds_total"] >= 0.05
        assert served["requests_total"] >= 2
    finally:
        await store.close()
    assert pool_served(label) == {}  # a closed pool is no longer served
