"""Tool calls a model wrote into its reply's text, read as the calls they are.

An open model behind an endpoint that does not parse its tool calls (vLLM without
`--enable-auto-tool-choice` or with another model's `--tool-call-parser`, a llama.cpp server
without `--jinja`, an Ollama model whose template has no tools) writes each call in its own
format into the text. The run took that text for the model's answer: it ended at once, as a
success, its output a call that never ran. The formats the open models are trained on are
read here, when the reply has no calls of its own:

- Hermes, Qwen2.5/Qwen3, NousResearch: `<tool_call>{"name": …, "arguments": {…}}</tool_call>`,
  one block per call;
- Mistral: `[TOOL_CALLS][{"name": …, "arguments": {…}}, …]`, or `[TOOL_CALLS]name[ARGS]{…}`;
- Llama 3.1–3.3: `<|python_tag|>{"name": …, "parameters": {…}}`, or that object alone as
  the whole reply;
- gpt-oss (harmony): `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}
  <|call|>` (or `to=` before `<|channel|>`), or `commentary to=functions.NAME json{…}` when
  the detokenizer left the special tokens out (`reactive_temporal.harmony`).

Calls end the reply, as models write them: a block with words after it is quoted, not made
(a page the model read may hold one, planted to be run). A block quoted last is told by what
it copies: calls that repeat what a tool returned (`read`: its quotes, backslashes, spacing
and HTML escapes aside) are the page's words, and stay text. A call counts when its block
reads as one (a name, and a JSON object for arguments): a call of a tool the step did not
offer is then refused as any unknown tool is, and the model reads which tools there are,
where the run ended with the markup as its answer. A harmony call names its tool in its
header, whatever its message holds: arguments that are no JSON object go to the tool as
written, which refuses them by name ("arguments are not valid JSON"), as an endpoint's call
with broken arguments does (`reply_calls.arguments_text`), and the model reads that its call
did not read; the run ended with the markup as its answer. The bare object, with no marker to
say it is a call, counts only when it names an offered tool. Anything else is left as the
text it was. The text before the first call stays the reply's text.

Pure: no I/O.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from reactive_temporal.call_names import tool_name_of
from reactive_temporal.contracts.run import ToolCall
from reactive_temporal.harmony import harmony_calls
from reactive_temporal.limits import TOOL_ARGUMENTS_TOTAL_MAX_CHARS

_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)
_MISTRAL = re.compile(r"\[TOOL_CALLS\]\s*(.*)\Z", re.DOTALL)
_MISTRAL_ARGS = re.compile(r"\[TOOL_CALLS\]\s*([\w.-]+)\s*\[ARGS\]\s*(.*)\Z", re.DOTALL)
_PYTHON_TAG = re.compile(r"<\|python_tag\|>\s*(.*)\Z", re.DOTALL)
_MARKERS = ("<tool_call>", "[TOOL_CALLS]", "<|python_tag|>")
_HARMONY_MARKERS = ("<|channel|>", "commentary")
TEXT_CALLS_MAX_CHARS = 2 * TOOL_ARGUMENTS_TOTAL_MAX_CHARS
"""A longer text is not read for calls: what they would carry is past what a reply's calls may
(`limits`), and a hostile endpoint's 60 MB reply is not parsed as JSON on the event loop."""


QUOTE_MIN_CHARS = 24
"""A block this short (its quotes and spacing aside) is not taken for a copy: a page may hold
`{"name": "x"}` by chance."""
_UNQUOTED = re.compile(r"""\\[nrt]|[\s"'\\`]+|<\|[a-z_]{1,16}\|>""")
"""What a copy may gain or lose on its way through a tool's result and back: spacing, quotes,
escapes (`\\n` for a line break), special tokens (a page's `<|channel|>`, written as text,
comes back as the token, which the server may strip)."""


def calls_in_text(
    text: str | None,
    real_names: Mapping[str, str],
    *,
    id_prefix: str,
    read: Callable[[], Iterable[str]] = tuple,
    copies: list[str] | None = None,
) -> tuple[str | None, list[ToolCall]] | None:
    """`(text before the calls, the calls)` when `text` holds calls in a format an open model
    writes, each naming a tool of `real_names` (wire name → the tool's name) with a JSON
    object for arguments, none copied from `read` (what the tools returned, asked only when
    there are calls); None otherwise. Calls get ids `<id_prefix>_<n>`. Calls left as text
    for being copies are added to `copies`, for the worker to say."""
    if not text or len(text) > TEXT_CALLS_MAX_CHARS:
        return None
    found = _marked(text, real_names) if any(m in text for m in _MARKERS) else None
    if found is None and any(m in text for m in _HARMONY_MARKERS):
        found = _harmony(text, real_names)
    if found is None and text.lstrip().startswith("{"):
        found = _bare_object(text, real_names)
    if found is None:
        return None
    before, calls = found
    if copied(text[len(before) :], read()):
        if copies is not None:
            copies.append(text[len(before) :])
        return None
    ids = [f"{id_prefix}_{n}" for n in range(len(calls))]
    tool_calls = [
        ToolCall(id=i, name=name, arguments=_as_text(arguments))
        for i, (name, arguments) in zip(ids, calls, strict=True)
    ]
    return (before.strip() or None), tool_calls


def copied(written: str, read: Iterable[str]) -> bool:
    """Whether calls written at the end of a reply (`written`, from the first call on) copy
    what the model read: any one block of them, or the whole, found in a tool's result once
    quotes, backslashes, spacing and HTML escapes are set aside (a page's block comes back
    JSON-escaped in a tool's result, and the model writes it unescaped)."""
    blocks = [b.group(0) for b in _HERMES.finditer(written)]
    if not blocks and any(m in written for m in _HARMONY_MARKERS):
        blocks = (harmony_calls(written) or ("", [], []))[2]
    blocks = blocks or [written]
    pieces = {_squeezed(p) for p in blocks} | {_squeezed(written)}
    pieces = {p for p in pieces if len(p) >= QUOTE_MIN_CHARS}
    if not pieces:
        return False
    for result in read:
        seen = _squeezed(html.unescape(result))
        if any(p in seen for p in pieces):
            return True
    return False


def _squeezed(text: str) -> str:
    return _UNQUOTED.sub("", text)


def _marked(text: str, names: Mapping[str, str]) -> tuple[str, list[tuple[str, Any]]] | None:
    if "<tool_call>" in text:
        blocks = list(_HERMES.finditer(text))
        if not blocks or not _the_tail(text, blocks):
            return None
        calls = [_call(_json(b.group(1)), names, marked=True) for b in blocks]
        return _all(text[: blocks[0].start()], calls)
    if (match := _MISTRAL_ARGS.search(text)) is not None:
        name, arguments = match.group(1), _json(match.group(2))
        call = _call({"name": name, "arguments": arguments}, names, marked=True)
        return _all(text[: match.start()], [call])
    if (match := _MISTRAL.search(text)) is not None:
        listed = _json(match.group(1))
        listed = listed if isinstance(listed, list) else [listed]
        return _all(text[: match.start()], [_call(item, names, marked=True) for item in listed])
    if (match := _PYTHON_TAG.search(text)) is not None:
        parsed = _json(match.group(1))
        items = parsed if isinstance(parsed, list) else [parsed]
        return _all(text[: match.start()], [_call(item, names, marked=True) for item in items])
    return None


def _harmony(text: str, names: Mapping[str, str]) -> tuple[str, list[tuple[str, Any]]] | None:
    """gpt-oss's calls, addressed `to=` a tool: each marked a call by its recipient."""
    found = harmony_calls(text)
    if found is None:
        return None
    before, calls, _ = found
    items = [{"name": _recipient(to, names), "arguments": args} for to, args in calls]
    return _all(before, [_call(item, names, marked=True, as_written=True) for item in items])


def _recipient(name: str, names: Mapping[str, str]) -> str:
    """A recipient with the content type glued on (`functions.get_weatherjson`, when the
    model left out the space or the `<|constrain|>` between them) names the tool before it."""
    if name.endswith("json") and tool_name_of(name, names) not in names.values():
        if tool_name_of(name[:-4], names) in names.values():
            return name[:-4]
    return name


def _the_tail(text: str, blocks: list[re.Match[str]]) -> bool:
    """Whether the blocks end the reply, one after another: a model writes its calls last. A
    block with words after it, or between two, is quoted (a page the model read may hold
    one, planted to be run), not made."""
    ends = [0, *(b.end() for b in blocks)]
    gaps = [text[end : b.start()] for end, b in zip(ends[1:], blocks[1:], strict=False)]
    return not text[blocks[-1].end() :].strip() and not any(g.strip() for g in gaps)


def _bare_object(text: str, names: Mapping[str, str]) -> tuple[str, list[tuple[str, Any]]] | None:
    """Llama's JSON tool format: the object alone is the whole reply (`parameters`, not
    `arguments`, is how it writes them; either is taken)."""
    parsed = _json(text)
    if not isinstance(parsed, dict) or set(parsed) - {"name", "parameters", "arguments"}:
        return None
    return _all("", [_call(parsed, names, marked=False)])


def _call(
    item: object, names: Mapping[str, str], *, marked: bool, as_written: bool = False
) -> tuple[str, Any] | None:
    """(the tool's name, its arguments) when `item` reads as a call: of an offered tool, or
    of any when a marker said it is one (`marked`). With `as_written` (the name is the
    markup's, not the JSON's), arguments text that is no JSON object is kept as it is, for the
    tool to refuse."""
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        return None
    written = arguments = item.get("arguments", item.get("parameters", {}))
    if isinstance(arguments, str):  # some write the arguments as JSON text, as the API does
        arguments = _json(arguments)
        if as_written and not isinstance(arguments, dict):
            arguments = written
    name = tool_name_of(item["name"], names)
    known = marked or name in names.values()
    readable = isinstance(arguments, dict) or (as_written and isinstance(arguments, str))
    return (name, arguments) if known and readable else None


def _as_text(arguments: Any) -> str:
    """A call's arguments as its `ToolCall` carries them: JSON text, or the text as written
    (none written: none, `{}`)."""
    if isinstance(arguments, str):
        return arguments if arguments.strip() else "{}"
    return json.dumps(arguments)


def _all(
    before: str, calls: list[tuple[str, Any] | None]
) -> tuple[str, list[tuple[str, Any]]] | None:
    """Every call read, or none: a block that does not read is text, and so are the rest."""
    if not calls or any(c is None for c in calls):
        return None
    return before, [c for c in calls if c is not None]


def _json(text: str) -> Any:
    try:
        return json.loads(text.strip())
    except (ValueError, RecursionError):
        return None
