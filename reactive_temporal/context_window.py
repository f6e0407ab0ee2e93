"""Keeping a run's request inside the model's context window.

The transcript in Postgres is the whole truth and is never shortened. What the model is sent
is a *view* of it: a `ContextPlan` says which older messages it sees shortened, as a stub, or
not at all. The system prompt, the task and the latest turns always go verbatim; older tool
results are the first to give way, oldest first. Plans only ever grow more compact, and each
step records the plan it used, so a retried or rerun step sends exactly what was sent before.

How full a request is comes from the provider's own count when there is one: the prompt
tokens it reported for the previous call, plus an estimate of the messages added since.
Estimates are deliberately pessimistic (3 characters a token; English averages about 4, code
and non-Latin scripts fewer), and no tokenizer is downloaded. A count far below the estimate
of the request it answered is not taken (`count_implausibly_low`): the endpoint cut the
prompt, or left its cached part out of the count.

Pure functions and data; the LLM helper does the I/O.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from reactive_temporal.contracts.run import Message, SeqMessage

CHARS_PER_TOKEN = 3.0
MESSAGE_OVERHEAD_TOKENS = 4
"""Role, separators and name of a chat message, as providers count them (3–4 tokens)."""
HEADROOM = 0.75
"""Compaction aims below this share of the prompt budget, so it is rare and in bulk (and a
provider's prompt cache stays warm between compactions)."""
OUTPUT_SHARE = 4
"""A call reserves at most a quarter of the window for its output."""
KEEP_TURNS = 2
"""The latest turns (a model reply and the observations that answer it) always go verbatim."""

SHORTENED, STUB, LEFT_OUT = 1, 2, 3
"""Compaction levels: head and tail kept; a short opening kept; the whole turn left out."""
_KEEP = {SHORTENED: (900, 300), STUB: (200, 0)}
"""Characters kept (head, tail) of a tool result at each level; replies keep the head only."""
_ARGUMENTS_KEEP = {SHORTENED: 1_000, STUB: 200}


def estimate_tokens(text: str | None) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN) if text else 0


def message_tokens(message: Message) -> int:
    tokens = MESSAGE_OVERHEAD_TOKENS + estimate_tokens(message.content)
    for call in message.tool_calls:
        tokens += MESSAGE_OVERHEAD_TOKENS + estimate_tokens(call.name + call.arguments + call.id)
    return tokens


def tools_tokens(schemas: Sequence[dict[str, Any]]) -> int:
    """What the tool schemas of a request weigh."""
    return estimate_tokens(json.dumps(schemas)) if schemas else 0


def wire_prompt_tokens(request: Mapping[str, Any]) -> int:
    """An estimate of a chat-completions request's prompt tokens, from the request as sent
    (its messages and tools), for a call whose endpoint never said."""
    messages = request.get("messages")
    tokens = tools_tokens(request.get("tools") or [])
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        text = content if isinstance(content, str) or content is None else json.dumps(content)
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        tokens += MESSAGE_OVERHEAD_TOKENS + estimate_tokens(text)
        tokens += estimate_tokens(json.dumps(calls)) if calls else 0
    return tokens


LOW_COUNT_SHARE = 0.4
"""A reported prompt count under this share of the estimate is no count of the whole request."""
LOW_COUNT_FROM = 2_048
"""Requests estimated at no more than this are never judged by their count."""


def count_implausibly_low(reported: int, estimate: int) -> bool:
    """Whether an endpoint's `prompt_tokens` for a request is too far below this worker's
    (pessimistic) estimate of the same request as sent to have counted all of it.

    Two field problems report such counts and nothing else shows them: Ollama (at its context
    length: 4,096 by default, which its OpenAI-compatible endpoint cannot raise per request)
    and LM Studio (its context overflow policy) cut an over-long prompt silently instead of
    refusing it, dropping the oldest messages, often the task; and several Ollama versions
    count only the prompt tokens they did not find cached (ollama/ollama#2068, #5370,
    #16414). Trusted, such a count keeps the next requests' estimates low, so the run never
    compacts and the endpoint goes on cutting.

    `LOW_COUNT_SHARE` (0.4): the estimate takes 3 characters a token, so honest counts sit
    near 75% of it for English (about 4 characters a token), nearer 100% for code, JSON and
    non-Latin scripts, and lower only where long runs of whitespace or repeated punctuation
    are single tokens (indented code, padded tables), which a whole request, with its
    system prompt and tool schemas, rarely has enough of to come near half. A cut prompt or
    a cached-only count is far below: a request estimated at 12k cut to Ollama's 4,096 is
    at a third, and a cached-only count at a few percent. A request barely over the window is not
    caught; what its cut loses is small, and the run's next, longer request is. The two
    mistakes are not equal: a false alarm costs an earlier compaction and a log line, a miss
    costs the run its task.

    `LOW_COUNT_FROM` (2,048 estimated, about 1,500 real tokens): no local server's default
    context length (Ollama's 2,048 in older versions, 4,096 since; LM Studio's are of that
    order) cuts a request that small, and there a few hundred tokens of framing that chat
    templates count their own way (tool schemas, message separators) move the share a lot.

    Only the estimate of how full the next request is distrusts the count: what is billed,
    budgeted and reported as the call's usage stays what the endpoint said.
    """
    return estimate > LOW_COUNT_FROM and reported < estimate * LOW_COUNT_SHARE


def reserved_output(context_tokens: int, max_output_tokens: int | None) -> int:
    """The output a call asks for (`max_tokens`): its wish, at most a quarter of the window."""
    share = context_tokens // OUTPUT_SHARE
    return share if max_output_tokens is None else min(max_output_tokens, share)


def prompt_budget(context_tokens: int, reserved: int) -> int:
    """How many tokens the messages and tools of a request may take."""
    return context_tokens - reserved


@dataclass(frozen=True)
class PreviousCall:
    """The provider's count for the run's previous LLM call."""

    seq: int
    """The transcript position that call's reply went to: it saw every message before it."""
    prompt_tokens: int
    plan: ContextPlan
    tools_tokens: int = 0


ThinkingTokens = Mapping[int, int]
"""Transcript position of a model's turn → the tokens of the thinking a request sends back
with it, for an endpoint that wants it (`ModelCapabilities.thinking_sent_back`); a turn a
plan compacts goes without."""


def sent_thinking(thinking: ThinkingTokens | None, plan: ContextPlan) -> ThinkingTokens:
    """`thinking` of the turns `plan` leaves verbatim: what a request in that plan sends."""
    return {seq: n for seq, n in (thinking or {}).items() if not plan.levels.get(seq)}


def _entry_tokens(entry: SeqMessage, thinking: ThinkingTokens) -> int:
    tokens = message_tokens(entry.message)
    return tokens + thinking.get(entry.seq, 0) if entry.message.role == "assistant" else tokens


def estimate_prompt(
    view: Sequence[SeqMessage],
    tools: int,
    plan: ContextPlan,
    previous: PreviousCall | None,
    thinking: ThinkingTokens | None = None,
) -> int:
    """The request's prompt tokens: the provider's count for the previous call plus an
    estimate of what was added since; a whole estimate when there is no comparable count
    (the first call, or the view was compacted since), or when the count is implausibly low
    for the previous request (`count_implausibly_low`: the view before `previous.seq` is
    that request's, with the same plan). `thinking`: what goes back with the model's turns."""
    sent = sent_thinking(thinking, plan) if thinking else None
    if previous is None or previous.prompt_tokens <= 0 or previous.plan != plan:
        return view_tokens(view, tools, sent)
    if sent:
        earlier = sum(_entry_tokens(m, sent) for m in view if m.seq < previous.seq)
        added = sum(_entry_tokens(m, sent) for m in view if m.seq >= previous.seq)
    else:  # every step's path: kept as lean as it was
        earlier = sum(message_tokens(m.message) for m in view if m.seq < previous.seq)
        added = sum(message_tokens(m.message) for m in view if m.seq >= previous.seq)
    if count_implausibly_low(previous.prompt_tokens, previous.tools_tokens + earlier):
        return tools + earlier + added  # the endpoint cut it, or left its cache out
    return previous.prompt_tokens + added + max(0, tools - previous.tools_tokens)


# -- the plan ------------------------------------------------------------------------------


class ContextPlan(BaseModel):
    """Which transcript messages a request shows compacted; everything else goes verbatim."""

    levels: dict[int, int] = Field(default_factory=dict)
    """Transcript position → SHORTENED, STUB or LEFT_OUT."""

    @property
    def compacted(self) -> int:
        return len(self.levels)


Turn = list[SeqMessage]


def split_turns(transcript: Sequence[SeqMessage]) -> tuple[list[SeqMessage], list[Turn]]:
    """The head (system prompt, task, notes: everything before the model's first reply) and
    the turns: each model reply with the tool results and notes that follow it."""
    head: list[SeqMessage] = []
    turns: list[Turn] = []
    for entry in transcript:
        if entry.message.role == "assistant":
            turns.append([entry])
        elif turns:
            turns[-1].append(entry)
        else:
            head.append(entry)
    return head, turns


def _marker(left_out: int) -> str:
    return (
        f"\n[… {left_out:,} characters left out here to fit the context window; "
        "the run's transcript keeps them whole …]\n"
    )


def fit_text(text: str, max_chars: int) -> str:
    """`text` within `max_chars`: its beginning and end kept, the middle marked as left out."""
    if len(text) <= max_chars:
        return text
    keep = max(0, max_chars - 200)
    head = keep * 2 // 3
    return _shorten_text(text, head, keep - head)


def _shorten_text(text: str, head: int, tail: int) -> str:
    if len(text) <= head + tail + 120:  # not worth a marker
        return text
    left_out = len(text) - head - tail
    return text[:head] + _marker(left_out) + (text[len(text) - tail :] if tail else "")


def compact_message(message: Message, level: int) -> Message:
    """The message as a request at this level shows it (LEFT_OUT is handled by the view)."""
    if level not in _KEEP:
        return message
    head, tail = _KEEP[level]
    if message.role != "tool":
        head, tail = head // 2 + 100, 0
    content = _shorten_text(message.content, head, tail) if message.content else message.content
    calls = [
        c
        if len(c.arguments) <= _ARGUMENTS_KEEP[level]
        else c.model_copy(
            update={
                "arguments": json.dumps(
                    {"compacted": f"{len(c.arguments):,} characters of arguments left out"}
                )
            }
        )
        for c in message.tool_calls
    ]
    if content == message.content and calls == message.tool_calls:
        return message
    return message.model_copy(update={"content": content, "tool_calls": calls})


def left_out_note(entries: Iterable[SeqMessage]) -> Message:
    """What stands in for the turns a request leaves out."""
    entries = list(entries)
    replies = [e for e in entries if e.message.role == "assistant"]
    calls = Counter(c.name for e in replies for c in e.message.tool_calls)
    used = ", ".join(f"{name} ×{n}" for name, n in calls.most_common()) or "none"
    return Message(
        role="user",
        content=(
            f"[context] {len(replies)} earlier turn(s) are left out here to fit the model's "
            f"context window (tool calls in them: {used}). The run's transcript keeps them "
            "whole; later observations and your latest turns follow in full or shortened."
        ),
    )


def build_view(transcript: Sequence[SeqMessage], plan: ContextPlan) -> list[SeqMessage]:
    """The messages a request sends: compacted by the plan, left-out runs of turns replaced
    by one note each (keeping the position of the first message it stands for).

    The head always goes verbatim, and a turn is left out whole or not at all (by its model
    reply's level), so a plan recorded for another transcript (a rerun that went another
    way) still gives a well-formed request."""
    head, turns = split_turns(transcript)
    view = list(head)
    left_out: list[SeqMessage] = []
    for turn in turns:
        if plan.levels.get(turn[0].seq, 0) == LEFT_OUT:
            left_out += turn
            continue
        if left_out:
            view.append(SeqMessage(seq=left_out[0].seq, message=left_out_note(left_out)))
            left_out = []
        for entry in turn:
            level = min(plan.levels.get(entry.seq, 0), STUB)
            view.append(SeqMessage(seq=entry.seq, message=compact_message(entry.message, level)))
    if left_out:  # cannot happen for a plan from plan_compaction (the latest turns stay)
        view.append(SeqMessage(seq=left_out[0].seq, message=left_out_note(left_out)))
    return view


NOTE_TOKENS = 80
"""What one left-out note costs, at most."""


def plan_compaction(
    transcript: Sequence[SeqMessage],
    *,
    budget: int,
    tools: int = 0,
    previous: ContextPlan | None = None,
    keep_turns: int = KEEP_TURNS,
    harder: bool = False,
    thinking: ThinkingTokens | None = None,
) -> ContextPlan:
    """A plan whose view fits well inside `budget` tokens, compacting only what it must.

    Older turns give way oldest first: first their long tool results and replies are
    shortened, then cut to stubs, then whole turns are left out. The head and the latest
    `keep_turns` turns stay verbatim; `harder` (the endpoint said the request was too long
    after all) keeps only the latest turn, and shortens even its tool results if that is
    still too long. It never undoes the `previous` plan's compaction. A turn sent back with
    its `thinking` weighs that too while it goes verbatim.
    """
    levels = dict(previous.levels) if previous else {}
    _, turns = split_turns(transcript)
    keep = 1 if harder else max(1, keep_turns)
    old, recent = turns[: max(0, len(turns) - keep)], turns[max(0, len(turns) - keep) :]
    target = int(budget * HEADROOM)

    thought = (
        {e.seq: thinking.get(e.seq, 0) for e in transcript if e.message.role == "assistant"}
        if thinking
        else {}
    )

    def _cost(entry: SeqMessage, level: int) -> int:
        if level == LEFT_OUT:
            return 0
        cost = message_tokens(compact_message(entry.message, level))
        return cost + thought.get(entry.seq, 0) if thought and not level else cost

    cost = {e.seq: _cost(e, levels.get(e.seq, 0)) for e in transcript}
    total = tools + sum(cost.values()) + (NOTE_TOKENS if LEFT_OUT in levels.values() else 0)

    def raise_to(entry: SeqMessage, level: int) -> None:
        nonlocal total
        if levels.get(entry.seq, 0) >= level:
            return
        if level == LEFT_OUT and LEFT_OUT not in levels.values():
            total += NOTE_TOKENS
        new = _cost(entry, level)
        if level != LEFT_OUT and new >= cost[entry.seq]:
            return  # nothing to gain: leave it verbatim
        levels[entry.seq] = level
        total += new - cost[entry.seq]
        cost[entry.seq] = new

    for level in (SHORTENED, STUB, LEFT_OUT):
        for turn in old:
            if total <= target:
                return ContextPlan(levels=levels)
            for entry in turn:
                raise_to(entry, level)
    if harder and total > target and recent:
        for entry in recent[-1]:
            if entry.message.role == "tool":
                raise_to(entry, SHORTENED)
    return ContextPlan(levels=levels)


def view_tokens(
    view: Sequence[SeqMessage], tools: int = 0, thinking: ThinkingTokens | None = None
) -> int:
    """A request's estimated prompt: its view, its tools, and the `thinking` it sends back
    (`sent_thinking`: of the turns the view has verbatim)."""
    if not thinking:
        return tools + sum(message_tokens(e.message) for e in view)
    return tools + sum(_entry_tokens(e, thinking) for e in view)
