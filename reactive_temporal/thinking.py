"""A reasoning model's thinking, told apart from its answer.

Open reasoning models served as they come (DeepSeek-R1 and its distills, Qwen3, QwQ under
vLLM without a reasoning parser, Ollama, LM Studio) write their thinking into the reply's
text: `<think>…</think>` before the answer (Magistral: `[THINK]…[/THINK]`), or only the
closing tag when the chat template opened the block in the prompt. Taken as the answer, it
was the run's output and the chat's reply, a `FINAL ANSWER:` line the model only considered
while thinking ended the run, a debrief's JSON could not be read behind it, and every later
request sent it back (their guidance: the history holds the answers only), filling small
context windows with old thoughts.

gpt-oss writes in channels (its harmony format): a server that does not parse them leaves
the analysis channel, its thinking, in the text before the final one, its answer
(`reactive_temporal.harmony`); read here too, the calls that end such a reply left with its
answer for `text_calls` to read.

Endpoints with a reasoning parser send it apart, as `reasoning_content` (DeepSeek's API,
vLLM) or `reasoning` (OpenRouter, Ollama, vLLM's newer releases): read here too.

Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from reactive_temporal.harmony import harmony_so_far, never_harmony, read_harmony

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
    never closed (the reply cut off while thinking) is all thinking, and there is no answer.
    A reply in harmony markup is read by its channels, the calls that end it left at the end
    of its answer, as written (`harmony.read_harmony`)."""
    if not text:
        return None, text
    if (harmony := read_harmony(text)) is not None:
        thinking, answer, calls = harmony
        return thinking, "\n".join(t for t in (answer, calls) if t) or None
    if "think" not in text.lower():
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


_OPEN_TAGS = ("<think>", "<thinking>", "[think]")
_CLOSE_TAGS = ("</think>", "</thinking>", "[/think]")
_LONGEST_TAG = max(len(tag) for tag in (*_OPEN_TAGS, *_CLOSE_TAGS))
_LEADING_SPACE = re.compile(r"\s*")


def thinking_so_far(text: str, *, ended: bool = False) -> tuple[str, str]:
    """`(thinking, answer)` to show of a reply's text while it streams ('' for none).

    What it shows of a reply only grows as more of it comes, but in a few cases: a
    `</think>` on a line of its own (the template opened the block) makes what was the
    answer so far thinking; and in harmony markup, a reply that began like its stripped
    shape and never was, or a last message on `commentary` that turns out to be the answer
    when the reply ends, go the other way. Text that may yet be a tag is held back until
    the next delta tells (an opening tag at the start, a closing tag at the end, a line
    that may turn out to be a lone `</think>`), and so is the thinking's trailing space;
    once the reply has `ended`, it is exactly `split_thinking`'s reading (a reader learns
    that from the run's next step), but for the calls that end a reply in harmony markup:
    the run's tool steps show those, not its answer. Tags split across deltas are read
    whole this way: the function reads all the text so far each time, not each delta
    alone. A reply in harmony markup is shown by its channels (`harmony.harmony_so_far`)."""
    if ended:
        if (harmony := read_harmony(text)) is not None:
            return harmony.thinking or "", harmony.answer or ""
        thinking, answer = split_thinking(text)
        return thinking or "", answer or ""
    if (so_far := harmony_so_far(text)) is not None:
        return so_far
    start = _LEADING_SPACE.match(text).end()  # type: ignore[union-attr]
    lead = text[start : start + _LONGEST_TAG].lower()
    if any(tag != lead and tag.startswith(lead) for tag in _OPEN_TAGS):
        return "", ""  # nothing yet, or an opening tag part-way
    opened = _OPENS.match(text)
    if opened:
        closed = _CLOSES.search(text, opened.end())
        if closed is None:  # still thinking: hold back a closing tag part-way
            rest = text[opened.end() :]
            return rest[: len(rest) - _partial_close(rest[-_LONGEST_TAG:].lower())].strip(), ""
    line_start = text.rfind("\n") + 1
    last_line = text[line_start:].strip(" \t")
    if 0 < len(last_line) <= _LONGEST_TAG:
        may_close = any(tag.startswith(last_line.lower()) for tag in _CLOSE_TAGS)
        if may_close and not _quotes_a_tag(text[:line_start]):
            return thinking_so_far(text[:line_start])  # a lone closing tag may be coming
    if "</" not in text and "[/" not in text:  # no closing tag: cheap (read at every delta)
        return "", text
    thinking, answer = split_thinking(text)
    return thinking or "", answer or ""


class PlainScan(NamedTuple):
    """How far `thinking_so_far_from` has read a reply's text, to go on from as it grows."""

    read: int = 0
    """The characters read for the tags below."""
    plain_from: int = -1
    """The length from which its start says it is neither harmony nor a block a tag opened,
    whatever follows (`_plain`); -1 while it does not."""
    closes: bool = False
    """`</` or `[/` was written: a closing tag may be there (read it all, as ever)."""
    quotes: bool = False
    """`<think` or `[think]` was written (`_quotes_a_tag`)."""
    answer_is_start: bool = False
    """The reading given is no thinking and the text's own start as the answer: the next
    delta's answer reads on from it (its reader's scans go on)."""


_QUOTED = ("<think", "[think]")
_LOOK_BEHIND = max(len(tag) for tag in _QUOTED)


def thinking_so_far_from(text: str, scan: PlainScan) -> tuple[tuple[str, str], PlainScan]:
    """`thinking_so_far(text)`, and the scan to go on from at the next delta, for `text` that
    begins with the text `scan` was given for (a reader starts from `PlainScan()` when it
    does not). A plain reply, which most are, costs its new characters: it was read whole at
    each delta, so a 600 kB reply cost a watcher minutes. Whatever may be thinking, harmony or
    a closing tag is read by `thinking_so_far`, whole, as it was."""
    window = text[max(0, scan.read - _LOOK_BEHIND) :].lower()
    plain_from = scan.plain_from if scan.plain_from >= 0 else len(text) if _plain(text) else -1
    scan = PlainScan(
        len(text),
        plain_from,
        scan.closes or "</" in window or "[/" in window,
        scan.quotes or any(tag in window for tag in _QUOTED),
    )
    if plain_from < 0 or scan.closes:
        return thinking_so_far(text), scan
    line_start = _short_last_line(text)
    as_is = scan._replace(answer_is_start=True)
    if line_start is None:
        return ("", text), as_is
    last_line = text[line_start:].strip(" \t").lower()
    if scan.quotes or not any(tag.startswith(last_line) for tag in _CLOSE_TAGS):
        return ("", text), as_is
    if line_start < plain_from:
        return thinking_so_far(text), scan  # a short text: read whole
    return ("", text[:line_start]), as_is  # a lone closing tag may be coming


def _plain(text: str) -> bool:
    """Whether `text`'s start says `thinking_so_far` reads it, and all that may follow it, as
    answer but for a closing tag: the lead harmony reads is whole and is not harmony's, and
    no tag opened a block (nor may: the lead is past any tag's length)."""
    return not _OPENS.match(text) and never_harmony(text)


def _short_last_line(text: str) -> int | None:
    """Where the text's last line starts, when it is 1 to `_LONGEST_TAG` characters but
    spaces and tabs at its ends (what may be a lone closing tag part-way), else None; read
    from the end (a reply with no line break was read whole at each delta)."""
    end = len(text)
    while end and text[end - 1] in " \t":
        end -= 1
    if end == 0 or text[end - 1] == "\n":
        return None
    begin = end
    while begin and text[begin - 1] != "\n" and end - begin < _LONGEST_TAG:
        begin -= 1
    while begin and text[begin - 1] in " \t":
        begin -= 1
    return begin if begin == 0 or text[begin - 1] == "\n" else None


def _partial_close(lowered: str) -> int:
    """How many characters at the end of `lowered` may begin a closing tag."""
    for size in range(_LONGEST_TAG - 1, 0, -1):
        if any(tag.startswith(lowered[-size:]) for tag in _CLOSE_TAGS if len(lowered) >= size):
            return size
    return 0


def _quotes_a_tag(before: str) -> bool:
    """An opening tag in the text before a lone `</think>`: the answer quoting one, not a
    block the template opened (`split_thinking`)."""
    lowered = before.lower()
    return "<think" in lowered or "[think]" in lowered


def content_chunks(chunks: list[Any]) -> tuple[str, str]:
    """The text and the thinking of content sent as Mistral's chunks: `{"type": "text",
    "text": …}`, and Magistral's `{"type": "thinking", "thinking": [{"type": "text", "text":
    …}]}` (streamed so, its thinking was dropped, and any text sent so with it)."""
    text: list[str] = []
    thinking: list[str] = []
    for chunk in chunks:
        if not isinstance(chunk, dict):
            continue
        if chunk.get("type") == "thinking" and isinstance(chunk.get("thinking"), list):
            thinking += [
                part["text"]
                for part in chunk["thinking"]
                if isinstance(part, dict) and isinstance(part.get("text"), str)
            ]
        elif isinstance(chunk.get("text"), str):
            text.append(chunk["text"])
    return "".join(text), "".join(thinking)


def reasoning_of(message: object) -> str | None:
    """The thinking an endpoint sent apart from the text (`REASONING_FIELDS`, or Magistral's
    thinking chunks in a `content` of Mistral's chunks)."""
    for name in REASONING_FIELDS:
        value = getattr(message, name, None)
        if value is None and isinstance(getattr(message, "model_extra", None), dict):
            value = message.model_extra.get(name)  # type: ignore[attr-defined]
        if isinstance(value, str) and value.strip():
            return value.strip()
    content = getattr(message, "content", None)
    if isinstance(content, list):
        return _or_none(content_chunks(content)[1])
    return None


def _or_none(text: str) -> str | None:
    text = text.strip()
    return text or None
