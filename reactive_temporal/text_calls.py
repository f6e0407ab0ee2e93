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
and HTML escapes aside) are the page's words, never made. A call counts when its block names
a tool: a call of a tool the step did not offer is then refused as any unknown tool is, and
the model reads which tools there are, where the run ended with the markup as its answer.
Arguments that do not read (bad JSON, no object, a block cut off after its name) go to the
tool as written, which refuses them by name ("arguments are not valid JSON"), as an
endpoint's call with broken arguments does (`reply_calls.arguments_text`), and the model
reads that its call did not read: a Hermes block's name is read from its start when its JSON
does not parse, Mistral's `[ARGS]` and gpt-oss's header name their tool in the markup. A
block that names no tool (no name, cut off before it, not an object) is no call, and the
others with it are none either: `read_calls` says so (`WrittenCalls.unread`), for the run to
tell the model. Calls not made (unread, or copied) are markup, never the reply's words
(`without_text_calls`): each such block stayed in the text, and the run ended as a success
whose answer was `<tool_call>{"name": "calculator", "arguments": {"expression": "2+2"`, the
model never told. A marker followed by no JSON (`[TOOL_CALLS] comes first`), and a block
with words after it (quoted), stay the text they were. The bare object, with no marker to
say it is a call, counts only when it names an offered tool with an object for arguments.
The text before the first call stays the reply's text.

Pure: no I/O.
"""

from __future__ import annotations

import html
import itertools
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reactive_temporal.call_names import tool_name_of
from reactive_temporal.contracts.run import ToolCall
from reactive_temporal.harmony import harmony_calls, without_calls
from reactive_temporal.limits import TOOL_ARGUMENTS_TOTAL_MAX_CHARS

_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)
_MISTRAL = re.compile(r"\[TOOL_CALLS\]\s*(.*)\Z", re.DOTALL)
_MISTRAL_ARGS = re.compile(r"\[TOOL_CALLS\]\s*([\w.-]+)\s*\[ARGS\]\s*(.*)\Z", re.DOTALL)
_PYTHON_TAG = re.compile(r"<\|python_tag\|>\s*(.*)\Z", re.DOTALL)
CALL_MARKERS = ("<tool_call>", "[TOOL_CALLS]", "<|python_tag|>")
"""What opens a call written in Hermes', Mistral's or Llama's format."""
_HARMONY_MARKERS = ("<|channel|>", "commentary")
_NAME_FIRST = re.compile(r'\{\s*"name"\s*:\s*"((?:[^"\\]|\\.){1,256})"\s*')
"""A call object's name, written first (as every format's template writes it), read from a
block whose JSON does not parse."""
_ARGUMENTS_NEXT = re.compile(r',\s*"(?:arguments|parameters)"\s*:\s*')
_JSON_PIECE = re.compile(r'"(?:[^"\\]|\\.)*"?|[{}\[\]]')
"""A JSON string (to its end, or the text's) or a bracket: where a value that does not parse
closes."""
_DECODER = json.JSONDecoder()
CLOSE_SCAN_PIECES = 10_000
"""How many brackets and strings are walked to find where a value that does not parse closes:
a call's arguments hold far fewer, and a hostile endpoint's 600,000 brackets cost the worker's
event loop 0.2 s a walk. Past it, the value is taken to run to the reply's end."""
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

_Read = tuple[str, Any]
"""A call as a block writes it: the tool's name, its arguments (an object, or text as written)."""


@dataclass(frozen=True)
class WrittenCalls:
    """Tool calls a reply wrote at its end, in a format an open model writes."""

    before: str | None
    """The reply's words before them: its text once they are made, or left unmade."""
    written: str
    """The calls as written, from the first on."""
    calls: list[ToolCall] = field(default_factory=list)
    """The calls to make: none when a block names no tool, or the calls copy a tool's result."""
    copied: bool = False
    """They copy what a tool returned: the page's words, never made."""

    @property
    def unread(self) -> bool:
        """The model's own calls, that could not be read: a block that names no tool (no
        name, cut off before it, not an object). The run tells the model so."""
        return not self.calls and not self.copied


def read_calls(
    text: str | None,
    real_names: Mapping[str, str],
    *,
    id_prefix: str,
    read: Callable[[], Iterable[str]] = tuple,
) -> WrittenCalls | None:
    """The calls `text` ends with, in a format an open model writes, each naming a tool
    (a wire name of `real_names`, wire name → the tool's name, or any other, to be refused as
    unknown), with its arguments as JSON text (or as written, for the tool to refuse), ids
    `<id_prefix>_<n>`; none to make when they copy what a tool returned (`read`, asked only
    when there are calls) or one of them names no tool. None when `text` ends with none."""
    if not text or len(text) > TEXT_CALLS_MAX_CHARS:
        return None
    found = _found(text, real_names)
    if found is None:
        return None
    before, calls = found
    written, words = text[len(before) :], before.strip() or None
    if copied(written, read()):
        return WrittenCalls(words, written, copied=True)
    if calls is None:
        return WrittenCalls(words, written)
    ids = [f"{id_prefix}_{n}" for n in range(len(calls))]
    tool_calls = [
        ToolCall(id=i, name=name, arguments=_as_text(arguments))
        for i, (name, arguments) in zip(ids, calls, strict=True)
    ]
    return WrittenCalls(words, written, tool_calls)


def calls_in_text(
    text: str | None,
    real_names: Mapping[str, str],
    *,
    id_prefix: str,
    read: Callable[[], Iterable[str]] = tuple,
    copies: list[str] | None = None,
) -> tuple[str | None, list[ToolCall]] | None:
    """`(text before the calls, the calls)` when `text` ends with calls to make
    (`read_calls`); None otherwise. Calls not made for being copies are added to `copies`,
    for the worker to say."""
    found = read_calls(text, real_names, id_prefix=id_prefix, read=read)
    if found is not None and found.copied and copies is not None:
        copies.append(found.written)
    if found is None or not found.calls:
        return None
    return found.before, found.calls


def without_text_calls(text: str | None) -> str | None:
    """`text` without the calls that end it, in any format read here (made, unread or
    copied), None when nothing else is left: a reply's words, never the markup of its calls.
    Past TEXT_CALLS_MAX_CHARS, only harmony's are looked for (read in one linear pass)."""
    if not text:
        return text
    if len(text) > TEXT_CALLS_MAX_CHARS:
        return without_calls(text)
    found = _found(text, {})
    return text if found is None else (found[0].strip() or None)


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


def _found(text: str, names: Mapping[str, str]) -> tuple[str, list[_Read] | None] | None:
    """`(text before the calls, the calls, or None when one names no tool)` when `text` ends
    with calls in a format read here; None when it does not."""
    found = _marked(text, names) if any(m in text for m in CALL_MARKERS) else None
    if found is None and any(m in text for m in _HARMONY_MARKERS):
        found = _harmony(text, names)
    if found is None and text.lstrip().startswith("{"):
        found = _bare_object(text, names)
    return found


def _marked(text: str, names: Mapping[str, str]) -> tuple[str, list[_Read] | None] | None:
    if "<tool_call>" in text:
        blocks = list(_HERMES.finditer(text))
        if not blocks or not _the_tail(text, blocks) or _words_after_marker(blocks):
            return None
        calls = [_call(_block_call(b.group(1)), names, marked=True) for b in blocks]
        return _every(text[: blocks[0].start()], calls)
    if (match := _MISTRAL_ARGS.search(text)) is not None:
        ends, arguments = _json_at_end(match.group(2), any_value=True)
        if not ends:
            return None
        call = _call({"name": match.group(1), "arguments": arguments}, names, marked=True)
        return _every(text[: match.start()], [call])
    match = _MISTRAL.search(text) or _PYTHON_TAG.search(text)
    if match is None:
        return None
    ends, parsed = _json_at_end(match.group(1))
    if not ends:
        return None
    if parsed is _UNDECODED:  # one object: its name, as a Hermes block's; a list: none
        parsed = _block_call(match.group(1)) if match.group(1).startswith("{") else None
    items = parsed if isinstance(parsed, list) else [parsed]
    return _every(text[: match.start()], [_call(item, names, marked=True) for item in items])


_UNDECODED = object()
"""What `_json_at_end` gives for a value that starts as JSON and does not parse."""


def _json_at_end(text: str, *, any_value: bool = False) -> tuple[bool, Any]:
    """`(whether the JSON value that starts `text` ends it, the value)`: decoded when it
    parses, else the text as written (with `any_value`, for a name the markup gave) or
    _UNDECODED. A value that does not parse ends the text when it closes at its end or never
    does (the reply cut off); one that closes before words is quoted, as one that parses is.
    Without `any_value`, only an object or a list is a value here: `[TOOL_CALLS] comes first`
    is words."""
    try:
        value, end = _DECODER.raw_decode(text)
    except (ValueError, RecursionError):
        pass
    else:
        ends = not text[end:].strip() and (any_value or isinstance(value, dict | list))
        return ends, value
    if not text.startswith(("{", "[")):
        return False, None
    return _runs_to_end(text), (text if any_value else _UNDECODED)


def _runs_to_end(text: str) -> bool:
    """Whether the brackets opened at the start of `text` close at its end, or never."""
    closed = _closed_at(text)
    return closed is None or not text[closed:].strip()


def _closed_at(text: str) -> int | None:
    """Where the brackets opened at the start of `text` close (JSON's strings skipped, whatever
    brackets they hold), or None: not within CLOSE_SCAN_PIECES brackets and strings."""
    depth = 0
    for piece in itertools.islice(_JSON_PIECE.finditer(text), CLOSE_SCAN_PIECES):
        bracket = piece.group(0)
        if bracket in ("{", "["):
            depth += 1
        elif bracket in ("}", "]"):
            depth -= 1
            if depth <= 0:
                return piece.end()
    return None


def _block_call(body: str) -> object:
    """A call object as a block writes it: its JSON, or when that does not parse and it names
    its tool first, the name and its arguments as written (from after `"arguments":` to the
    block's end, less the object's closing brace; the whole block when no arguments follow
    the name)."""
    parsed = _json(body)
    if parsed is not None:
        return parsed
    named = _NAME_FIRST.match(body)
    if named is None:
        return None
    name = _json(f'"{named.group(1)}"')
    after = _ARGUMENTS_NEXT.match(body, named.end())
    if after is None:
        return {"name": name, "arguments": body}
    written = body[after.end() :].strip()
    try:
        value, end = _DECODER.raw_decode(written)
    except (ValueError, RecursionError):
        if not written.startswith(("{", "[")):
            closed: int | None = len(written) - 1 if written.endswith("}") else None
        else:
            closed = _closed_at(written)
        if closed is not None and written[closed:].strip() == "}":
            written = written[:closed].rstrip()
        return {"name": name, "arguments": written}
    return {"name": name, "arguments": value if written[end:].strip() in ("", "}") else written}


def _harmony(text: str, names: Mapping[str, str]) -> tuple[str, list[_Read] | None] | None:
    """gpt-oss's calls, addressed `to=` a tool: each marked a call by its recipient."""
    found = harmony_calls(text)
    if found is None:
        return None
    before, calls, _ = found
    items = [{"name": _recipient(to, names), "arguments": args} for to, args in calls]
    return _every(before, [_call(item, names, marked=True) for item in items])


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


def _words_after_marker(blocks: list[re.Match[str]]) -> bool:
    """A lone `<tool_call>` with words, not JSON, after it and no closing tag names the marker
    in prose (`Wrap each call in <tool_call> tags.`), as `[TOOL_CALLS] comes first` does."""
    body, closed = blocks[0].group(1), blocks[0].group(0).endswith("</tool_call>")
    return len(blocks) == 1 and not closed and bool(body) and body[0] not in "{["


def _bare_object(text: str, names: Mapping[str, str]) -> tuple[str, list[_Read] | None] | None:
    """Llama's JSON tool format: the object alone is the whole reply (`parameters`, not
    `arguments`, is how it writes them; either is taken)."""
    parsed = _json(text)
    if not isinstance(parsed, dict) or set(parsed) - {"name", "parameters", "arguments"}:
        return None
    call = _call(parsed, names, marked=False)
    return ("", [call]) if call is not None else None


def _call(item: object, names: Mapping[str, str], *, marked: bool) -> _Read | None:
    """(the tool's name, its arguments) when `item` names a tool: of any when a marker said it
    is a call (`marked`), its arguments as written when they are no object, for the tool to
    refuse; else of an offered tool, with an object for arguments."""
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        return None
    if not item["name"].strip():
        return None
    arguments = _arguments(item.get("arguments", item.get("parameters")))
    name = tool_name_of(item["name"], names)
    if marked:
        return name, arguments
    return (name, arguments) if name in names.values() and isinstance(arguments, dict) else None


def _arguments(value: object) -> dict[str, Any] | str:
    """A call's arguments: an object (none written: none), or the text as written (JSON text
    of any other value) for the tool to refuse."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    if isinstance(value, str):  # some write the arguments as JSON text, as the API does
        parsed = _json(value)
        return parsed if isinstance(parsed, dict) else value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return str(value)


def _as_text(arguments: Any) -> str:
    """A call's arguments as its `ToolCall` carries them: JSON text, or the text as written
    (none written: none, `{}`)."""
    if isinstance(arguments, str):
        return arguments if arguments.strip() else "{}"
    return json.dumps(arguments)


def _every(before: str, calls: list[_Read | None]) -> tuple[str, list[_Read] | None]:
    """Every call read, or none (a block that names no tool, or no block at all): made
    together or not at all."""
    if not calls or any(c is None for c in calls):
        return before, None
    return before, [c for c in calls if c is not None]


def _json(text: str) -> Any:
    try:
        return json.loads(text.strip())
    except (ValueError, RecursionError):
        return None
