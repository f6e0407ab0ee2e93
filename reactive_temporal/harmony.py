"""gpt-oss's harmony format, read where a server left it in a reply's text.

gpt-oss writes its reply as messages on channels: its chain of thought on `analysis`, the
answer on `final`, tool calls (and preambles to them) on `commentary`, a call addressed
`to=functions.NAME`. A server with a harmony parser (vLLM with it, Ollama) sends these apart;
many do not, or only partly (llama.cpp's server without `--jinja` or with an older template,
LM Studio, MLX servers, TensorRT-LLM, text-generation-webui, gateways), and the markup came in
the reply's text. Taken as the answer, the model's thoughts were the run's output and the
chat's reply, a `FINAL ANSWER:` it only considered there ended the run, every later request
sent them back, and `watch` showed them as the answer; a call it wrote there was the run's
output and never ran. The shapes read here:

- the special tokens kept: `<|channel|>analysis<|message|>…<|end|><|start|>assistant
  <|channel|>final<|message|>…<|return|>`, a call as `<|channel|>commentary
  to=functions.NAME <|constrain|>json<|message|>{…}<|call|>` (the recipient may come before
  `<|channel|>`), read when the text starts with the markup;
- the special tokens stripped by the detokenizer: `analysisWe need…assistantfinalfour`, read
  only when that is unmistakable: the text starts with `analysis` and holds the next turn
  glued to `assistant` (`assistantfinal`, `assistantcommentary`, `assistantanalysis`); a
  reply that merely begins with the word is its own; a call as `commentary
  to=functions.NAME json{…}`.

Analysis is thinking, and so is commentary that is no call (a preamble), but for the last
message of a reply with no final one (its answer, written on the wrong channel); final is the
answer; calls at the end of the reply are left to `text_calls`, as written, and taken out of
the answer when they are not made (`without_calls`): a copy of a tool's result that
`text_calls` refuses, a call of a model whose calls are not read from its text. A call with
messages after it is thinking: a real gpt-oss stops at `<|call|>` (its server's stop token)
to wait for the tool's answer, so what follows one is a server that did not stop there (the
model goes on to imagine the tool's reply), or a quote, and calls count only where they end a
reply (`text_calls`: a page's planted call, quoted mid-reply, must not run). A reply cut off
in its analysis is all thinking, and has no answer.

Pure: no I/O. Linear in the text: one pass of regexes with nothing nested that repeats, on
whatever a hostile endpoint sends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

_TOKEN = re.compile(r"<\|(start|end|message|channel|constrain|return|call)\|>")
_ENDS = frozenset({"end", "return", "call"})
_TOKENS = ("<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>",
           "<|call|>")  # fmt: skip
_OPENERS = ("<|start|>", "<|channel|>")
_ROLE_CHARS = 256
"""How far before a `<|channel|>` a recipient written first (`assistant to=functions.x`) is
looked for: a name is 128 characters at most."""
_ROLE = re.compile(r"(?:assistant)?[ \t]*(?:to=[^\s<]{1,128})?[ \t]*\Z")
_ROLE_SO_FAR = re.compile(r"(?:assistant)?[ \t]*to=[^\s<]{0,128}[ \t]*")
_HEADER_START = re.compile(r"(?:<\|start\|>)?[ \t]*(?:assistant)?[ \t]*")
_RECIPIENT = re.compile(r"(?<![\w.])to=([^\s<]{1,128})")
_CHANNEL = re.compile(r"\s*([A-Za-z]+)")
NOT_CALLS = frozenset({"assistant", "user", "all"})
"""Recipients that make no call: gpt-oss-20b addresses some of its messages `to=assistant`."""

_STRIPPED = "analysis"
_TURN = re.compile(r"assistant(analysis|commentary|final)")
_TURNS = ("assistantanalysis", "assistantcommentary", "assistantfinal")
_STRIPPED_CALL = re.compile(r"[ \t]*to=([^\s{\[<]{1,128})[ \t]*(?:json)?[ \t]*")
_STRIPPED_CALL_AT = re.compile(r"(?:^|(?<=assistant))[ \t]*(commentary)[ \t]+to=", re.MULTILINE)
_LEADING_SPACE = re.compile(r"\s*")


@dataclass
class _Message:
    """One message of a reply in harmony markup, where it is in the text."""

    start: int
    """Where it starts: its `<|start|>`, or its header when that was left out."""
    role: list[str] = field(default_factory=list)
    header: list[str] = field(default_factory=list)
    """What came after `<|channel|>`: the channel's name, a recipient, a content type."""
    in_channel: bool = False
    body: bool = False
    parts: list[str] = field(default_factory=list)
    end: int = 0
    """Where its content ends (its `<|end|>`, `<|call|>` or `<|return|>`, or the text's end)."""
    channel: str = ""
    recipient: str | None = None

    @property
    def content(self) -> str:
        return "".join(self.parts).strip()

    @property
    def is_call(self) -> bool:
        return self.recipient is not None and self.recipient.lower() not in NOT_CALLS

    def take(self, piece: str) -> None:
        """Header text, of the role's part or the channel's."""
        (self.header if self.in_channel else self.role).append(piece)

    def read_header(self) -> None:
        header = " ".join(self.header)
        named = _CHANNEL.match(header)
        self.channel = named.group(1).lower() if named else ""
        to = _RECIPIENT.search(header) or _RECIPIENT.search(" ".join(self.role))
        self.recipient = to.group(1) if to else None


@dataclass
class _Walk:
    lead: str = ""
    """The text before the first message."""
    messages: list[_Message] = field(default_factory=list)
    left: str = ""
    """A header after the last message, with no content yet (cut there, or still coming)."""


def _walk(text: str) -> _Walk:
    """The messages of raw harmony markup in `text`, token by token."""
    walk, message, pos = _Walk(lead=text), None, 0
    for token in _TOKEN.finditer(text):
        piece, kind, at = text[pos : token.start()], token.group(1), token.start()
        pos = token.end()
        if message is None:  # the lead: only a message's start ends it
            if kind == "start":
                walk.lead, message = text[:at], _Message(at)
            elif kind == "channel":
                tail = piece[-_ROLE_CHARS:]
                role = _ROLE.search(tail)
                begins = at - len(tail) + (role.start() if role else len(tail))
                walk.lead, message = text[:begins], _Message(begins, in_channel=True)
                message.role.append(text[begins:at])
            continue
        if message.body:
            if kind in ("message", "constrain"):  # the content's own words
                message.parts += (piece, token.group(0))
                continue
            message.parts.append(piece)
            message.end = at
            message.read_header()
            walk.messages.append(message)
            begins = pos if kind in _ENDS else at
            message = _Message(begins, in_channel=kind == "channel")
            continue
        message.take(piece)
        if kind == "channel":
            message.in_channel = True
        elif kind == "constrain":
            message.header.append(" ")
        elif kind == "message":
            message.body = True
        else:  # a header with no content: nothing said
            message = _Message(at if kind == "start" else pos)
    rest = text[pos:]
    if message is not None and message.body:
        message.parts.append(rest)
        message.end = len(text)
        message.read_header()
        walk.messages.append(message)
    elif message is not None:
        walk.left = "".join((*message.role, *message.header, rest))
    return walk


def _stripped(text: str, start: int, channel: str = _STRIPPED) -> list[_Message]:
    """The messages of markup whose special tokens the detokenizer left out, the first on
    `channel` (its name at `start`), each next one glued to `assistant`."""
    messages, body_at = list[_Message](), start + len(channel)
    turns = _TURN.finditer(text, body_at)
    while True:
        message = _Message(start, channel=channel)
        if channel == "commentary" and (call := _STRIPPED_CALL.match(text, body_at)):
            message.recipient, body_at = call.group(1), call.end()
        turn = next(turns, None)
        message.end = turn.start() if turn else len(text)
        message.parts.append(text[body_at : message.end])
        messages.append(message)
        if turn is None:
            return messages
        start, channel, body_at = turn.start(1), turn.group(1), turn.end()


class HarmonyText(NamedTuple):
    """A reply's text in harmony markup, read."""

    thinking: str | None
    answer: str | None
    calls: str | None
    """The calls that end the reply, as written (for `text_calls` to read, or to stay text)."""


def read_harmony(text: str) -> HarmonyText | None:
    """The thinking, answer and closing calls of a reply written in harmony markup; None when
    the text is not (it does not start with the markup, or the stripped shape is not
    unmistakable)."""
    messages = _messages(text)
    if messages is None:
        return None
    thinking, answer, calls_at = _split(messages, ended=True)
    return HarmonyText(
        _joined(thinking) or None,
        _joined(answer) or None,
        (text[calls_at:].strip() or None) if calls_at is not None else None,
    )


def in_harmony(text: str | None) -> bool:
    """Whether a reply's text is in harmony markup, as `read_harmony` reads it: its server
    left gpt-oss's channels in the text (`activities.reply_notes` says so, once a model)."""
    return bool(text) and _messages(text) is not None  # type: ignore[arg-type]


def _messages(text: str) -> list[_Message] | None:
    start = _LEADING_SPACE.match(text).end()  # type: ignore[union-attr]
    if text.startswith(_OPENERS, start) or "<|channel|>" in text[start : start + _ROLE_CHARS]:
        walk = _walk(text)
        return walk.messages if not walk.lead.strip() else None
    if text.startswith(_STRIPPED, start) and _TURN.search(text, start + len(_STRIPPED)):
        return _stripped(text, start)
    return None


def _split(messages: list[_Message], *, ended: bool) -> tuple[list[str], list[str], int | None]:
    """(thinking, answer, where the calls that end the reply start). A reply not `ended` yet
    is read as far as it came: its last message on `commentary` is thinking until it ends."""
    tail = len(messages)
    while tail and messages[tail - 1].is_call:
        tail -= 1
    has_final = any(m.channel == "final" for m in messages[:tail])
    thinking, answer = list[str](), list[str]()
    for i, message in enumerate(messages[:tail]):
        if message.channel == "analysis" or message.is_call:
            thinking.append(message.content)
        elif message.channel == "commentary":
            last_words = ended and not has_final and i == len(messages) - 1
            (answer if last_words else thinking).append(message.content)
        else:  # final, or no channel named
            answer.append(message.content)
    return thinking, answer, messages[tail].start if tail < len(messages) else None


def _joined(parts: list[str]) -> str:
    return "\n\n".join(p for p in parts if p)


def harmony_so_far(text: str) -> tuple[str, str] | None:
    """`(thinking, answer)` to show of a reply streaming in harmony markup ('' for none), or
    None when it is not harmony (as far as it came). A token, or a stripped turn glued to
    `assistant`, that may be coming is held back until the next delta tells, and so are a
    header (the channel, the recipient) and calls; a reply that starts `analysis` glued to a
    capital (`analysisWe`) is shown as thinking while it streams: if no next turn comes, it
    turns out to be the answer when it ends."""
    start = _LEADING_SPACE.match(text).end()  # type: ignore[union-attr]
    lead = text[start : start + _ROLE_CHARS]
    if any(o.startswith(lead) for o in (*_OPENERS, _STRIPPED)) or _role_coming(lead):
        return "", ""  # nothing yet, or an opening part-way (`analysis`: what comes next tells)
    if text.startswith(_OPENERS, start) or "<|channel|>" in lead:
        walk = _walk(text[: len(text) - _held(text, _TOKENS)])
        if walk.lead.strip():
            return None
        thinking, answer, _ = _split(walk.messages, ended=False)
        return _joined(thinking), _joined(answer)
    if not text.startswith(_STRIPPED, start):
        return None
    messages = _stripped(text[: len(text) - _held(text, _TURNS)], start)
    glued = text[start + len(_STRIPPED) : start + len(_STRIPPED) + 1]
    if len(messages) == 1 and not glued.isupper():
        return None  # no turn yet, and not glued to the thinking: the answer's own word
    last = messages[-1]
    if (
        last.channel == "commentary"
        and last.recipient is None
        and "to=".startswith(last.content[:3])
    ):
        last.parts.clear()  # a recipient may be coming: nothing to show yet
    thinking, answer, _ = _split(messages, ended=False)
    return _joined(thinking), _joined(answer)


def never_harmony(text: str) -> bool:
    """Whether `harmony_so_far` reads no text that begins with `text` as harmony: the lead it
    reads is whole (past `_ROLE_CHARS`), and neither opens harmony nor may begin to."""
    start = _LEADING_SPACE.match(text).end()  # type: ignore[union-attr]
    if len(text) <= start + _ROLE_CHARS or text.startswith((*_OPENERS, _STRIPPED), start):
        return False
    return "<|channel|>" not in text[start : start + _ROLE_CHARS] and harmony_so_far(text) is None


def _role_coming(lead: str) -> bool:
    """A recipient written before `<|channel|>`, so far with nothing after it."""
    role = _ROLE_SO_FAR.match(lead)
    return role is not None and "<|channel|>".startswith(lead[role.end() :])


def _held(text: str, markers: tuple[str, ...]) -> int:
    """How many characters at the end of `text` may begin one of `markers` (and are not
    one whole)."""
    end = text[-max(len(m) for m in markers) + 1 :]
    for size in range(len(end), 0, -1):
        if any(m != end[-size:] and m.startswith(end[-size:]) for m in markers):
            return size
    return 0


def harmony_calls(text: str) -> tuple[str, list[tuple[str, str]], list[str]] | None:
    """`(text before the calls, [(recipient, arguments as written)], each call as written)`
    when `text` ends with calls in harmony markup (raw or stripped) and has nothing after
    them; None otherwise. What each call says is for `text_calls` to judge."""
    if "<|channel|>" in text:
        walk = _walk(text)
        messages = walk.messages
        if not messages or walk.left.strip() or not all(m.is_call for m in messages):
            return None
        return (
            walk.lead,
            [(m.recipient or "", m.content) for m in messages],
            [_block(text, m) for m in messages],
        )
    at = _STRIPPED_CALL_AT.search(text)
    if at is None:
        return None
    messages = _stripped(text, at.start(1), "commentary")
    if not all(m.is_call for m in messages):
        return None
    before = text[: at.start(1)]
    before = before[: -len("assistant")] if before.endswith("assistant") else before
    return (
        before,
        [(m.recipient or "", m.content) for m in messages],
        [text[m.start : m.end].strip() for m in messages],
    )


def without_calls(text: str | None) -> str | None:
    """`text` without the harmony calls that end it (as `harmony_calls` finds them), None when
    nothing else is left: a reply's words once its calls are made, or left unmade."""
    found = harmony_calls(text) if text else None
    if found is None:
        return text
    return found[0].strip() or None


def _block(text: str, message: _Message) -> str:
    """A call as written, from its header to its content's end (without `<|start|>assistant`
    or `<|call|>`, which a server may add or leave out around the same words)."""
    header = _HEADER_START.match(text, message.start)
    return text[header.end() if header else message.start : message.end]
