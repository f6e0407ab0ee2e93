"""One LLM reply as activities take it: its answer without the model's thinking, the
thinking, why it ended (in OpenAI's words, whatever the provider said), and what it cost."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from openai.types.chat import ChatCompletion

from activities.reply_calls import content_text, finish_reason_of
from reactive_temporal.contracts.run import Usage
from reactive_temporal.thinking import reasoning_of, split_thinking


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
        """Whether the model sent thinking; False for a reply that cannot be read at all, which
        its caller reads (and fails on) as its own: an error here was retried as an outage."""
        try:
            return self.thinking is not None
        except Exception:
            return False

    @property
    def cut_while_thinking(self) -> bool:
        """Cut off at the output cap with thoughts and no answer."""
        return self.finish_reason == "length" and not self.content and self.thinking is not None

    def after(self, earlier: Completion) -> Completion:
        """This reply, having cost what `earlier` did as well."""
        return Completion(self.response, earlier.usage + self.usage, earlier.cost + self.cost)

    @property
    def finish_reason(self) -> str | None:
        """Why the model stopped (`stop`, `length`, `content_filter`, `tool_calls`)."""
        reason = self.response.choices[0].finish_reason if self.response.choices else None
        return finish_reason_of(reason)
