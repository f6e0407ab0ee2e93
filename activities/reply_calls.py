"""A model's reply as the run carries it, whatever shape its endpoint gave it (pure).

The openai client builds replies without validating them, so a field can hold anything the
endpoint sent. What real endpoints send besides OpenAI's shapes:

- a tool call without an `id` (its place then names it, `approval_rules`), or with
  `arguments` as a JSON object rather than text, or as text encoded twice (a JSON string
  holding the object's text); each made every retry of the step call the model again, or
  every call of the tool fail;
- a call's `extra_content` (Gemini 3's `thought_signature`), which the endpoint refuses the
  next request without: kept with the call and sent back as it came;
- `content` as a list of parts (`[{"type": "text", "text": …}]`);
- no `content` but a `refusal` (OpenAI's safety refusal): the refusal is the reply's text,
  where it was taken for an empty reply and nudged until the run's iterations ran out;
- a reasoning model's thinking, in the text or beside it (`reactive_temporal.thinking`):
  kept with the step's record only (`with_thinking`);
- state the endpoint attaches to the turn and wants back on it (OpenRouter's
  `reasoning_details`, LiteLLM's `thinking_blocks`: `activities.turn_state`), kept with the
  step's record only and sent back as it came;
- tool calls written into the text by an endpoint that does not parse them
  (`reactive_temporal.text_calls`), or by a model asked to write them there
  (`ModelCapabilities.tools_in_prompt`); calls that are not made (copies of a tool's result,
  blocks that name no tool) taken out of the text (`unmade_calls_out`), and those that could
  not be read said (`ReadReply.unread_calls`), for the run to tell the model.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from openai.types.chat import ChatCompletionMessageCustomToolCall

from activities.turn_state import TurnState, state_of
from reactive_temporal.call_names import tool_name_of
from reactive_temporal.contracts.llm_payloads import LlmStepResult, RationaleDetail
from reactive_temporal.contracts.run import SeqMessage, ToolCall
from reactive_temporal.harmony import in_harmony, without_calls
from reactive_temporal.rationale import parse_rationale_blocks, strip_rationale_blocks
from reactive_temporal.sanitize import clean_text, clip
from reactive_temporal.text_calls import WrittenCalls, read_calls, without_text_calls
from reactive_temporal.thinking import reasoning_of, split_thinking

EXTRA_CONTENT_MAX_BYTES = 16_000
"""A call's `extra_content` is kept up to this size in JSON (a thought signature is a few
kilobytes at most); a larger one is dropped rather than carried in every later request."""


def arguments_text(value: object) -> str:
    """A call's arguments as the JSON text of an object, where the endpoint sent one in any
    form; anything else as it came ('{}' for none), for the tool to refuse by name."""
    if value is None or value == "":
        return "{}"
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    if not isinstance(value, str):
        return json.dumps(value, ensure_ascii=False, default=str)
    if value.lstrip()[:1] == '"':  # a JSON string: the object's text encoded twice?
        try:
            inner = json.loads(value)
            if isinstance(inner, str) and isinstance(json.loads(inner), dict):
                return inner
        except (ValueError, RecursionError):
            pass
    return value


def extra_content_of(call: object) -> dict[str, Any] | None:
    """The call's `extra_content` when it is an object within EXTRA_CONTENT_MAX_BYTES."""
    value = call.get("extra_content") if isinstance(call, Mapping) else None
    if value is None and not isinstance(call, Mapping):
        value = getattr(call, "extra_content", None)
    if not isinstance(value, dict) or not value:
        return None
    try:
        size = len(json.dumps(value))
    except (TypeError, ValueError, RecursionError):
        return None
    return value if size <= EXTRA_CONTENT_MAX_BYTES else None


def content_text(message: object) -> str | None:
    """The reply's text: `content` as text or as text parts, else its `refusal`."""
    content = getattr(message, "content", None)
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        content = "".join(p for p in parts if isinstance(p, str)) or None
    if isinstance(content, str) and content:
        return content
    refusal = getattr(message, "refusal", None)
    return refusal if isinstance(refusal, str) and refusal.strip() else None


def reply_calls(
    message: object, real_names: Mapping[str, str], unwrapped: list[str] | None = None
) -> list[ToolCall]:
    """The reply's function calls, their wire names mapped back to the tools' names (the
    names that had to be unwrapped first, `call_names`, added to `unwrapped`)."""
    calls: list[ToolCall] = []
    for call in getattr(message, "tool_calls", None) or []:
        if isinstance(call, ChatCompletionMessageCustomToolCall):
            continue  # a custom (free-text) tool call: no tool of ours is one
        function = getattr(call, "function", None)
        name = getattr(function, "name", None)
        name = name if isinstance(name, str) else ""
        call_id = getattr(call, "id", None)
        meant = tool_name_of(name, real_names)
        if unwrapped is not None and meant != name and name not in real_names:
            unwrapped.append(name)
        calls.append(
            ToolCall(
                id=call_id if isinstance(call_id, str) else "",
                name=meant,
                arguments=arguments_text(getattr(function, "arguments", None)),
                extra_content=extra_content_of(call),
            )
        )
    return calls


@dataclass(frozen=True)
class ReadReply:
    """A model's reply as a step takes it, before `limits.bound_reply`."""

    content: str | None
    calls: list[ToolCall]
    thinking: str | None = None
    rationale: dict[int, RationaleDetail] = field(default_factory=dict)
    calls_from_text: bool = False
    """The calls were written into the text (`reactive_temporal.text_calls`)."""
    unwrapped_names: int = 0
    """Calls whose name had to be unwrapped to name a tool (`reactive_temporal.call_names`)."""
    copied_calls: str | None = None
    """Calls the reply wrote at its end that copy a tool's result: not made, and taken out of
    its text."""
    unread_calls: str | None = None
    """Calls the reply wrote at its end that could not be read (a block that names no tool:
    no name, cut off before it), as written: not made, and taken out of its text, so the run
    tells the model rather than end on its words (`LlmStepResult.unread_calls`)."""
    harmony_in_text: bool = False
    """The text was in gpt-oss's harmony markup (`reactive_temporal.harmony`), read by its
    channels: the endpoint left it there."""
    state: TurnState | None = None
    """What the endpoint attached to the turn for itself (`activities.turn_state`)."""


def read_reply(
    message: object,
    real_names: Mapping[str, str],
    *,
    audit_rationale: bool,
    id_prefix: str,
    calls_in_text: bool = True,
    transcript: Sequence[SeqMessage] = (),
) -> ReadReply:
    """The reply's text without its thinking (and rationale blocks, in audit mode), and its
    calls: those it made, or else (`calls_in_text`) those it wrote into the text, ids
    `<id_prefix>_<n>`, unless they copy a tool's result in `transcript` or one names no
    tool. Calls written at the end of the text and not made are never its words."""
    unwrapped: list[str] = []
    calls = reply_calls(message, real_names, unwrapped)
    text = content_text(message)
    thinking, content = split_thinking(text)
    thinking = reasoning_of(message) or thinking
    rationale: dict[int, RationaleDetail] = {}
    if audit_rationale:
        rationale = parse_rationale_blocks(content)
        content = strip_rationale_blocks(content) or None
    written: WrittenCalls | None = None
    if not calls and calls_in_text:
        read = functools.partial(tool_results, transcript)
        written = read_calls(content, real_names, id_prefix=id_prefix, read=read)
    if written is not None:  # made or not, the calls are not the reply's words
        content, calls = written.before, written.calls
    else:
        content = unmade_calls_out(content, text, calls_in_text=calls_in_text)
    return ReadReply(
        content,
        calls,
        thinking,
        rationale,
        calls_from_text=bool(calls) and written is not None,
        unwrapped_names=len(unwrapped),
        copied_calls=written.written if written is not None and written.copied else None,
        unread_calls=written.written if written is not None and written.unread else None,
        harmony_in_text=thinking is not None and in_harmony(text),
        state=state_of(message),
    )


def unmade_calls_out(content: str | None, text: str | None, *, calls_in_text: bool) -> str | None:
    """A reply's words without the calls written at their end that were not made (a copy of
    a tool's result, a block that names no tool, a reply past what text calls may carry, a
    direct chat turn, which has no tools): markup that was the run's output and the chat's
    reply. Where calls are read from the text, in every format `text_calls` reads; where
    they are not, gpt-oss's harmony calls only, and only where the whole reply came in
    harmony markup (`text`: the reply's text as it came): such a model may quote a call in
    an answer of its own."""
    if not content:
        return content
    if calls_in_text:
        return without_text_calls(content)
    return without_calls(content) if in_harmony(text) else content


TOOL_RESULTS_READ_MAX_CHARS = 256_000
"""How much of what the tools returned a reply's text calls are compared with, newest first:
a model quotes what it read last, and a long run's every result, read at each of its steps
that writes calls in its text (vLLM without a tool parser: all of them), cost the worker's
event loop milliseconds a step."""


def tool_results(transcript: Sequence[SeqMessage]) -> Iterator[str]:
    """What the tools returned to the model, newest first, up to TOOL_RESULTS_READ_MAX_CHARS
    (a planted call is most often in what it read last)."""
    left = TOOL_RESULTS_READ_MAX_CHARS
    for entry in reversed(transcript):
        if left <= 0:
            return
        if entry.message.role == "tool" and entry.message.content:
            left -= len(entry.message.content)
            yield entry.message.content


FINISH_REASONS = {
    # cut off at the output limit, or at the context window (Mistral's `model_length`)
    "max_tokens": "length",
    "max_output_tokens": "length",
    "model_length": "length",
    "model_context_window_exceeded": "length",
    # stopped by the provider's filter (Gemini's and Bedrock's words, through gateways)
    "safety": "content_filter",
    "recitation": "content_filter",
    "prohibited_content": "content_filter",
    "blocklist": "content_filter",
    "spii": "content_filter",
    "guardrail_intervened": "content_filter",
    "content-filter": "content_filter",
    # the model ended its turn (Anthropic's, Together's, TGI's words)
    "end_turn": "stop",
    "stop_sequence": "stop",
    "eos": "stop",
    "eos_token": "stop",
    "tool_use": "tool_calls",
    "function_call": "tool_calls",
}
"""Finish reasons other endpoints and gateways send, in OpenAI's words. A reply Mistral cut
at the context window (`model_length`), or a gateway passed on as `max_tokens`, was taken for
a whole one: a `FINAL ANSWER:` cut mid-sentence ended the run as its answer."""


def finish_reason_of(value: object) -> str | None:
    """A reply's finish reason in OpenAI's words (`FINISH_REASONS`); others as they came."""
    if not isinstance(value, str):
        return None
    return FINISH_REASONS.get(value.strip().lower(), value)


THINKING_MAX_CHARS = 64_000
"""A step's thinking kept with its record; longer keeps its head and tail around a marker."""


class ThoughtStep(LlmStepResult):
    """A step's result as its record keeps it: with the model's thinking, which the workflow
    is never given (every step's thoughts would be in its history), and which the next
    requests carry only to the endpoints that want it back (`Transcripts`); and with the
    state the endpoint attached to the turn, which they carry whenever there is one."""

    thinking: str | None = None
    turn_state: str | None = None
    """`activities.turn_state.state_text`: as JSON text, so it goes back as it came."""


def recorded_thinking(thinking: str | None) -> str | None:
    """`thinking` as a step's record keeps it: bounded, and as Postgres stores it."""
    return clip(clean_text(thinking, nul=True), THINKING_MAX_CHARS) if thinking else None


def with_thinking(
    result: LlmStepResult, thinking: str | None, turn_state: str | None = None
) -> LlmStepResult:
    """`result` to record, with `thinking` (bounded) when the model sent any and the turn's
    state (`turn_state.recorded_state`) when the endpoint attached some. A retried step reads
    its record back as an `LlmStepResult`, without them."""
    kept = recorded_thinking(thinking)
    if not kept and not turn_state:
        return result
    return ThoughtStep.model_construct(**dict(result), thinking=kept, turn_state=turn_state)
