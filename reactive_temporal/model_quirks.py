"""What an endpoint's 400 says, and what the worker learns from it about a model.

The capability table (`reactive_temporal.capabilities`) cannot know every model behind every
endpoint. A 400 that names a parameter the model refuses, a context window it overflowed, or a
shape of request its template refuses is read here; `ModelQuirks` remembers it for the
process's life, so the call goes again without it and later calls never meet it.

Pure: no I/O. Error bodies come in as the decoded JSON the openai client hands over.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from reactive_temporal.capabilities import NEVER_DROPPED, ModelCapabilities, with_implied


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
    # Gemini names where an unknown name is (" at 'tools[0].function_declarations[0]…'") when
    # it is not the request's own: a schema's keyword, not a parameter
    re.compile(
        r"Unknown (?:name|parameter|field|argument)[: ]+[\"'`]?([\w.]+)[\"'`]?"
        r"(?P<inside> at ')?",
        re.I,
    ),
    # pydantic's details (vLLM's in its message, Mistral's as an object or JSON text)
    re.compile(r"extra_forbidden.*?[\"']body[\"'],\s*[\"']([\w.]+)", re.S),
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


PROVIDER_RAW_MAX_CHARS = 4_000
"""How much of the provider's own error a gateway passes on (`metadata.raw`) is read."""


def error_message(body: object, *, _depth: int = 0) -> str:
    """The human message of an error body, whatever shape the server gave it; with the
    provider's own message after it when a gateway passed that on apart (OpenRouter:
    "Provider returned error", the provider's body in `metadata.raw`), where every reading
    of the 400 (a parameter refused, a shape, the context window) looks for it."""
    body = _unwrap(body)
    if not isinstance(body, Mapping):
        return str(body) if body is not None else ""
    message = ""
    for key in ("message", "error"):  # TGI: {"error": "Input validation error: …"}
        if isinstance(body.get(key), str):
            message = str(body[key])
            break
    else:
        said = body.get("message")  # Mistral's 422: {"message": {"detail": [...]}}
        details = said.get("detail") if isinstance(said, Mapping) else body.get("detail")
        if details is not None:
            message = str(details)
    metadata = body.get("metadata")
    raw = metadata.get("raw") if isinstance(metadata, Mapping) else None
    if not isinstance(raw, str) or not raw.strip() or _depth >= 2:
        return message
    raw = raw[:PROVIDER_RAW_MAX_CHARS]
    try:
        provider = error_message(json.loads(raw), _depth=_depth + 1)
    except (ValueError, RecursionError):
        provider = raw
    return f"{message}: {provider}" if message else provider


def error_code(body: object) -> str | None:
    """The error's `code` when it is a name (`insufficient_quota`, `tool_use_failed`)."""
    body = _unwrap(body)
    code = body.get("code") if isinstance(body, Mapping) else None
    return code if isinstance(code, str) else None


def failed_generation(body: object) -> str | None:
    """What the model wrote when Groq refused it as a tool call (`tool_use_failed`'s
    `failed_generation`), for the error to show: its message says only "Failed to call a
    function. Please adjust your prompt."."""
    body = _unwrap(body)
    written = body.get("failed_generation") if isinstance(body, Mapping) else None
    return written if isinstance(written, str) and written.strip() else None


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
    for param in _named_params(body):
        if param in sent and param not in NEVER_DROPPED:
            instead = _USE_INSTEAD.search(message)
            use = instead.group(1) if instead and instead.group(1) not in sent else None
            only = _OTHER_VALUES.search(message) is not None
            return ParameterRejection(param, use, value_only=only)
    return None


def _named_params(body: object) -> list[str]:
    """The parameters a 400 names: OpenAI's `param` field, then the message's forms."""
    message = error_message(body)
    body = _unwrap(body)
    named: list[str] = []
    if isinstance(body, Mapping) and isinstance(body.get("param"), str):
        named.append(body["param"])
    return named + [
        m.group(1)
        for pattern in _PARAM_PATTERNS
        for m in pattern.finditer(message)
        if not m.groupdict().get("inside")  # a keyword inside a tool's schema (Gemini's)
    ]


STREAM_PARAMS = ("stream", "stream_options")


def read_stream_refusal(body: object) -> str | None:
    """`stream` or `stream_options` when a 400 to a streamed call names it: an endpoint that
    does not stream, or streams but takes no `stream_options` (its usage chunk)."""
    return next((p for p in _named_params(body) if p in STREAM_PARAMS), None)


_CONTEXT_PATTERNS = (
    re.compile(r"maximum context length is (\d+)"),
    re.compile(r"prompt is too long: \d+ tokens > (\d+) maximum"),
    re.compile(r"exceeds the maximum number of tokens allowed \((\d+)\)"),
    re.compile(r"context (?:window|length) (?:of|is) (\d+)", re.I),
    re.compile(r"inputs`? tokens \+ `?max_new_tokens`? must be <= (\d+)"),  # TGI's 422
    re.compile(r"exceed context limit: \d+ \+ \d+ > (\d+)"),  # Anthropic's, prompt + max_tokens
    re.compile(r"context size \((\d+) tokens\)"),  # llama.cpp's server
)
_CONTEXT_WORDS = re.compile(
    r"context[_ ]length[_ ]exceeded|maximum context length|context window|prompt is too long|"
    r"too many tokens|exceeds the maximum number of tokens|tokens \+ `?max_new_tokens`? must be|"
    # Anthropic's for a prompt that fits without its `max_tokens`; AWS Bedrock's; a LiteLLM
    # proxy's name for any of them, whatever its provider said
    r"exceed context limit|input is too long for requested model|ContextWindowExceeded|"
    # llama.cpp's server, in the words of its builds over time
    r"exceeds (the available )?context size|larger than the max context size",
    re.I,
)
LLAMA_CPP_OVERFLOW = "exceed_context_size_error"
"""llama.cpp's server's error type for a request past its context size (`n_ctx` beside it)."""


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
    kind = body.get("type") if isinstance(body, Mapping) else None
    named = code == "context_length_exceeded" or kind == LLAMA_CPP_OVERFLOW
    if not named and not _CONTEXT_WORDS.search(message):
        return None
    n_ctx = body.get("n_ctx") if isinstance(body, Mapping) else None
    if isinstance(n_ctx, int) and not isinstance(n_ctx, bool) and n_ctx > 0:
        return ContextOverflow(n_ctx)
    for pattern in _CONTEXT_PATTERNS:
        match = pattern.search(message)
        if match:
            return ContextOverflow(int(match.group(1)))
    return ContextOverflow()


THINKS = "thinks"
STRICT_ROLES = "strict_roles"
NINE_CHAR_CALL_IDS = "nine_char_call_ids"
THINKING_OFF_UNSTREAMED = "thinking_off_unstreamed"
THINKING_SENT_BACK = "thinking_sent_back"
TOOL_SCHEMA_SUBSET = "tool_schema_subset"
TOOLS_IN_PROMPT = "tools_in_prompt"
SHAPE_WORDS = {
    THINKING_SENT_BACK: "with its earlier turns' thinking (reasoning_content)",
    STRICT_ROLES: "with a note after tool results at the end of the last result",
    NINE_CHAR_CALL_IDS: "with call ids of nine letters and digits",
    THINKING_OFF_UNSTREAMED: "with enable_thinking: false when it does not stream",
    TOOL_SCHEMA_SUBSET: "with its tool schemas in Gemini's subset of JSON Schema",
    TOOLS_IN_PROMPT: (
        "without `tools`, its tools described in a system message and its calls read from its "
        "text (its server takes no tools for it: pick a model with tool support for calls the "
        'server parses, or set "tools_in_prompt": true for it in AGENT_MODEL_CAPABILITIES to '
        "accept this and skip the refused first call)"
    ),
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
    # Alibaba Cloud Model Studio (DashScope), in English and in Chinese
    (
        re.compile(r"enable_thinking.{0,20}(must be set to false|必须设置为\s*false)", re.I),
        THINKING_OFF_UNSTREAMED,
    ),
    # DeepSeek's thinking mode (V4: "must be passed back", V3.2: "Missing `reasoning_content`
    # field in the assistant message"), Moonshot's Kimi K2 ("… is missing in assistant tool
    # call message at index N")
    (
        re.compile(
            r"reasoning_content\W{0,3}(in the thinking mode )?(must be passed back|is missing)"
            r"|missing\W{1,3}reasoning_content",
            re.I,
        ),
        THINKING_SENT_BACK,
    ),
    # Google Gemini (and Vertex AI) on a tool schema outside its subset: an unknown keyword,
    # a type list or a number in an enum, where the parser says ("at
    # 'tools[0].function_declarations[1].parameters.properties[0].value'"), or its own checks
    # ("GenerateContentRequest.tools[0].function_declarations[3].parameters.required[0]: property
    # is not defined", "`edit` functionDeclaration `parameters.edits` schema specified other
    # fields alongside any_of")
    (
        re.compile(
            r"function_declarations\[\d+\]\.(?:parameters|\*{3})"
            r"|functionDeclaration\b.{0,200}?\bschema",
            re.S,
        ),
        TOOL_SCHEMA_SUBSET,
    ),
    # Ollama for a model whose template has no tools ("registry.ollama.ai/library/gemma3:4b
    # does not support tools", on /v1 and on its own API); llama.cpp's server without --jinja
    (
        re.compile(r"does not support tools|tools param requires --jinja", re.I),
        TOOLS_IN_PROMPT,
    ),
)


def read_shape_refusal(body: object) -> str | None:
    """The `ModelCapabilities` field a 400 asks for when it refused the request's shape, not
    its content: turns out of a strict template's order, call ids not of Mistral's shape
    ("Tool call IDs should be alphanumeric strings with length 9!"), a call that does not
    stream with thinking on, earlier turns sent back without their thinking, tool schemas
    outside Gemini's subset, or any tools at all for a model whose server takes none."""
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
        self._flags: dict[str, set[str]] = {}
        self.lessons = 0
        """How many times this worker learned something: what was worked out before is
        worked out again once it grows (`LlmEndpoint.capabilities`)."""

    def learn(self, model: str, rejection: ParameterRejection, value: object = None) -> None:
        """Remember a refusal: the value sent (`value`), when only it was refused."""
        self.lessons += 1
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

    def learn_thinks(self, model: str) -> None:
        """Remember that `model` thinks before it answers (`ModelCapabilities.thinks`): seen
        in a reply, as the table could not know it of a model served under a name of its own."""
        self.lessons += 1
        self._flags.setdefault(model, set()).add(THINKS)

    def learn_shape(self, model: str, field: str) -> None:
        """Remember a shape the model's template wants (`read_shape_refusal`)."""
        self.lessons += 1
        self._flags.setdefault(model, set()).add(field)

    def learn_context(self, model: str, limit: int) -> None:
        self.lessons += 1
        known = self._context.get(model)
        self._context[model] = limit if known is None else min(known, limit)

    def apply(self, model: str, caps: ModelCapabilities) -> ModelCapabilities:
        """`caps` with what was learned about `model` on top."""
        omit = self._omit.get(model, set())
        rename = self._rename.get(model, {})
        context = self._context.get(model)
        shapes = self._flags.get(model, set())
        if not omit and not rename and context is None and not shapes:
            return caps
        return with_implied(
            caps.model_copy(
                update={
                    "omit": sorted({*caps.omit, *omit}),
                    "rename": {**caps.rename, **rename},
                    "context_tokens": min(caps.context_tokens, context or caps.context_tokens),
                    **dict.fromkeys(shapes, True),
                }
            )
        )

    def learned(self) -> dict[str, list[str]]:
        """model → what was learned, for logs and diagnostics."""
        names = sorted(
            {*self._omit, *self._rename, *self._context, *self._refused_values, *self._flags}
        )
        return {
            m: [
                *(f"omit {p}" for p in sorted(self._omit.get(m, ()))),
                *(f"{a} → {b}" for a, b in sorted(self._rename.get(m, {}).items())),
                *([f"context {self._context[m]}"] if m in self._context else []),
                *sorted(self._flags.get(m, ())),
                *(
                    f"omit {p}={v!r}"
                    for p, vs in sorted(self._refused_values.get(m, {}).items())
                    for v in vs
                ),
            ]
            for m in names
        }
