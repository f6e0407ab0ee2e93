"""`starter.py check`'s model endpoints: each one a worker would call answers with its key.

`GET /models` costs nothing and needs the key a completion needs, so it tells a refused key
(401, 403), an endpoint out of reach or not trusted, before a run is billed a failed step.
Some gateways do not serve /models (404): reachable, the key unchecked, a warning. Each
endpoint is asked with the client a worker would build for it (`endpoint_client`: its key,
from the variable or the file, its headers), and each answer says which setting to change,
never the key.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reactive_temporal.config import Settings
from reactive_temporal.errors import root_cause
from reactive_temporal.hosting.preflight import Check, Late, within
from reactive_temporal.sanitize import redact_dsn

if TYPE_CHECKING:
    import openai

OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
"""Where the openai client sends requests when OPENAI_BASE_URL is unset."""


@dataclass(frozen=True)
class ModelEndpointTarget:
    """One endpoint a worker calls: its row's name, URL, the settings behind them, and its
    AGENT_LLM_ENDPOINTS pattern (None: OPENAI_BASE_URL's)."""

    name: str
    base_url: str
    url_setting: str
    key_setting: str
    pattern: str | None = None


def endpoint_targets(settings: Settings) -> list[ModelEndpointTarget]:
    """OPENAI_BASE_URL's endpoint (unless the offline model stands in), then each of
    AGENT_LLM_ENDPOINTS's, in its order."""
    targets = []
    if not settings.uses_offline_model:
        key_setting = "OPENAI_API_KEY_FILE" if settings.openai_api_key_file else "OPENAI_API_KEY"
        if any(name.lower() == "authorization" for name in settings.llm_headers):
            key_setting = "AGENT_LLM_HEADERS' Authorization"
        targets.append(
            ModelEndpointTarget(
                "model endpoint",
                settings.openai_base_url or OPENAI_DEFAULT_URL,
                "OPENAI_BASE_URL",
                key_setting,
            )
        )
    for pattern, endpoint in settings.llm_endpoints.items():
        where = f"AGENT_LLM_ENDPOINTS[{pattern!r}]"
        if endpoint.api_key_file is not None:
            key_setting = f"{where} api_key_file"
        elif endpoint.api_key_env is not None:
            key_setting = f"{endpoint.api_key_env} ({where} api_key_env)"
        else:
            key_setting = f"{where} api_key_env (none set)"
        targets.append(
            ModelEndpointTarget(
                f"model endpoint {pattern}",
                endpoint.base_url,
                f"{where} base_url",
                key_setting,
                pattern,
            )
        )
    return targets


async def model_checks(settings: Settings, seconds: float) -> list[Check]:
    """A row for each endpoint, asked together; the offline model's when it stands in for
    OPENAI_BASE_URL (nothing to reach: the worker starts its own)."""
    rows = []
    if settings.uses_offline_model:
        rows.append(
            Check(
                "model endpoint",
                "ok",
                "the offline scripted model (no OPENAI_BASE_URL or OPENAI_API_KEY set): "
                "nothing to reach; set them for a real model",
            )
        )
    asked = [probe(settings, target, seconds) for target in endpoint_targets(settings)]
    return rows + list(await asyncio.gather(*asked))


async def probe(settings: Settings, target: ModelEndpointTarget, seconds: float) -> Check:
    """`GET {base_url}/models` with the endpoint's key and headers, as a worker sends them."""
    # imported here: the worker's modules are a second's import (`hosting/runtime.py`)
    from reactive_temporal.hosting.worker_factory import llm_client, route_client

    url = redact_dsn(target.base_url)
    try:  # the client the worker builds: its key (variable or file) and headers
        if target.pattern is None:
            client = llm_client(settings)
        else:
            client = route_client(settings, target.pattern)
    except ValueError as err:  # names the variable or the file, not the key
        return Check(target.name, "fail", str(err))
    try:
        page = await within(seconds, client.models.list(timeout=seconds), url)
    except Late as err:
        return Check(target.name, "fail", f"{err} (check {target.url_setting})")
    except Exception as err:
        return _refusal(target, url, err)
    finally:
        await client.close()
    count = len(getattr(page, "data", None) or [])
    return Check(target.name, "ok", f"{url} accepts the key ({count} models listed)")


def _refusal(target: ModelEndpointTarget, url: str, err: Exception) -> Check:
    """What a failed `/models` says, in one line, with the setting to change. The endpoint's
    own message is left out: a provider's 401 may quote the key."""
    import openai

    status = err.status_code if isinstance(err, openai.APIStatusError) else None
    if status in (401, 403):
        return Check(
            target.name,
            "fail",
            f"{url} refused the key (HTTP {status}): set {target.key_setting} to a key it accepts",
        )
    if status == 404:
        return Check(
            target.name,
            "warn",
            f"{url} has no /models (HTTP 404; some gateways lack it): reachable, the key "
            f"not checked (if every call fails 404, check {target.url_setting})",
        )
    if status is not None:
        return Check(target.name, "fail", f"{url} answered /models with HTTP {status}")
    if isinstance(err, openai.APIConnectionError | openai.APITimeoutError):
        return Check(target.name, "fail", _unreachable(target, url, err))
    return Check(  # a 200 the client could not read as a list of models
        target.name,
        "warn",
        f"{url} answered /models with what is not a list of models ({type(err).__name__})",
    )


def _unreachable(target: ModelEndpointTarget, url: str, err: openai.APIError) -> str:
    """A connection that failed, in the machine's words (the client's own are "Connection
    error." or "Request timed out." whatever happened)."""
    from activities.llm_errors import untrusted_reason  # the model client's: when it runs

    if (reason := untrusted_reason(err)) is not None:
        return (
            f"{url}'s TLS certificate is not trusted ({reason}): SSL_CERT_FILE may name a "
            "bundle holding its CA"
        )
    cause = " ".join(root_cause(err).split())[:300]
    return f"cannot reach {url}: {cause} (check {target.url_setting})"
