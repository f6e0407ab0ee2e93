"""The real workers whose /metrics the alert rules and the dashboard are checked against: one
busy worker and one that lost its Temporal, each started once a session for both
(tests/support/busy_worker.py says what they meet)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from temporalio.client import Client

from reactive_temporal.config import Settings
from reactive_temporal.embedded.scripted_llm import ScriptedLLM
from tests.support.alert_rules import Selection, rules, selections
from tests.support.authorizer import TEST_KEYS, Authorizer
from tests.support.busy_worker import AFTER_AN_OUTAGE, Scrape, busy_worker_scrape, outage_scrape
from tests.support.dashboard import dashboard, dashboard_selections
from tests.support.refusing_frontend import RefusingFrontend


def watched() -> list[Selection]:
    """What the alert rules and the dashboard select."""
    return [s for rule in rules() for s in selections(rule)] + dashboard_selections(dashboard())


@pytest.fixture(scope="session")
async def busy_worker(
    client: Client,
    settings: Settings,
    temporal_address: str,
    database_url: str,
    llm: ScriptedLLM,
    tmp_path_factory: pytest.TempPathFactory,
) -> Scrape:
    wanted = [s for s in watched() if s.metric not in AFTER_AN_OUTAGE]
    tmp = tmp_path_factory.mktemp("busy-worker")
    return await busy_worker_scrape(
        client, settings, temporal_address, database_url, llm, tmp, wanted
    )


@pytest.fixture(scope="session")
async def worker_after_an_outage(
    database_url: str, llm: ScriptedLLM, tmp_path_factory: pytest.TempPathFactory
) -> Scrape:
    wanted = [s for s in watched() if s.metric in AFTER_AN_OUTAGE]
    return await outage_scrape(database_url, llm, tmp_path_factory.mktemp("outage"), wanted)


@pytest.fixture
def authorizer(temporal_address: str) -> Iterator[RefusingFrontend]:
    """The dev server behind a front that answers as a Temporal authorizer does, by the API
    key each call carries (`TEST_KEYS`)."""
    with RefusingFrontend(temporal_address, Authorizer(TEST_KEYS)) as front:
        yield front
