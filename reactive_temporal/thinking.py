"""A reasoning model's thinking, told apart from its answer.

Open reasoning models served as they come (DeepSeek-R1 and its distills, Qwen3, QwQ under
vLLM without a reasoning parser, Ollama, LM Studio) write their thinking into the reply's
text: `<think>…</think>` before the answer (Magistral: `[THINK]…[/THINK]`), or only the
closing tag when the chat template opened the block in the prompt. Taken as the answer, it
was the run's output and the chat's reply, a `FINAL ANSWER:` line the model only considered
while thinking ended the run, a debrief's JSON could not be read behind it, and every later
request sent it back (their guidance: the history holds the answers only), filling small
context windows with old thoughts.

Endpoints with a reasoning parser send it apart, as `reasoning_content` (DeepSeek's API,
vLLM) or `reasoning` (OpenRouter, Ollama, vLLM's newer releases): read here too.

Pure: no I/O.
"""

from __future__ import annotations

import re

_OPENS = re.compile(r"\A\s*(?:<(?:think|thinking)>|\[THINK\])", re.IGNORECASE)
_CLOSE = r"(?:</(?:think|thinking)>|\[/THINK\])"
"""`</think>`, or Magistral's `[/THINK]` (its newer releases think in those tokens)."""
_CLOSES = re.compile(_CLOSE, re.IGNORECASE)
_CLOSES_ALONE = re.compile(rf"(?:\A|\n)[ \t]*{_CLOSE}[ \t]*(?:\n|\Z)", re.IGNORECASE)
"""A block the template opened is closed on a line of its own: a `</think>` inside a line is
words the model wrote (quoting a page that planted one, say), not the end of its thinking."""
REASONING_FIELDS = ("reasoning_content", "reasoning")
"""Where endpoints with a reasoning parser put the thinking, beside `content`."""


def split_thinking(text: str | None) -> tuple[str | None, str | None]:
    """`(thinking, answer)` of a reply's text; each None when there is none.

    A block counts only at the start of the text (a `</think>` on a line of its own counts
    when nothing before it opened one): a tag further on is the answer's own words. A block
    never closed (the reply cut off while thinking) is all thinking, and there is no answer."""
    if not text or "think" not in text.lower():
        return None, text
    opened = _OPENS.match(text)
    start = opened.end() if opened else 0
    closed = (_CLOSES if opened else _CLOSES_ALONE).search(text, start)
    if closed is None:
        if opened is None:
            return None, text
        return _or_none(text[start:]), None
    before = text[: closed.start()].lower()
    if opened is None and ("<think" in before or "[think]" in before):
        return None, text  # a tag quoted in the answer, not a block the template opened
    return _or_none(text[start : closed.start()]), _or_none(text[closed.end() :])


def reasoning_of(message: object) -> str | None:
    """The thinking an endpoint sent apart from the text (`REASONING_FIELDS`)."""
    for name in REASONING_FIELDS:
        value = getattr(message, name, None)
        if value is None and isinstance(getattr(message, "model_extra", None), dict):
            value = message.model_extra.get(name)  # type: ignore[attr-defined]
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _or_none(text: str) -> str | None:
    text = text.strip()
    return text or None
