"""How a provider treats a model's requests before the scripted model's script answers
(`Endpoint`): its HTTP 400s, in its own words, for parameters, values and shapes it refuses
(the rules on the shape of a request's messages are in `message_rules`, a tool schema's in
`schema_rules`, a turn's reasoning state in `reasoning_state`), what it keeps of a prompt it
cuts, and the reply it would send."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from reactive_temporal.embedded.message_rules import (
    alternation_refused,
    call_id_shape_refused,
    call_ids_refused,
    invalid_request,
    last_role_refused,
    pairing_refused,
    role_order_refused,
)
from reactive_temporal.embedded.reasoning_state import remembered, state_refused
from reactive_temporal.embedded.schema_rules import schema_refused
from reactive_temporal.embedded.scripted_replies import HttpError, Reply


def scripted_tokens(text: str) -> int:
    """What the scripted endpoint counts `text` as: 4 characters a token, at least one."""
    return max(1, len(text) // 4)


def estimate_request_tokens(request: dict[str, Any]) -> int:
    """What a context-limited endpoint counts a request as: its messages and tool schemas."""
    tokens = scripted_tokens(json.dumps(request.get("messages", [])))
    if request.get("tools"):
        tokens += scripted_tokens(json.dumps(request["tools"]))
    return tokens


def _json_object(text: object) -> bool:
    try:
        return isinstance(text, str) and isinstance(json.loads(text), dict)
    except ValueError:
        return False


def _listed(values: Iterable[str]) -> str:
    quoted = [f"'{v}'" for v in values]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + f", and {quoted[-1]}"


@dataclass
class Endpoint:
    """How a provider treats a model's requests, checked before the model's script answers.

    Each refusal is the provider's own HTTP 400 body, so code that learns from those bodies is
    tested against what it will meet. `Endpoint.reasoning_model()` is an OpenAI o-series or
    gpt-5 model.
    """

    unsupported_parameters: dict[str, str] = field(default_factory=dict)
    """Parameter → advice appended to the message; sending it at all is a 400
    `unsupported_parameter`."""
    default_only: dict[str, float] = field(default_factory=dict)
    """Parameter → its only accepted value; any other value is a 400 `unsupported_value`."""
    unrecognized: tuple[str, ...] = ()
    """Parameters refused the older way: `param: null`, "Unrecognized request argument
    supplied: X" (what OpenAI-compatible servers often answer)."""
    reasoning_efforts: tuple[str, ...] | None = None
    """Accepted `reasoning_effort` values; None: the parameter is not checked."""
    reasoning_tokens: int | None = None
    """Reasoning tokens reported with every reply (and billed as completion tokens)."""
    context_tokens: int | None = None
    """The context window: a request whose estimated tokens (plus the output it asks for)
    exceed it is a 400 `context_length_exceeded`."""
    truncates_to: int | None = None
    """A context length that cuts instead of refusing, as Ollama's `num_ctx` and LM Studio's
    overflow policy do: a longer request is answered as if whole, its oldest messages after
    the system prompt dropped (`kept`: the script sees what is left), and `prompt_tokens`
    counts what was left, at most this."""
    content_required: bool = False
    """OpenAI's rule: an assistant message with no tool calls must have text (`content:
    null` alone is a 400)."""
    nonblank_text: bool = False
    """Anthropic's rule: no message's text may be empty or only whitespace, but the last
    message's, an assistant's to continue."""
    unique_call_ids: bool = False
    """Anthropic's rule: no tool call id twice in a request's history, and every tool
    result answering a call made before it."""
    parses_arguments: bool = False
    """A server that parses the arguments of the tool calls a request's assistant messages
    hold (vLLM and Ollama do, for their chat templates): any that is not a JSON object is a
    400."""

    pairs_tool_calls: bool = False
    """OpenAI's rule: an assistant message's tool calls answered by `tool` messages right
    after it, one for each id, before any other message; a `tool` message only for a call of
    the assistant message before it; call ids at most 40 characters."""
    alternating_roles: bool = False
    """A strict chat template's rule (Mistral-7B-Instruct, Gemma, Llama 2 under vLLM): a
    system message only first, then user and assistant turns alternating, user first (tool
    results and calling turns not counted)."""
    last_user_or_tool: bool = False
    """Mistral's rule: the last message is the user's or a tool result, never the model's."""
    role_order: bool = False
    """Mistral's rule: after a tool result, only another result or the model's turn."""
    nine_char_call_ids: bool = False
    """Mistral's templates' rule: every call id nine letters and digits."""
    thinks_streamed_only: bool = False
    """Alibaba Cloud Model Studio's rule for Qwen3: a call that does not stream is refused
    unless it sends `enable_thinking: false`."""
    thinking_sent_back: bool = False
    """DeepSeek's thinking mode's rule (Moonshot's for Kimi K2 is the same): every assistant
    message that called tools carries its `reasoning_content`."""
    schema_subset: bool = False
    """Google Gemini's rule: every tool's parameters within its subset of OpenAPI 3.0's schema
    (`schema_rules`), refused in its words, the body a one-element list."""
    state_back: str | None = None
    """OpenRouter's rule for its models that think (`"reasoning_details"`), or a LiteLLM
    proxy's in front of Anthropic with thinking (`"thinking_blocks"`): a model's turn that
    called tools comes back with exactly the state its reply came with in that field, or the
    request is refused in Anthropic's words (`reasoning_state`)."""
    no_tools: bool = False
    """Ollama serving a model whose template has no tool support (Gemma, older DeepSeek-R1
    tags, Phi-3): a request with `tools` is refused in its words ("registry.ollama.ai/library/
    <model> does not support tools", `type: api_error`); one without goes through the
    template, which renders no `tool` message and no turn's `tool_calls`: the script sees the
    request without them (`kept`), as the model would, silently."""
    given: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """`state_back`: what each call's reply came with, by call id."""

    @classmethod
    def reasoning_model(
        cls, *, reasoning_tokens: int = 64, context_tokens: int | None = None
    ) -> Endpoint:
        return cls(
            unsupported_parameters={"max_tokens": "Use 'max_completion_tokens' instead."},
            default_only={"temperature": 1, "top_p": 1},
            reasoning_efforts=("minimal", "low", "medium", "high"),
            reasoning_tokens=reasoning_tokens,
            context_tokens=context_tokens,
        )

    def check(self, request: dict[str, Any]) -> HttpError | None:
        """The provider's 400 for this request, or None when it would be served."""
        for name in self.unrecognized:
            if name in request:
                return invalid_request(
                    f"Unrecognized request argument supplied: {name}", param=None, code=None
                )
        for name, advice in self.unsupported_parameters.items():
            if name in request:
                message = f"Unsupported parameter: '{name}' is not supported with this model."
                return invalid_request(
                    f"{message} {advice}".strip(), param=name, code="unsupported_parameter"
                )
        for name, default in self.default_only.items():
            value = request.get(name)
            if value is not None and value != default:
                return invalid_request(
                    f"Unsupported value: '{name}' does not support {value} with this model. "
                    f"Only the default ({default}) value is supported.",
                    param=name,
                    code="unsupported_value",
                )
        if self.thinks_streamed_only and not request.get("stream"):
            if request.get("enable_thinking") is not False:
                return invalid_request(
                    "parameter.enable_thinking must be set to false for non-streaming calls",
                    param=None,
                    code="invalid_parameter_error",
                )
        if self.no_tools and request.get("tools"):
            message = f"registry.ollama.ai/library/{request.get('model')} does not support tools"
            body = {"error": {"message": message, "type": "api_error", "param": None, "code": None}}
            return HttpError(400, message, body=body)
        if self.schema_subset and (refused := schema_refused(request.get("tools"))) is not None:
            return refused
        effort = request.get("reasoning_effort")
        if self.reasoning_efforts is not None and effort is not None:
            if effort not in self.reasoning_efforts:
                return invalid_request(
                    f"Unsupported value: 'reasoning_effort' does not support '{effort}' with "
                    f"this model. Supported values are: {_listed(self.reasoning_efforts)}.",
                    param="reasoning_effort",
                    code="unsupported_value",
                )
        return self._check_messages(request) or self._check_context(request)

    def _check_messages(self, request: dict[str, Any]) -> HttpError | None:
        messages = request.get("messages") or []
        if self.unique_call_ids and (refused := call_ids_refused(messages)) is not None:
            return refused
        if self.pairs_tool_calls and (refused := pairing_refused(messages)) is not None:
            return refused
        if self.alternating_roles and (refused := alternation_refused(messages)) is not None:
            return refused
        if self.last_user_or_tool and (refused := last_role_refused(messages)) is not None:
            return refused
        if self.role_order and (refused := role_order_refused(messages)) is not None:
            return refused
        if self.nine_char_call_ids and (refused := call_id_shape_refused(messages)) is not None:
            return refused
        if self.state_back and (refused := state_refused(messages, self.state_back, self.given)):
            return refused
        for i, message in enumerate(messages):
            content = message.get("content")
            if (
                self.thinking_sent_back
                and message.get("role") == "assistant"
                and message.get("tool_calls")
                and not isinstance(message.get("reasoning_content"), str)
            ):
                return invalid_request(
                    "The `reasoning_content` in the thinking mode must be passed back to the API.",
                    param=None,
                    code="invalid_request_error",
                )
            if (
                self.content_required
                and message.get("role") == "assistant"
                and content is None
                and not message.get("tool_calls")
            ):
                return invalid_request(
                    "Invalid value for 'content': expected a string, got null.",
                    param=f"messages.[{i}].content",
                    code=None,
                )
            if self.parses_arguments and not all(
                _json_object(c.get("function", {}).get("arguments"))
                for c in message.get("tool_calls") or []
            ):
                return invalid_request("invalid tool call arguments", param=None, code=None)
            last = i == len(messages) - 1 and message.get("role") == "assistant"
            texts = message.get("role") in ("system", "user", "assistant")
            blank = isinstance(content, str) and not content.strip()
            if self.nonblank_text and texts and blank and not last:
                return invalid_request(
                    "messages: text content blocks must contain non-whitespace text",
                    param=None,
                    code=None,
                )
        return None

    def _check_context(self, request: dict[str, Any]) -> HttpError | None:
        if self.context_tokens is None:
            return None
        prompt = estimate_request_tokens(request)
        output = request.get("max_completion_tokens") or request.get("max_tokens") or 0
        limit = self.context_tokens
        if prompt > limit:
            message = (
                f"This model's maximum context length is {limit} tokens. However, your messages "
                f"resulted in {prompt} tokens. Please reduce the length of the messages."
            )
        elif prompt + output > limit:
            message = (
                f"This model's maximum context length is {limit} tokens. However, you requested "
                f"{prompt + output} tokens ({prompt} in the messages, {output} in the "
                "completion). Please reduce the length of the messages or completion."
            )
        else:
            return None
        return invalid_request(message, param="messages", code="context_length_exceeded")

    def kept(self, request: dict[str, Any]) -> dict[str, Any]:
        """What a server that cuts prompts to `truncates_to` keeps of the request (Ollama's
        `chatPrompt`): its system messages, and the latest others that fit, the last one
        whatever its length; without what a template with no tools renders nothing of
        (`no_tools`)."""
        if self.no_tools:
            request = {**request, "messages": _without_tools(request.get("messages") or [])}
        if self.truncates_to is None:
            return request
        messages = request.get("messages") or []
        system = [m for m in messages if m.get("role") == "system"]
        rest = [m for m in messages if m.get("role") != "system"]
        dropped = 0
        while dropped < len(rest) - 1 and (
            estimate_request_tokens({**request, "messages": system + rest[dropped:]})
            > self.truncates_to
        ):
            dropped += 1
        return {**request, "messages": system + rest[dropped:]} if dropped else request

    def shape(self, reply: Reply, request: dict[str, Any]) -> Reply:
        """The reply as this endpoint reports it: reasoning tokens, prompt tokens counted the
        way its context window counts them (of the request it `kept`, when it cuts); its calls
        named, and the state they came with remembered (`state_back`)."""
        changes: dict[str, Any] = {}
        if self.state_back:
            reply = remembered(self.given, self.state_back, reply)
        if self.reasoning_tokens is not None and reply.reasoning_tokens is None:
            changes["reasoning_tokens"] = self.reasoning_tokens
        counts = self.context_tokens is not None or self.truncates_to is not None
        if counts and reply.usage is None:
            calls = json.dumps([[c.name, c.arguments] for c in reply.tool_calls])
            completion = scripted_tokens((reply.content or "") + calls)
            prompt = estimate_request_tokens(request)
            if self.truncates_to is not None:  # the runner cuts the last message too
                prompt = min(prompt, self.truncates_to)
            changes["usage"] = (prompt, completion)
        return replace(reply, **changes) if changes else reply


def _without_tools(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages a template with no tools renders: no `tool` message, no `tool_calls`."""
    return [
        {k: v for k, v in m.items() if k != "tool_calls"}
        for m in messages
        if m.get("role") != "tool"
    ]
