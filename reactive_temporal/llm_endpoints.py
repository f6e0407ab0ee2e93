"""More than one model endpoint in one worker: which models go where, and with what headers.

A worker talks to `OPENAI_BASE_URL` (with `OPENAI_API_KEY` and `AGENT_LLM_HEADERS`). Agents of
one deployment often want more: runs on a hosted model and debriefs synthesized by a cheap
local one, or one agent on Anthropic and another on OpenAI. `AGENT_LLM_ENDPOINTS` names other
endpoints by the models they serve, as patterns over the model's name (`claude-*`, an exact
name, `*/llama*`):

    AGENT_LLM_ENDPOINTS='{"claude-*": {"base_url": "https://api.anthropic.com/v1/",
                                        "api_key_env": "ANTHROPIC_API_KEY"},
                          "llama*": {"base_url": "http://vllm:8000/v1"}}'

A model goes to the endpoint of the pattern that names it exactly, else of the longest
pattern that matches it, else to `OPENAI_BASE_URL`. The key is read from the variable that
`api_key_env` names when the worker starts (or from the file `api_key_file` names, again
whenever it changes: `key_files`), so no secret sits in the JSON; `headers` are that
endpoint's own (AGENT_LLM_HEADERS go to the default endpoint only). The model's name is sent
as it is written.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from reactive_temporal.http_headers import RESERVED, name_problem, value_problem
from reactive_temporal.key_files import KeyFile

LLM_RESERVED = RESERVED | {"accept"}
"""Headers no endpoint's headers may set: the client's own, and the `Accept` that asks for
JSON or a stream."""
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def checked_headers(value: Mapping[str, str]) -> dict[str, str]:
    """Headers added to a model endpoint's requests, each checked (`http_headers`), their
    values stripped; ValueError naming the header, never its value."""
    for name, given in value.items():
        if (problem := name_problem(name, LLM_RESERVED)) is not None:
            raise ValueError(problem)
        if (problem := value_problem(given)) is not None:
            raise ValueError(f"header {name!r}: {problem}")
    return {name: given.strip() for name, given in value.items()}


class ModelEndpoint(BaseModel):
    """Another OpenAI-compatible endpoint, for the models its pattern names."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str
    api_key_env: str | None = None
    """The environment variable holding its key (unset: the endpoint takes none)."""
    api_key_file: str | None = None
    """Or a file holding it, read again whenever it changes (`key_files`)."""
    headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("base_url")
    @classmethod
    def _a_url(cls, value: str) -> str:
        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url {value!r:.200} is not an http(s) URL")
        return value.strip()

    @field_validator("api_key_env")
    @classmethod
    def _a_variable(cls, value: str | None) -> str | None:
        if value is not None and not _VARIABLE.fullmatch(value):
            raise ValueError(f"api_key_env {value!r:.100} is not an environment variable name")
        return value

    @field_validator("headers")
    @classmethod
    def _addable(cls, value: dict[str, str]) -> dict[str, str]:
        return checked_headers(value)

    @model_validator(mode="after")
    def _one_key(self) -> ModelEndpoint:
        if self.api_key_env is not None and self.api_key_file is not None:
            raise ValueError("api_key_env and api_key_file are both set: set one")
        return self

    def api_key(
        self, pattern: str, environ: Mapping[str, str] | None = None
    ) -> str | KeyFile | None:
        """The key, read now from `api_key_env` (or its file, `KeyFile`); ValueError naming
        the variable or the file when it is unset, unreadable or empty (a typo that would send
        every call of those models unauthenticated)."""
        if self.api_key_file is not None:
            return KeyFile(self.api_key_file, f"AGENT_LLM_ENDPOINTS[{pattern!r}] api_key_file")
        if self.api_key_env is None:
            return None
        key = (os.environ if environ is None else environ).get(self.api_key_env, "").strip()
        if not key:
            raise ValueError(
                f"AGENT_LLM_ENDPOINTS[{pattern!r}]: environment variable {self.api_key_env} "
                "is not set"
            )
        return key


def endpoint_for(model: str, patterns: Iterable[str]) -> str | None:
    """The pattern whose endpoint serves `model`: the one naming it exactly, else the longest
    that matches it (`fnmatch`, case-sensitive); None for the default endpoint."""
    matching = [p for p in patterns if fnmatch.fnmatchcase(model, p)]
    if model in matching:
        return model
    return max(matching, key=len, default=None)
