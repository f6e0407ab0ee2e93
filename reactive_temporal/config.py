"""Configuration from the environment (and a `.env` file), validated once at start-up."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import (
    AliasChoices,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import SettingsConfigDict, SettingsError

from reactive_temporal.capabilities import ModelCapabilities
from reactive_temporal.http_guard import AllowList
from reactive_temporal.llm_endpoints import ModelEndpoint, checked_headers, endpoint_for
from reactive_temporal.memory import LESSON_TTL_DAYS
from reactive_temporal.pricing import ModelPrice
from reactive_temporal.worker_settings import WorkerSettings

if TYPE_CHECKING:
    from reactive_temporal.connection import TemporalConnection

DEFAULT_TASK_QUEUE = "reactive-temporal"
DEFAULT_MODEL = "gpt-4o-mini"
TEMPORAL_NAME_MAX_BYTES = 1000
"""Temporal's default length limit for ids and task queue names (`limit.maxIDLength`)."""
_HOST_PORT = re.compile(r"^[A-Za-z0-9_.\-\[\]:]+:\d{1,5}$")


class Settings(WorkerSettings):
    """Everything the worker, the starter and the Python API read from the environment.

    Unset server addresses mean "use the embedded stack": a Temporal dev server and an
    embedded Postgres under `data_dir`, started on demand. The database's settings
    (DATABASE_URL, DATABASE_URL_FILE) are `DatabaseSettings`', how a worker process runs
    `WorkerSettings`'.
    """

    # Values are never echoed in a validation error's text: they hold passwords and keys (a
    # message that names a value shows it redacted, as the DATABASE_URL check does).
    # No setting is infinite or NaN: `inf` seconds of graceful shutdown raised OverflowError.
    model_config = SettingsConfigDict(
        env_file=".env",
        extra="ignore",
        populate_by_name=True,
        hide_input_in_errors=True,
        allow_inf_nan=False,
    )

    temporal_address: str | None = None
    temporal_namespace: str = "default"
    temporal_task_queue: str = DEFAULT_TASK_QUEUE
    openai_base_url: str | None = None
    openai_api_key: str | None = None
    openai_api_key_file: str | None = None
    """A file holding the key instead, read again whenever it changes (`key_files`)."""
    agent_model: str = Field(default=DEFAULT_MODEL, min_length=1)
    data_dir: Path = Field(
        default=Path(".reactive-temporal"),
        validation_alias=AliasChoices("REACTIVE_TEMPORAL_DATA_DIR", "data_dir"),
    )
    workspace_dir: Path | None = Field(
        default=None,
        validation_alias=AliasChoices("REACTIVE_TEMPORAL_WORKSPACE", "workspace_dir"),
    )
    """Where file_read / file_write may work; defaults to `<data_dir>/workspace`."""
    model_prices: dict[str, ModelPrice] = Field(
        default_factory=dict,
        validation_alias=AliasChoices("AGENT_MODEL_PRICES", "model_prices"),
    )
    """Extra or overriding prices, e.g. AGENT_MODEL_PRICES='{"my-model": {"input_per_mtok": 0.1,
    "output_per_mtok": 0.4}}'."""
    model_capabilities: dict[str, ModelCapabilities] = Field(
        default_factory=dict,
        validation_alias=AliasChoices("AGENT_MODEL_CAPABILITIES", "model_capabilities"),
    )
    """What models accept, over the built-in table (reactive_temporal/capabilities.py), e.g.
    AGENT_MODEL_CAPABILITIES='{"my-deployment": {"reasoning": true, "context_tokens": 200000}}'."""
    llm_endpoints: dict[str, ModelEndpoint] = Field(
        default_factory=dict,
        validation_alias=AliasChoices("AGENT_LLM_ENDPOINTS", "llm_endpoints"),
    )
    """Other endpoints, by the models they serve (`llm_endpoints`): AGENT_LLM_ENDPOINTS=
    '{"claude-*": {"base_url": "https://api.anthropic.com/v1/", "api_key_env": "…"}}'."""
    llm_headers: dict[str, str] = Field(
        default_factory=dict,
        validation_alias=AliasChoices("AGENT_LLM_HEADERS", "llm_headers"),
    )
    """Headers sent with every request to the model's endpoint (runs, chat, debriefs): an LLM
    gateway's own key or routing, AGENT_LLM_HEADERS='{"Helicone-Auth": "Bearer sk-…"}'. An
    `Authorization` here replaces the one OPENAI_API_KEY makes."""
    context_tokens: int | None = Field(
        default=None,
        ge=1_024,
        validation_alias=AliasChoices("AGENT_CONTEXT_TOKENS", "context_tokens"),
    )
    """One context window for every model, over the table (a local model's real window)."""
    lesson_ttl_days: float = Field(
        default=LESSON_TTL_DAYS,
        gt=0,
        le=36_500,
        validation_alias=AliasChoices("AGENT_LESSON_TTL_DAYS", "lesson_ttl_days"),
    )
    """Lessons are used for this many days after the run that taught them."""
    encryption_keys: str | None = Field(
        default=None,
        validation_alias=AliasChoices("REACTIVE_TEMPORAL_ENCRYPTION_KEYS", "encryption_keys"),
    )
    """`id1:BASE64KEY,id2:…` turns payload encryption on; the first key encrypts, all decrypt."""
    encryption_required: bool = Field(
        default=False,
        validation_alias=AliasChoices(
            "REACTIVE_TEMPORAL_ENCRYPTION_REQUIRED", "encryption_required"
        ),
    )
    """Refuse payloads that arrive unencrypted (needs the keys)."""
    codec_token: str | None = Field(
        default=None,
        validation_alias=AliasChoices("REACTIVE_TEMPORAL_CODEC_TOKEN", "codec_token"),
    )
    """The bearer token every request to the codec server (`codec-server`) must carry."""
    http_allow: str | None = Field(
        default=None,
        validation_alias=AliasChoices("REACTIVE_TEMPORAL_HTTP_ALLOW", "http_allow"),
    )
    """Exceptions to http_get's public-addresses-only rule: comma-separated hostnames, IPs or
    CIDRs, each optionally with `:port` (see `reactive_temporal.http_guard`)."""

    # -- renewed credentials and an unreachable server (workers and clients alike) ----------
    credentials_poll_seconds: float = Field(
        default=10.0,
        gt=0,
        le=3_600,
        validation_alias=AliasChoices(
            "REACTIVE_TEMPORAL_CREDENTIALS_POLL", "credentials_poll_seconds"
        ),
    )
    """How often a worker (or a Python API process) looks at TEMPORAL_API_KEY_FILE and its
    TLS files for new ones."""
    unreachable_patience_seconds: float = Field(
        default=600.0,
        ge=0,
        le=86_400,
        validation_alias=AliasChoices(
            "REACTIVE_TEMPORAL_UNREACHABLE_PATIENCE", "unreachable_patience_seconds"
        ),
    )
    """How long a wait for a run's result (`run`, `watch`, `agent.run()`) outlasts a Temporal
    server it cannot reach: the run goes on meanwhile (a restart, a failover)."""
    _connection: TemporalConnection | None = PrivateAttr(default=None)

    @field_validator("temporal_address")
    @classmethod
    def _host_port(cls, value: str | None) -> str | None:
        if value is None or value.strip() == "":
            return None
        if not _HOST_PORT.match(value.strip()):
            raise ValueError(
                f"TEMPORAL_ADDRESS={value!r} is not host:port (for example localhost:7233)"
            )
        return value.strip()

    @field_validator("temporal_namespace", "temporal_task_queue")
    @classmethod
    def _server_name(cls, value: str, info: ValidationInfo) -> str:
        """A namespace or task queue the server can take.

        "" reached the server as "missing task queue name" (exit 1, as if the server had
        failed), and a name past its length limit as "taskQueue length exceeds limit".
        """
        variable = (info.field_name or "").upper()
        if not value.strip():
            raise ValueError(f"{variable} is empty")
        if not value.isprintable():
            raise ValueError(f"{variable}={value!r:.100} holds control characters")
        size = len(value.encode(errors="surrogatepass"))
        if size > TEMPORAL_NAME_MAX_BYTES:
            raise ValueError(
                f"{variable} is {size:,} bytes; Temporal takes at most {TEMPORAL_NAME_MAX_BYTES:,}"
            )
        return value

    def temporal_connection(self, *, again: bool = False) -> TemporalConnection:
        """How to reach Temporal, as the temporal CLI reads it.

        temporal.toml and the TEMPORAL_* variables, with this address and namespace first
        (they may come from `.env`). An address of None means the embedded dev server.
        ConnectionConfigError (a ValueError) names a bad profile, file or certificate.
        Read once, unless `again` (its files were renewed).
        """
        if self._connection is None or again:
            from reactive_temporal.connection import load_connection

            explicit = "temporal_namespace" in self.model_fields_set
            self._connection = load_connection(
                address=self.temporal_address,
                namespace=self.temporal_namespace if explicit else None,
                environ={**_temporal_variables_in_env_file(), **os.environ},
            )
        return self._connection

    @field_validator("http_allow")
    @classmethod
    def _allow_list(cls, value: str | None) -> str | None:
        AllowList.parse(value)  # ValueError names the bad entry
        return value

    @model_validator(mode="after")
    def _required_needs_keys(self) -> Settings:
        if self.encryption_required and not (self.encryption_keys or "").strip():
            raise ValueError(
                "REACTIVE_TEMPORAL_ENCRYPTION_REQUIRED is on but REACTIVE_TEMPORAL_ENCRYPTION_KEYS "
                "is not set: there would be no key to require"
            )
        return self

    @field_validator("llm_headers")
    @classmethod
    def _addable_headers(cls, value: dict[str, str]) -> dict[str, str]:
        return checked_headers(value)

    @field_validator("openai_base_url", "openai_api_key", "openai_api_key_file")
    @classmethod
    def _blank_is_unset(cls, value: str | None) -> str | None:
        return value.strip() if value and value.strip() else None

    @model_validator(mode="after")
    def _one_key(self) -> Settings:
        if self.openai_api_key is not None and self.openai_api_key_file is not None:
            raise ValueError("OPENAI_API_KEY and OPENAI_API_KEY_FILE are both set: set one")
        return self

    @property
    def uses_offline_model(self) -> bool:
        """No endpoint and no key configured: the demo runs on the offline scripted model."""
        keys = (self.openai_api_key, self.openai_api_key_file)
        return self.openai_base_url is None and keys == (None, None)

    def routed(self, model: str) -> bool:
        """Whether an AGENT_LLM_ENDPOINTS pattern names `model`: its calls go there.

        Never to the default endpoint, nor to the offline scripted model in its place.
        """
        return endpoint_for(model, self.llm_endpoints) is not None

    @property
    def http_allow_list(self) -> AllowList:
        """The addresses `http_get` may reach beyond the public internet."""
        return AllowList.parse(self.http_allow)

    @property
    def workspace(self) -> Path:
        """Where the file tools may read and write."""
        return (self.workspace_dir or self.data_dir / "workspace").resolve()


def _temporal_variables_in_env_file(path: Path = Path(".env")) -> dict[str, str]:
    """TEMPORAL_* from the `.env` file Settings reads, so TLS and API keys may live there.

    The process environment wins, as it does for every other setting.
    """
    if not path.is_file():
        return {}
    from dotenv import dotenv_values

    return {
        k: v for k, v in dotenv_values(path).items() if k.startswith("TEMPORAL_") and v is not None
    }


def environment_variable(field: str) -> str:
    """The environment variable a setting is read from (`agent_model` → AGENT_MODEL)."""
    if field not in Settings.model_fields:
        return field
    alias = Settings.model_fields[field].validation_alias
    names = [a for a in getattr(alias, "choices", []) if isinstance(a, str) and a.isupper()]
    return names[0] if names else field.upper()


def settings_error_message(err: Exception) -> str:
    """pydantic-settings names the field; people set the environment variable: name that."""
    text = str(err)
    match = re.search(r'field "(\w+)"', text)
    if match and match.group(1) in Settings.model_fields:
        return f"{environment_variable(match.group(1))} is not valid ({text}); it must be JSON"
    return text


def _nested_too_deep() -> str:
    """The setting whose JSON (in the environment or `.env`) nests past the parser's limit."""
    from dotenv import dotenv_values

    given: dict[str, str] = {
        name.upper(): value
        for name, value in {**dotenv_values(".env"), **os.environ}.items()
        if value is not None
    }
    for field in Settings.model_fields:
        try:
            json.loads(given.get(environment_variable(field), "0"))
        except RecursionError:
            return field
        except ValueError:
            pass
    return "a JSON setting"


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment, with explicit overrides (None values are ignored).

    The Temporal address and namespace are the connection's (`temporal_connection()`): a
    `temporal.toml` profile's address counts as configured, as TEMPORAL_ADDRESS does.
    """
    try:
        settings = Settings(**{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]
    except RecursionError:  # pydantic-settings names a JSON setting that is not JSON, not this
        raise SettingsError(
            f'error parsing value for field "{_nested_too_deep()}": JSON nested deeper than '
            "a parser takes"
        ) from None
    connection = settings.temporal_connection()
    settings.temporal_address = connection.address
    settings.temporal_namespace = connection.namespace
    return settings
