"""Configuration errors name the variable; cost comes from the price table."""

from __future__ import annotations

import openai
import pytest
from pydantic import ValidationError

from reactive_temporal.config import Settings
from reactive_temporal.hosting.worker_factory import llm_client, llm_connection_limits
from reactive_temporal.pricing import cost_of, price_for, register_price
from reactive_temporal.sanitize import database_named, redact_dsn


def test_bad_temporal_address_names_the_variable(monkeypatch):
    monkeypatch.setenv("TEMPORAL_ADDRESS", "not an address")
    with pytest.raises(ValidationError, match="TEMPORAL_ADDRESS='not an address' is not host:port"):
        Settings(_env_file=None)  # type: ignore[call-arg]


def test_bad_database_url_names_the_variable(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "mysql://nope")
    with pytest.raises(
        ValidationError, match="DATABASE_URL='mysql://nope' is not a PostgreSQL URL"
    ):
        Settings(_env_file=None)  # type: ignore[call-arg]


def test_blank_values_mean_unset_and_offline_model(monkeypatch):
    for name in ("TEMPORAL_ADDRESS", "DATABASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.setenv(name, "")
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert settings.temporal_address is None and settings.database_url is None
    assert settings.uses_offline_model


def test_env_file_is_read(tmp_path, monkeypatch):
    monkeypatch.delenv("AGENT_MODEL", raising=False)
    env = tmp_path / ".env"
    env.write_text("AGENT_MODEL=llama3.1\nOPENAI_BASE_URL=http://localhost:11434/v1\n")
    settings = Settings(_env_file=env)  # type: ignore[call-arg]
    assert settings.agent_model == "llama3.1" and not settings.uses_offline_model


def test_cost_from_the_price_table():
    assert cost_of("gpt-4o-mini", 1_000_000, 1_000_000) == pytest.approx(0.75)
    assert cost_of("gpt-4o-mini-2024-07-18", 1_000_000, 0) == pytest.approx(0.15)
    assert cost_of("unknown-model", 10**6, 10**6) == 0.0


def test_a_model_is_priced_by_its_own_name_its_family_or_its_snapshot_only():
    """ "openai/gpt-4o" and "GPT-4o" were unpriced (cost budgets never tripped), and any
    suffix counted as a snapshot's: "gpt-5-pro" was priced as "gpt-5"."""
    gpt_4o = price_for("gpt-4o")
    assert price_for("openai/gpt-4o") == price_for("GPT-4o") == gpt_4o is not None
    assert price_for("gpt-4o-2024-08-06") == price_for("gpt-4o-0613") == gpt_4o
    assert price_for("gpt-5-pro") is None and price_for("o1-mini") is None
    assert price_for("gpt-4o-latest") is None


def test_cached_prompt_tokens_are_billed_at_the_cached_price():
    """90,000 of 100,000 prompt tokens read from the cache: a quarter of the uncached price
    for gpt-5 (it was billed whole, four times the list price)."""
    assert cost_of("gpt-5", 100_000, 0, cached_tokens=90_000) == pytest.approx(0.023750)
    assert cost_of("gpt-5", 100_000, 0) == pytest.approx(0.125)
    register_price("no-cache-price", input_per_mtok=1.0, output_per_mtok=1.0)
    assert cost_of("no-cache-price", 10**6, 0, cached_tokens=10**6) == pytest.approx(1.0)


def test_price_table_is_extensible(monkeypatch):
    register_price("house-model", input_per_mtok=1.0, output_per_mtok=2.0)
    assert cost_of("house-model", 500_000, 500_000) == pytest.approx(1.5)
    monkeypatch.setenv(
        "AGENT_MODEL_PRICES", '{"env-model": {"input_per_mtok": 4, "output_per_mtok": 0}}'
    )
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert price_for("env-model", settings.model_prices) is not None
    assert cost_of("env-model", 10**6, 0, settings.model_prices) == pytest.approx(4.0)


@pytest.mark.parametrize(
    ("slots", "pool"), [(1, 10), (20, 10), (60, 30), (100, 50), (500, 50), (5_000, 50)]
)
def test_the_postgres_pool_follows_the_activity_slots(monkeypatch, slots, pool):
    monkeypatch.delenv("REACTIVE_TEMPORAL_DB_POOL_SIZE", raising=False)
    monkeypatch.setenv("REACTIVE_TEMPORAL_MAX_CONCURRENT_ACTIVITIES", str(slots))
    assert Settings(_env_file=None).store_pool_size() == pool  # type: ignore[call-arg]


def test_the_postgres_pool_size_is_an_operators_to_set(monkeypatch):
    monkeypatch.setenv("REACTIVE_TEMPORAL_DB_POOL_SIZE", "200")
    assert Settings(_env_file=None).store_pool_size() == 200  # type: ignore[call-arg]
    monkeypatch.setenv("REACTIVE_TEMPORAL_DB_POOL_SIZE", "0")
    with pytest.raises(ValidationError, match="REACTIVE_TEMPORAL_DB_POOL_SIZE"):
        Settings(_env_file=None)  # type: ignore[call-arg]


def test_a_workflow_task_waits_30_s_for_the_worker_that_holds_its_run(monkeypatch):
    monkeypatch.delenv("REACTIVE_TEMPORAL_STICKY_QUEUE_TIMEOUT", raising=False)
    assert Settings(_env_file=None).sticky_queue_timeout_seconds == 30  # type: ignore[call-arg]
    monkeypatch.setenv("REACTIVE_TEMPORAL_STICKY_QUEUE_TIMEOUT", "12.5")
    assert Settings(_env_file=None).sticky_queue_timeout_seconds == 12.5  # type: ignore[call-arg]
    monkeypatch.setenv("REACTIVE_TEMPORAL_STICKY_QUEUE_TIMEOUT", "0")
    with pytest.raises(ValidationError, match="REACTIVE_TEMPORAL_STICKY_QUEUE_TIMEOUT"):
        Settings(_env_file=None)  # type: ignore[call-arg]


@pytest.mark.parametrize(("slots", "connections"), [(100, 1_000), (500, 1_000), (3_000, 3_000)])
def test_the_model_client_has_a_connection_for_every_activity_slot(slots, connections):
    limits = llm_connection_limits(slots)
    assert limits.max_connections == connections
    # idle connections kept alive stay at the client's default: each one kept costs CPU on
    # every request (the client's pool walks them all)
    assert (
        limits.max_keepalive_connections
        == openai.DEFAULT_CONNECTION_LIMITS.max_keepalive_connections
    )


async def test_the_model_client_sends_through_aiohttp():
    """openai's aiohttp transport, not httpx2's: reading a streamed reply costs the worker's
    loop 0.56–0.77× the CPU (`bench.llm_transport`)."""
    client = llm_client(Settings(_env_file=None), "http://127.0.0.1:9/v1")  # type: ignore[call-arg]
    try:
        assert isinstance(client._client, openai.DefaultAioHttpClient)
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        ("postgresql://admin:S3cretPW@db/agents", "postgresql://admin:***@db/agents"),
        ("postgresq://admin:S3cretPW@db/agents", "postgresq://admin:***@db/agents"),
        ("postgresql://u:p@ss@h/db", "postgresql://u:***@h/db"),
        (
            "postgresql://admin@h/agents?password=S3cretPW&sslmode=require",
            "postgresql://admin@h/agents?password=***&sslmode=require",
        ),
        ("host=db user=x password=S3cretPW dbname=y", "host=db user=x password=*** dbname=y"),
        ("host=db password='a b\\' c' dbname=y", "host=db password=*** dbname=y"),
        ("postgresql://u@h:5432/db", "postgresql://u@h:5432/db"),
        ("postgresql://postgres:@localhost:5432/db", "postgresql://postgres:@localhost:5432/db"),
    ],
)
def test_a_connection_string_is_shown_without_its_password(dsn: str, shown: str):
    assert redact_dsn(dsn) == shown


@pytest.mark.parametrize(
    ("dsn", "named"),
    [
        ("postgresql://admin:S3cretPW@db.internal:6432/agents", "db.internal:6432/agents"),
        ("host=db user=x password=S3cretPW dbname=y", "db:5432/y"),
        ("postgresql:///agents", "local socket:5432/agents"),
        ("postgresql://u:pw@h/db?bad=?", "postgresql://u:***@h/db?bad=?"),
    ],
)
def test_a_worker_names_its_database_without_its_password(dsn: str, named: str):
    """The worker's start-up line names the database it records runs in (one pointed at
    another database split its runs' rows across the two without a word)."""
    assert database_named(dsn) == named


def test_a_bad_database_url_is_named_without_its_password():
    with pytest.raises(ValidationError) as refused:
        Settings(database_url="postgresq://admin:S3cretPW@db/agents")
    assert "postgresq://admin:***@db/agents" in str(refused.value)
    assert "S3cretPW" not in str(refused.value)


@pytest.mark.parametrize(
    ("headers", "problem"),
    [
        ('{"Host": "gw.example"}', "Host is set by the worker itself"),
        ('{"accept-encoding": "gzip"}', "accept-encoding is set by the worker itself"),
        ('{"Accept": "text/plain"}', "Accept is set by the worker itself"),
        ('{"Bad Name": "sk-gw-77"}', "'Bad Name' is not a header name"),
        ('{"X-Key": "sk-gw-77\\r\\nX-Admin: 1"}', "header 'X-Key': the value holds a line break"),
        ('{"X-Key": "  "}', "header 'X-Key': the value is empty"),
    ],
)
def test_llm_headers_that_cannot_be_added_are_named_without_their_value(
    monkeypatch: pytest.MonkeyPatch, headers: str, problem: str
):
    monkeypatch.setenv("AGENT_LLM_HEADERS", headers)
    with pytest.raises(ValidationError) as info:
        Settings(_env_file=None)  # type: ignore[call-arg]
    message = str(info.value)
    assert "AGENT_LLM_HEADERS" in message and problem in message
    assert "sk-gw-77" not in message


async def test_the_model_client_sends_the_llm_headers(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AGENT_LLM_HEADERS", '{"Helicone-Auth": " Bearer sk-gw "}')
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert settings.llm_headers == {"Helicone-Auth": "Bearer sk-gw"}
    client = llm_client(settings, "http://127.0.0.1:9/v1")
    try:
        assert client.default_headers["Helicone-Auth"] == "Bearer sk-gw"
    finally:
        await client.close()
