"""State an endpoint attaches to a model's turn for itself, kept with the turn and sent back
on it, as it came (pure, but for the warning about one too big to keep).

Some endpoints put opaque state on the assistant message that they want back, unchanged, on
that message in every later request; without it they refuse the request (HTTP 400) or the
model loses its reasoning:

- OpenRouter: `reasoning_details`, an array of `reasoning.text` (text, signature, format,
  index), `reasoning.summary` and `reasoning.encrypted` (data) entries. Its docs ("Preserving
  reasoning blocks") say to pass the array back with the assistant message, as received:
  Anthropic's models with thinking and tools refuse a request without it, and Gemini 3's
  thought signatures ride in it (`reasoning.encrypted`, with the call's id).
- A LiteLLM proxy in front of Anthropic with thinking: `thinking_blocks`, `thinking` blocks
  (thinking, signature) and `redacted_thinking` ones (data), which it makes Anthropic's
  blocks of again; Anthropic refuses a turn that called tools without them ("Expected
  `thinking` or `redacted_thinking`, but found `tool_use`").

(Gemini's own OpenAI-compatible endpoint puts its signature on each call instead:
`ToolCall.extra_content`.) The state is the endpoint's own: it goes back whenever the
endpoint sent it, whatever the model. It is kept with the step's record (`ThoughtStep`), as
JSON text (`state_text`), never in the workflow's history.

It goes back on every turn a request sends, compacted or not (`request_messages.
view_messages`), and is not counted in the context estimate: a step's estimate starts from
the prompt tokens the endpoint counted for the previous request, which hold whatever of it
the endpoint counts; the turn just added and a whole estimate after a compaction go without.
How much of it is context is the endpoint's: Anthropic's models before Opus 4.5 leave earlier
turns' thinking out of the window, and signatures and encrypted blobs are no text the model
reads, so counted as text they would compact runs for nothing. Where an endpoint counts it
and refuses a request as too long, the step compacts harder and goes again
(`llm_step.MAX_OVERFLOW_RETRIES`).

Streamed, an array comes in fragments (`StateFragments`): OpenRouter's under each entry's
`type` and `index` (a `reasoning.text` entry opens with empty text and signature, its text
follows piece by piece, its signature alone at the end; a `reasoning.encrypted` entry may
share the text's index), LiteLLM's without an index (a block's thinking piece by piece with
`signature: null`, then its signature with empty thinking).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)

STATE_FIELDS = ("reasoning_details", "thinking_blocks")
"""The assistant message's fields an endpoint wants back on it (OpenRouter's, LiteLLM's)."""

TURN_STATE_MAX_CHARS = 512_000
"""A turn's state is kept up to this much JSON text. It holds the turn's thinking whole
(OpenRouter's `reasoning.text`, LiteLLM's `thinking`): a turn of Anthropic's longest output
(64k tokens, about 250 KB of text, more once escaped) fits, with its signatures; Gemini's
signatures and OpenAI's encrypted reasoning are far less. Larger is dropped whole, not cut:
an endpoint refuses a cut signature as it does a missing one, and every later request of
the run would carry it."""

TurnState = dict[str, list[Any]]
"""Field (STATE_FIELDS) → what the endpoint sent in it."""


def state_of(message: object) -> TurnState | None:
    """The state a reply's message came with: each of STATE_FIELDS that holds a non-empty
    array (the openai client keeps fields it does not know as they came)."""
    found: TurnState = {}
    for name in STATE_FIELDS:
        if isinstance(message, Mapping):
            value = message.get(name)
        else:
            value = getattr(message, name, None)
            extra = getattr(message, "model_extra", None)
            if value is None and isinstance(extra, dict):
                value = extra.get(name)
        if isinstance(value, list) and value:
            found[name] = value
    return found or None


def state_text(state: TurnState) -> str:
    """`state` as its step's record keeps it: JSON text, with every key in the order it came
    and every string as it came (JSONB would reorder keys, and refuses a NUL; escaped in the
    text, one is kept). A lone surrogate, which Postgres cannot store as a character, is
    escaped too."""
    text = json.dumps(state, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode()
    except UnicodeEncodeError:
        text = json.dumps(state, separators=(",", ":"))
    return text


def recorded_state(state: TurnState | None, run_id: str) -> str | None:
    """`state` to record with its turn (`state_text`), or None when there is none or it is
    over TURN_STATE_MAX_CHARS: then it is dropped whole, with a warning naming the run."""
    if not state:
        return None
    text = state_text(state)
    if len(text) <= TURN_STATE_MAX_CHARS:
        return text
    log.warning(
        "%s: the model's turn came with %s of %s characters, over the %s kept: dropped (a "
        "cut one is refused as a missing one is); the endpoint may refuse the run's next "
        "request, or the model lose its reasoning",
        run_id,
        " and ".join(state),
        f"{len(text):,}",
        f"{TURN_STATE_MAX_CHARS:,}",
    )
    return None


def read_state(text: str | None) -> TurnState | None:
    """A recorded state (`state_text`) as it goes back on its turn; None for none."""
    if not text:
        return None
    try:
        state = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return state if isinstance(state, dict) and state else None


_JOINED = frozenset(("text", "summary", "data", "thinking", "signature"))
"""An entry's fields that come in pieces; the others name it, and the first value stands."""


class _Entry:
    """One entry as its fragments came: its fields in the order they first came, the pieces
    of those that come in pieces kept apart and joined once (a reply's thinking comes a token
    or two a fragment: joined fragment by fragment, its cost grew with its square)."""

    def __init__(self, fragment: dict[str, Any]) -> None:
        self.fields: dict[str, Any] = {}
        self.pieces: dict[str, list[str]] = {}
        self.add(fragment)

    def add(self, fragment: dict[str, Any]) -> None:
        for key, value in fragment.items():
            if key in self.pieces:
                if isinstance(value, str):
                    self.pieces[key].append(value)
            elif self.fields.get(key) is None:
                self.fields[key] = value
                if key in _JOINED and isinstance(value, str):
                    self.pieces[key] = [value]

    def whole(self) -> bool:
        """Signed, or with its data: a block without an index ends so."""
        return any(any(self.pieces.get(k, ())) or self.fields.get(k) for k in ("signature", "data"))

    def value(self) -> dict[str, Any]:
        return {
            k: "".join(self.pieces[k]) if k in self.pieces else v for k, v in self.fields.items()
        }


class StateFragments:
    """One field's entries put together from a stream's fragments (`add` each delta's array).

    A fragment with an `index` continues the entry of its `type` and index; one without
    continues the last entry when that has its type, no index and no signature or data yet
    (a block ends with its signature, and a redacted block comes whole). Anything else starts
    an entry. A whole array (an unstreamed reply read as one delta) comes out as it went in:
    its entries are whole, each signed or apart by its index. Fragments that are not objects
    are skipped, never raised on.
    """

    def __init__(self) -> None:
        self._entries: list[_Entry] = []
        self._indexed: dict[tuple[object, int], _Entry] = {}

    def add(self, fragments: list[Any]) -> None:
        for fragment in fragments:
            if not isinstance(fragment, dict):
                continue
            entry = self._entry_for(fragment)
            if entry is not None:
                entry.add(fragment)
                continue
            entry = _Entry(fragment)
            self._entries.append(entry)
            if isinstance(index := fragment.get("index"), int):
                self._indexed[(fragment.get("type"), index)] = entry

    @property
    def entries(self) -> list[dict[str, Any]]:
        """The entries so far, whole."""
        return [e.value() for e in self._entries]

    def _entry_for(self, fragment: dict[str, Any]) -> _Entry | None:
        index = fragment.get("index")
        if isinstance(index, int):
            return self._indexed.get((fragment.get("type"), index))
        last = self._entries[-1] if self._entries else None
        if (
            last is not None
            and last.fields.get("type") == fragment.get("type")
            and not isinstance(last.fields.get("index"), int)
            and not last.whole()
        ):
            return last
        return None
