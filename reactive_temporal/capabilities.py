"""What a model accepts, and the request parameters that follow from it.

Endpoints that all speak "OpenAI chat completions" still differ. OpenAI's reasoning models
(the o-series, the gpt-5 family) refuse `max_tokens` (they take `max_completion_tokens`) and
any `temperature`/`top_p` but the default, with HTTP 400; they take `reasoning_effort`. Local
servers refuse arguments they do not know. Context windows range from 4k to 1M tokens.

So every LLM call (run, chat, debrief) builds its parameters here, from three layers:
1. the table of known families below;
2. the operator's configuration: `AGENT_MODEL_CAPABILITIES` (JSON, per model name, any field
   of `ModelCapabilities`) and `AGENT_CONTEXT_TOKENS` (one context budget for every model);
3. what the worker learned from a 400 that named a parameter it refused
   (`reactive_temporal.model_quirks`).

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
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
    thinks: bool = False
    """Writes its thinking before its answer, within the output it is allowed (DeepSeek-R1,
    QwQ, Qwen3, Magistral, gpt-oss): a call's output cap gets REASONING_ROOM_TOKENS more, as
    a reasoning model's does, so the thinking does not use up the answer; its parameters are
    sent as they are."""
    calls_in_text: bool = True
    """Read the tool calls the model writes into its text when its reply has none of its own
    (`text_calls`): its endpoint does not parse them. False for an endpoint known to, so that
    nothing a reply quotes can be taken for a call."""
    strict_roles: bool = False
    """The model's chat template takes a user turn only after one of its own (Mistral's, as
    its API and vLLM check them: "Unexpected role 'user' after role 'tool'"): a note that
    follows tool results goes at the end of the last result instead."""
    nine_char_call_ids: bool = False
    """Tool call ids as Mistral's templates take them: nine letters and digits. Any other id
    goes as one of that shape, the same for a call and its result."""
    thinking_off_unstreamed: bool = False
    """The endpoint takes the model's calls that do not stream only with its thinking off
    (`enable_thinking: false`): Alibaba Cloud Model Studio (DashScope) for Qwen3 and QwQ
    ("parameter.enable_thinking must be set to false for non-streaming calls"), which refused
    every debrief synthesis, and every step of a run without live output."""
    thinking_sent_back: bool = False
    """The endpoint wants the model's earlier turns back with their thinking, as
    `reasoning_content`: DeepSeek's thinking mode (deepseek-reasoner, the V4 models) and
    Moonshot's Kimi K2 thinking models refuse a request whose turns that called tools come
    back without it ("The `reasoning_content` in the thinking mode must be passed back to the
    API", "thinking is enabled but reasoning_content is missing in assistant tool call
    message"): a run with tools failed at its second step. Every other model gets its
    answers back only, as its makers advise."""
    tool_schema_subset: bool = False
    """The endpoint takes tool schemas only within Google Gemini's subset of JSON Schema (an
    OpenAPI 3.0 subset: no `$ref`/`$defs`, `const`, `additionalProperties`, `$schema`, type
    lists, …) and refuses any other with a 400 ("Unknown name \"additionalProperties\" at
    'tools[0].function_declarations[0].parameters': Cannot find field."): Gemini's
    OpenAI-compatible endpoint and Vertex AI's. Each tool's parameters are sent rewritten into
    it (`reactive_temporal.schema_subset`)."""
    tools_in_prompt: bool = False
    """The model's server refuses any request with `tools`: Ollama for a model whose template
    has no tool support (Gemma, older DeepSeek-R1 tags, Phi-3, LLaVA, many community models:
    "registry.ollama.ai/library/gemma3:4b does not support tools"), llama.cpp's server without
    `--jinja`, a proxy that takes no tools. Every run with a tool failed at its first step.
    The tools are described in a system message instead, the transcript's calls and results
    sent as text (`activities.prompted_tools`), and the calls the model writes read from its
    text: `calls_in_text` holds for it, whatever else says. Learned from the 400
    (`model_quirks`), or set in AGENT_MODEL_CAPABILITIES."""

    @property
    def accepts_reasoning_effort(self) -> bool:
        return self.reasoning if self.reasoning_effort is None else self.reasoning_effort


def _caps(**fields: Any) -> ModelCapabilities:
    return ModelCapabilities.model_validate(fields)


def _hosted(**fields: Any) -> ModelCapabilities:
    """A hosted provider's model: its endpoint parses tool calls, so none is read from text."""
    return _caps(calls_in_text=False, **fields)


FAMILIES: list[tuple[re.Pattern[str], ModelCapabilities]] = [
    # OpenAI reasoning models. The oldest two take no reasoning_effort.
    (
        re.compile(r"^o1-(mini|preview)\b"),
        _hosted(reasoning=True, reasoning_effort=False, context_tokens=128_000),
    ),
    (re.compile(r"^o\d+(-|$)"), _hosted(reasoning=True, context_tokens=200_000)),
    (
        re.compile(r"^gpt-5(\.\d+)?-chat\b"),
        _hosted(context_tokens=128_000, max_output_tokens=16_384),
    ),
    (re.compile(r"^gpt-5"), _hosted(reasoning=True, context_tokens=400_000)),
    # OpenAI chat models.
    (re.compile(r"^gpt-4\.1"), _hosted(context_tokens=1_047_576, max_output_tokens=32_768)),
    (
        re.compile(r"^(gpt-4o|chatgpt-4o)"),
        _hosted(context_tokens=128_000, max_output_tokens=16_384),
    ),
    (re.compile(r"^gpt-4-32k"), _hosted(context_tokens=32_768)),
    (
        re.compile(r"^gpt-4-(turbo|\d{4}-preview|vision)"),
        _hosted(context_tokens=128_000, max_output_tokens=4_096),
    ),
    (re.compile(r"^gpt-4(-\d{4})?$"), _hosted(context_tokens=8_192)),
    (re.compile(r"^gpt-3\.5-turbo"), _hosted(context_tokens=16_385, max_output_tokens=4_096)),
    # Other providers' models through their OpenAI-compatible endpoints.
    (re.compile(r"^claude"), _hosted(context_tokens=200_000, max_output_tokens=8_192)),
    (
        re.compile(r"^gemini-(2\.5|[3-9])"),
        _hosted(
            context_tokens=1_048_576,
            reasoning_effort=True,
            max_output_tokens=65_536,
            tool_schema_subset=True,
        ),
    ),
    (
        re.compile(r"^gemini"),
        _hosted(context_tokens=1_048_576, max_output_tokens=8_192, tool_schema_subset=True),
    ),
    # Open models that think before they answer, in the text or beside it.
    (re.compile(r"^magistral"), _caps(thinks=True, strict_roles=True, nine_char_call_ids=True)),
    # DeepSeek's and Moonshot's thinking modes on their own APIs: thinking sent apart, and
    # wanted back with every later request.
    (re.compile(r"^deepseek-(reasoner|v4)"), _hosted(thinks=True, thinking_sent_back=True)),
    (re.compile(r"^kimi-k2(\.\d|-thinking)"), _hosted(thinks=True, thinking_sent_back=True)),
    (re.compile(r"^(deepseek-r1|qwq|gpt-oss|phi-?4-(mini-)?reasoning)"), _caps(thinks=True)),
    (re.compile(r"^qwen3(?!.*(instruct|coder))"), _caps(thinks=True)),
    (
        re.compile(r"^(open-)?(mistral|mixtral|ministral|codestral|devstral|pixtral)"),
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
    return with_implied(caps)


def with_implied(caps: ModelCapabilities) -> ModelCapabilities:
    """`caps` with what one field implies of another: a model whose tools go in the prompt
    has its calls read from its text (`tools_in_prompt`), even one the table says is behind
    an endpoint that parses them (a hosted model behind a proxy that refuses tools)."""
    if caps.tools_in_prompt and not caps.calls_in_text:
        return caps.model_copy(update={"calls_in_text": True})
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
    cap) and no sampling parameters; others get `max_tokens` (with that room too for a model
    that thinks first) and the sampling they asked for. `reasoning_effort` goes only to models
    that take it. Learned or configured omissions and renames apply last.
    """
    params: dict[str, Any] = {}
    if wanted.max_output_tokens is not None:
        room = REASONING_ROOM_TOKENS if caps.reasoning or caps.thinks else 0
        limit = wanted.max_output_tokens + room
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
