"""What a model accepts, and the request parameters that follow from it.

Endpoints that all speak "OpenAI chat completions" still differ. OpenAI's reasoning models
(the o-series, the gpt-5 family) refuse `max_tokens` (they take `max_completion_tokens`) and
any `temperature`/`top_p` but the default, with HTTP 400; they take `reasoning_effort`. Local
servers refuse arguments they do not know. Context windows range from 4k to 1M tokens.

So every LLM call (run, chat, debrief) builds its parameters here, from three layers:
1. the table of known families below;
2. the operator's configuration: `AGENT_MODEL_CAPABILITIES` (JSON, per model name, any field
   of `ModelCapabilities`) and `AGENT_CONTEXT_TOKENS` (one context budget for every model);
3. what the worker learned from a 400 that named a parameter it refused (`ModelQuirks`).

Pure: no I/O. Error bodies come in as the decoded JSON the openai client hands over.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, get_args

from pydantic import BaseModel, Field

from reactive_temporal.contracts.run import ReasoningEffort

REASONING_EFFORTS: tuple[str, ...] = get_args(ReasoningEffort)

DEFAULT_CONTEXT_TOKENS = 32_768
"""A model the table does not know: modest, so small local models are not overrun. Set
`AGENT_CONTEXT_TOKENS` or `AGENT_MODEL_CAPABILITIES` for the real figure."""

MAX_TOKENS = "max_tokens"
MAX_COMPLETION_TOKENS = "max_completion_tokens"
REASONING_ROOM_TOKENS = 8_192
"""A reasoning model spends output tokens thinking before it answers: a cap meant for the
answer gets this much more, so the thinking does not use up the answer."""
NEVER_DROPPED = frozenset({"model", "messages", "tools", "stream", "stream_options"})
"""Parameters the call cannot do without: a 400 naming one of these is not learned from."""


class ModelCapabilities(BaseModel):
    """What one model accepts. Every field can be set per model in AGENT_MODEL_CAPABILITIES."""

    reasoning: bool = False
    """An OpenAI-style reasoning model: `max_completion_tokens` instead of `max_tokens`, and no
    sampling parameters (`temperature`, `top_p`)."""
    reasoning_effort: bool | None = None
    """Accepts `reasoning_effort`; None means "when it is a reasoning model"."""
    context_tokens: int = Field(default=DEFAULT_CONTEXT_TOKENS, ge=1_024)
    """The context window, prompt and output together."""
    max_output_tokens: int | None = Field(default=None, ge=1)
    """The most output the model produces in one call; requests ask for no more."""
    omit: list[str] = Field(default_factory=list)
    """Parameters never sent to this model."""
    rename: dict[str, str] = Field(default_factory=dict)
    """Parameters sent under another name, e.g. {"max_tokens": "max_completion_tokens"}."""
    strict_roles: bool = False
    """The model's chat template takes a user turn only after one of its own (Mistral's, as
    its API and vLLM check them: "Unexpected role 'user' after role 'tool'"): a note that
    follows tool results goes at the end of the last result instead."""
    nine_char_call_ids: bool = False
    """Tool call ids as Mistral's templates take them: nine letters and digits. Any other id
    goes as one of that shape, the same for a call and its result."""

    @property
    def accepts_reasoning_effort(self) -> bool:
        return self.reasoning if self.reasoning_effort is None else self.reasoning_effort


def _caps(**fields: Any) -> ModelCapabilities:
    return ModelCapabilities.model_validate(fields)


FAMILIES: list[tuple[re.Pattern[str], ModelCapabilities]] = [
    # OpenAI reasoning models. The oldest two take no reasoning_effort.
    (
        re.compile(r"^o1-(mini|preview)\b"),
        _caps(reasoning=True, reasoning_effort=False, context_tokens=128_000),
    ),
    (re.compile(r"^o\d+(-|$)"), _caps(reasoning=True, context_tokens=200_000)),
    (re.compile(r"^gpt-5(\.\d+)?-chat\b"), _caps(context_tokens=128_000, max_output_tokens=16_384)),
    (re.compile(r"^gpt-5"), _caps(reasoning=True, context_tokens=400_000)),
    # OpenAI chat models.
    (re.compile(r"^gpt-4\.1"), _caps(context_tokens=1_047_576, max_output_tokens=32_768)),
    (re.compile(r"^(gpt-4o|chatgpt-4o)"), _caps(context_tokens=128_000, max_output_tokens=16_384)),
    (re.compile(r"^gpt-4-32k"), _caps(context_tokens=32_768)),
    (
        re.compile(r"^gpt-4-(turbo|\d{4}-preview|vision)"),
        _caps(context_tokens=128_000, max_output_tokens=4_096),
    ),
    (re.compile(r"^gpt-4(-\d{4})?$"), _caps(context_tokens=8_192)),
    (re.compile(r"^gpt-3\.5-turbo"), _caps(context_tokens=16_385, max_output_tokens=4_096)),
    # Other providers' models through their OpenAI-compatible endpoints.
    (re.compile(r"^claude"), _caps(context_tokens=200_000, max_output_tokens=8_192)),
    (
        re.compile(r"^gemini-(2\.5|[3-9])"),
        _caps(context_tokens=1_048_576, reasoning_effort=True, max_output_tokens=65_536),
    ),
    (re.compile(r"^gemini"), _caps(context_tokens=1_048_576, max_output_tokens=8_192)),
    (
        re.compile(r"^(open-)?(mistral|mixtral|ministral|codestral|devstral|magistral|pixtral)"),
        _caps(strict_roles=True, nine_char_call_ids=True),
    ),
]
"""Known families, first match wins, matched on the lower-cased name without a provider
prefix ("openai/o3", "azure/gpt-4o" → "o3", "gpt-4o")."""


def family_name(model: str) -> str:
    """The name the table matches: lower case, without a LiteLLM-style `provider/` prefix."""
    return model.strip().lower().rsplit("/", 1)[-1]


def capabilities_for(
    model: str,
    overrides: Mapping[str, ModelCapabilities] | None = None,
    *,
    context_tokens: int | None = None,
) -> ModelCapabilities:
    """The model's capabilities: the family table, then `context_tokens` (AGENT_CONTEXT_TOKENS),
    then the fields its override sets (an override for "gpt-4o" covers "gpt-4o-2024-08-06")."""
    name = family_name(model)
    caps = next((c for pattern, c in FAMILIES if pattern.search(name)), ModelCapabilities())
    caps = caps.model_copy(deep=True)
    if context_tokens is not None:
        caps.context_tokens = context_tokens
    override = _override_for(model, overrides or {})
    if override is not None:
        caps = caps.model_copy(update=override.model_dump(exclude_unset=True), deep=True)
    return caps


def _override_for(
    model: str, overrides: Mapping[str, ModelCapabilities]
) -> ModelCapabilities | None:
    if model in overrides:
        return overrides[model]
    base = max((n for n in overrides if model.startswith(n + "-")), key=len, default=None)
    return overrides[base] if base else None


# -- request parameters --------------------------------------------------------------------


@dataclass(frozen=True)
class WantedParams:
    """What a call would like to send; `request_params` keeps what the model accepts."""

    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    reasoning_effort: str | None = None


def request_params(caps: ModelCapabilities, wanted: WantedParams) -> dict[str, Any]:
    """The parameters to send, besides model, messages and tools.

    Reasoning models get `max_completion_tokens` (with room to think on top of the answer's
    cap) and no sampling parameters; others get
    `max_tokens` and the sampling they asked for. `reasoning_effort` goes only to models that
    take it. Learned or configured omissions and renames apply last.
    """
    params: dict[str, Any] = {}
    if wanted.max_output_tokens is not None:
        limit = wanted.max_output_tokens + (REASONING_ROOM_TOKENS if caps.reasoning else 0)
        if caps.max_output_tokens is not None:
            limit = min(limit, caps.max_output_tokens)
        params[MAX_COMPLETION_TOKENS if caps.reasoning else MAX_TOKENS] = limit
    if not caps.reasoning:
        if wanted.temperature is not None:
            params["temperature"] = wanted.temperature
        if wanted.top_p is not None:
            params["top_p"] = wanted.top_p
    if wanted.reasoning_effort is not None and caps.accepts_reasoning_effort:
        params["reasoning_effort"] = wanted.reasoning_effort
    renamed = {caps.rename.get(name, name): value for name, value in params.items()}
    return {name: value for name, value in renamed.items() if name not in caps.omit}


# -- learning from a 400 -------------------------------------------------------------------


@dataclass(frozen=True)
class ParameterRejection:
    """An endpoint refused one parameter (or its value): send the call again without it."""

    param: str
    use_instead: str | None = None
    """The parameter the endpoint named in its place ("Use 'max_completion_tokens' instead.")."""
    value_only: bool = False
    """Only the value sent was refused, others are taken ("Supported values are: 'low',
    'medium', and 'high'."): the parameter is left out when it has that value only."""


_PARAM_PATTERNS = (
    re.compile(r"Unsupported (?:parameter|value): '([\w.]+)'"),
    re.compile(r"Unrecognized request arguments? supplied: ([\w.]+)"),
    re.compile(r"Unknown (?:name|parameter|field|argument)[: ]+[\"'`]?([\w.]+)", re.I),
    re.compile(r"extra_forbidden.*?'body', '([\w.]+)'", re.S),
    re.compile(r"does not support parameters?: \[?[\"']?([\w.]+)", re.I),
    re.compile(r"[\"'`]([\w.]+)[\"'`] (?:is|are) not (?:supported|permitted|allowed)", re.I),
)
_USE_INSTEAD = re.compile(r"Use '([\w.]+)' instead")
_OTHER_VALUES = re.compile(r"Supported values are", re.I)


def _unwrap(body: object) -> object:
    """Gemini answers errors as a one-element list: `[{"error": {...}}]`."""
    while isinstance(body, list) and len(body) == 1:
        body = body[0]
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        return body["error"]
    return body


def error_message(body: object) -> str:
    """The human message of an error body, whatever shape the server gave it."""
    body = _unwrap(body)
    if isinstance(body, Mapping):
        for key in ("message", "error"):  # TGI: {"error": "Input validation error: …"}
            if isinstance(body.get(key), str):
                return str(body[key])
        if "detail" in body:
            return str(body["detail"])
    return str(body) if body is not None else ""


def error_code(body: object) -> str | None:
    """The error's `code` when it is a name (`insufficient_quota`, `tool_use_failed`)."""
    body = _unwrap(body)
    code = body.get("code") if isinstance(body, Mapping) else None
    return code if isinstance(code, str) else None


_SECONDS = re.compile(r"(\d+(?:\.\d+)?)s")


def body_retry_delay(body: object) -> float | None:
    """The wait an error body asks for in seconds: Gemini's `RetryInfo` (`"retryDelay":
    "20s"` among its `details`), which it sends with a 429 instead of a `retry-after`."""
    body = _unwrap(body)
    details = body.get("details") if isinstance(body, Mapping) else None
    for detail in details if isinstance(details, list) else []:
        delay = detail.get("retryDelay") if isinstance(detail, Mapping) else None
        if isinstance(delay, str) and (match := _SECONDS.fullmatch(delay.strip())):
            return float(match.group(1))
    return None


def read_rejection(body: object, sent: Collection[str]) -> ParameterRejection | None:
    """The parameter a 400 refused, when it names one this request sent and can do without.

    Reads OpenAI's `param` field first, then the message forms other servers use (vLLM,
    LiteLLM, Gemini, Ollama). Returns None for any other 400: that one is really the request's
    fault and fails the call.
    """
    message = error_message(body)
    body = _unwrap(body)
    candidates: list[str] = []
    if isinstance(body, Mapping) and isinstance(body.get("param"), str):
        candidates.append(body["param"])
    candidates += [m.group(1) for pattern in _PARAM_PATTERNS for m in pattern.finditer(message)]
    for param in candidates:
        if param in sent and param not in NEVER_DROPPED:
            instead = _USE_INSTEAD.search(message)
            use = instead.group(1) if instead and instead.group(1) not in sent else None
            only = _OTHER_VALUES.search(message) is not None
            return ParameterRejection(param, use, value_only=only)
    return None


_CONTEXT_PATTERNS = (
    re.compile(r"maximum context length is (\d+)"),
    re.compile(r"prompt is too long: \d+ tokens > (\d+) maximum"),
    re.compile(r"exceeds the maximum number of tokens allowed \((\d+)\)"),
    re.compile(r"context (?:window|length) (?:of|is) (\d+)", re.I),
    re.compile(r"inputs`? tokens \+ `?max_new_tokens`? must be <= (\d+)"),  # TGI's 422
)
_CONTEXT_WORDS = re.compile(
    r"context[_ ]length[_ ]exceeded|maximum context length|context window|prompt is too long|"
    r"too many tokens|exceeds the maximum number of tokens|tokens \+ `?max_new_tokens`? must be",
    re.I,
)


@dataclass(frozen=True)
class ContextOverflow:
    """The request did not fit the model's context window."""

    limit: int | None = None
    """The window the endpoint reported, when it said."""


def read_context_overflow(body: object) -> ContextOverflow | None:
    """A 400 (or 413) that says the request is longer than the model's context window."""
    message = error_message(body)
    body = _unwrap(body)
    code = body.get("code") if isinstance(body, Mapping) else None
    if code != "context_length_exceeded" and not _CONTEXT_WORDS.search(message):
        return None
    for pattern in _CONTEXT_PATTERNS:
        match = pattern.search(message)
        if match:
            return ContextOverflow(int(match.group(1)))
    return ContextOverflow()


STRICT_ROLES = "strict_roles"
NINE_CHAR_CALL_IDS = "nine_char_call_ids"
SHAPE_WORDS = {
    STRICT_ROLES: "with a note after tool results at the end of the last result",
    NINE_CHAR_CALL_IDS: "with call ids of nine letters and digits",
}
"""How the worker's log says what a shape refusal taught it."""
_SHAPE_REFUSALS = (
    # vLLM rendering a strict Jinja template; Mistral's API and mistral-common
    (
        re.compile(r"roles must alternate|Unexpected role '\w+' after role '\w+'", re.I),
        STRICT_ROLES,
    ),
    (
        re.compile(r"(call ids?|call_id).{0,80}(length (of )?9|9 characters)", re.I | re.S),
        NINE_CHAR_CALL_IDS,
    ),
)


def read_shape_refusal(body: object) -> str | None:
    """The `ModelCapabilities` field a 400 asks for when it refused the request's shape, not
    its content: turns out of a strict template's order, or call ids not of Mistral's shape
    ("Tool call IDs should be alphanumeric strings with length 9!")."""
    message = error_message(body)
    return next((field for pattern, field in _SHAPE_REFUSALS if pattern.search(message)), None)


class ModelQuirks:
    """What this worker learned about models from their 400s; kept for the process's life.

    The table cannot know every model behind every endpoint. When one refuses a parameter,
    the call goes again without it, and every later call to that model leaves it out.
    """

    def __init__(self) -> None:
        self._omit: dict[str, set[str]] = {}
        self._rename: dict[str, dict[str, str]] = {}
        self._context: dict[str, int] = {}
        self._refused_values: dict[str, dict[str, list[object]]] = {}
        self._shapes: dict[str, set[str]] = {}

    def learn(self, model: str, rejection: ParameterRejection, value: object = None) -> None:
        """Remember a refusal: the value sent (`value`), when only it was refused."""
        if rejection.value_only:
            refused = self._refused_values.setdefault(model, {}).setdefault(rejection.param, [])
            if value not in refused:
                refused.append(value)
        elif rejection.use_instead is not None:
            self._rename.setdefault(model, {})[rejection.param] = rejection.use_instead
        else:
            self._omit.setdefault(model, set()).add(rejection.param)

    def without_refused_values(self, model: str, params: dict[str, Any]) -> dict[str, Any]:
        """`params` without those whose value `model` refused (the endpoint's default then)."""
        refused = self._refused_values.get(model)
        if not refused:
            return params
        return {k: v for k, v in params.items() if v not in refused.get(k, ())}

    def learn_shape(self, model: str, field: str) -> None:
        """Remember a shape the model's template wants (`read_shape_refusal`)."""
        self._shapes.setdefault(model, set()).add(field)

    def learn_context(self, model: str, limit: int) -> None:
        known = self._context.get(model)
        self._context[model] = limit if known is None else min(known, limit)

    def apply(self, model: str, caps: ModelCapabilities) -> ModelCapabilities:
        """`caps` with what was learned about `model` on top."""
        omit = self._omit.get(model, set())
        rename = self._rename.get(model, {})
        context = self._context.get(model)
        shapes = self._shapes.get(model, set())
        if not omit and not rename and context is None and not shapes:
            return caps
        return caps.model_copy(
            update={
                "omit": sorted({*caps.omit, *omit}),
                "rename": {**caps.rename, **rename},
                "context_tokens": min(caps.context_tokens, context or caps.context_tokens),
                **dict.fromkeys(shapes, True),
            }
        )

    def learned(self) -> dict[str, list[str]]:
        """model → what was learned, for logs and diagnostics."""
        names = sorted(
            {*self._omit, *self._rename, *self._context, *self._refused_values, *self._shapes}
        )
        return {
            m: [
                *(f"omit {p}" for p in sorted(self._omit.get(m, ()))),
                *(f"{a} → {b}" for a, b in sorted(self._rename.get(m, {}).items())),
                *([f"context {self._context[m]}"] if m in self._context else []),
                *sorted(self._shapes.get(m, ())),
                *(
                    f"omit {p}={v!r}"
                    for p, vs in sorted(self._refused_values.get(m, {}).items())
                    for v in vs
                ),
            ]
            for m in names
        }
