"""The named activity option sets: each kind of activity gets the limits its job needs."""

from __future__ import annotations

from datetime import timedelta

from reactive_temporal.contracts.run import AgentConfig
from workflows.activity_options import (
    AGENT_SIGNAL,
    HEARTBEAT,
    INFRASTRUCTURE_RETRIES,
    RATE_LIMITED_RETRIES,
    RUN_QUERY,
    SESSION_LOAD,
    STORE,
    llm_options,
    tool_options,
)


def test_an_llm_call_leaves_room_beyond_the_llm_attempts_for_infrastructure_failures():
    options = llm_options(45, 3)
    assert options["start_to_close_timeout"] == timedelta(seconds=45)
    assert options["heartbeat_timeout"] == HEARTBEAT
    assert options["retry_policy"].maximum_attempts == (
        3 + INFRASTRUCTURE_RETRIES + RATE_LIMITED_RETRIES
    )


def test_a_tool_call_outlives_the_tools_own_timeout():
    agent = AgentConfig(agent_id="a", model="m", tool_timeout_seconds=30)
    options = tool_options(agent)
    assert options["start_to_close_timeout"] > timedelta(seconds=30)
    assert options["heartbeat_timeout"] == HEARTBEAT
    assert options["retry_policy"].maximum_attempts == 3


def test_writes_that_must_land_retry_until_they_do_and_waiting_people_get_an_answer():
    assert STORE["retry_policy"].maximum_attempts == 0  # unbounded
    assert AGENT_SIGNAL["retry_policy"].maximum_attempts == 0
    assert SESSION_LOAD["retry_policy"].maximum_attempts > 0  # a person waits: bounded
    assert RUN_QUERY["retry_policy"].maximum_attempts > 0
    assert "heartbeat_timeout" not in STORE  # local activities cannot heartbeat
