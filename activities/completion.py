"""One LLM reply as activities take it: its answer without the model's thinking, the
thinking, why it ended (in OpenAI's words, whatever the provider said), and what it cost."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from openai.types.chat import ChatCompletion

from activities.reply_calls import content_text, finish_reason_of
from reactive_temporal.contracts.run import Usage
from reactive_temporal.model_quirks import error_message
from reactive_temporal.thinking import reasoning_of, split_thinking

BROKEN_OFF_REASONS = {"error", "abort"}
"""Finish reasons of a generation that failed part-way, not of a model that ended its turn:
OpenRouter's and vLLM's `error`, vLLM's `abort`."""
BROKEN_OFF_MAX_CHARS = 300


def _error_words(error: object) -> str:
    """What an error object a 200 carried says (the provider's own words, through a gateway's
    `metadata.raw` too), whatever its shape."""
    if not isinstance(error, Mapping):  # a model the client built of it
        dump = getattr(error, "model_dump", None)
        error = dump() if callable(dump) else error
    return error_message({"error": error} if isinstance(error, Mapping) else error).strip()


@dataclass(frozen=True)
class Completion:
    """One LLM reply with what it cost."""

    response: ChatCompletion
    usage: Usage
    cost: float

    @property
    def content(self) -> str | None:
        """The first choice's text without the model's thinking, None when there is none."""
        return self._split[1]

    @property
    def thinking(self) -> str | None:
        """What a reasoning model thought before its answer (`reactive_temporal.thinking`)."""
        message = self.response.choices[0].message if self.response.choices else None
        return reasoning_of(message) or self._split[0]

    @functools.cached_property
    def _split(self) -> tuple[str | None, str | None]:
        """The reply's text as it came, `(thinking, answer)`: `content` as text or as text
        parts (Mistral's), else its `refusal` (`reply_calls.content_text`). Split once, however
        often the answer and the thinking are read."""
        message = self.response.choices[0].message if self.response.choices else None
        return split_thinking(content_text(message) if message is not None else None)

    def thought(self) -> bool:
        """Whether the model thought before it answered: it sent its thinking, or its usage
        counts reasoning tokens (Gemini 2.5 and others think without sending a word of it);
        False for a reply that cannot be read at all, which its caller reads (and fails on)
        as its own: an error here was retried as an outage."""
        try:
            return self.thinking is not None or self.usage.reasoning_tokens > 0
        except Exception:
            return False

    @property
    def cut_while_thinking(self) -> bool:
        """Cut off at the output cap with thoughts and no answer."""
        return self.finish_reason == "length" and not self.content and self.thought()

    def after(self, earlier: Completion) -> Completion:
        """This reply, having cost what `earlier` did as well."""
        return Completion(self.response, earlier.usage + self.usage, earlier.cost + self.cost)

    @property
    def broke_off(self) -> str | None:
        """What the endpoint said, when the reply is a generation that failed part-way, not
        the model's whole turn: a 200 whose first choice finished with `error` (OpenRouter,
        vLLM) or carries an error object, or whose body has one beside its choices. Its text
        is whatever the model had written by then (a `FINAL ANSWER:` cut mid-sentence ended
        runs as their answer); None for a reply that did not break off."""
        choices = self.response.choices
        if not choices:
            return None
        reason = choices[0].finish_reason
        error = self.error
        broken = isinstance(reason, str) and reason.strip().lower() in BROKEN_OFF_REASONS
        if not error and not broken:
            return None
        words = _error_words(error) if error else ""
        said = words or f"finish_reason {reason!r}, no error said"
        return said[:BROKEN_OFF_MAX_CHARS]

    @property
    def error(self) -> object:
        """The error object a 200 carried in its first choice or beside its choices (as
        the endpoint sent it, or as the client built it), None when it carried none."""
        choices = self.response.choices
        if not choices:
            return None
        error = getattr(choices[0], "error", None) or getattr(self.response, "error", None)
        dump = getattr(error, "model_dump", None)
        return dump() if error and not isinstance(error, Mapping) and callable(dump) else error

    @property
    def finish_reason(self) -> str | None:
        """Why the model stopped (`stop`, `length`, `content_filter`, `tool_calls`)."""
        reason = self.response.choices[0].finish_reason if self.response.choices else None
        return finish_reason_of(reason)
