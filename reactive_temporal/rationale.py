"""Decision rationale in audit mode: `<rationale call="N">{"why": …}</rationale>` blocks.

The model writes one block per tool call in the same reply (no extra LLM call). They are
parsed leniently, matched to the calls by position, and stripped from the transcript so
they never re-enter the context or the answer (reference §6). What the model is asked to
write is `prompts.AUDIT_INSTRUCTIONS`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from reactive_temporal.contracts.llm_payloads import RationaleDetail
from reactive_temporal.limits import MAX_TOOL_CALLS_KEPT

WHY_MAX_CHARS = 280
REFS_MAX = 8
REF_MAX_CHARS = 200
"""A rationale's refs, and each ref's characters: they travel in the step's result, the run's
state and its debrief (twice), so a model's 600 KB ref made a result no workflow could return."""
BLOCKS_MAX = MAX_TOOL_CALLS_KEPT
"""Blocks read from one reply: one per call, and a reply keeps no more calls."""
_BLOCK = re.compile(
    r"<rationale(?:\s+call\s*=\s*[\"']?(\d+)[\"']?)?\s*>([\s\S]*?)</rationale>", re.IGNORECASE
)
_ORPHAN_TAG = re.compile(r"</?rationale(?:\s+call\s*=\s*[\"']?\d+[\"']?)?\s*>", re.IGNORECASE)
_FENCE = re.compile(r"^\s*```(?:json)?\s*|\s*```\s*$", re.IGNORECASE)


def _lenient_json(body: str) -> Any:
    """The block's JSON, or None. Nesting past the parser's depth is malformed too: a block
    of 100,000 `[` raised RecursionError, and the whole reply was thrown away as unreadable."""
    text = _FENCE.sub("", body.strip())
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        start, end = text.find("{"), text.rfind("}")
        if start == -1 or end <= start:
            return None
        try:
            return json.loads(text[start : end + 1])
        except (ValueError, RecursionError):
            return None


def extract_rationale(value: Any) -> RationaleDetail | None:
    """A rationale from parsed JSON, or None when it has no usable `why`."""
    if not isinstance(value, dict):
        return None
    why = value.get("why")
    if not isinstance(why, str) or not why.strip():
        return None
    refs = value.get("refs")
    confidence = value.get("confidence")
    return RationaleDetail(
        why=why.strip()[:WHY_MAX_CHARS],
        refs=[r[:REF_MAX_CHARS] for r in refs[:REFS_MAX]]
        if isinstance(refs, list) and all(isinstance(r, str) for r in refs)
        else None,
        confidence=float(confidence)
        if isinstance(confidence, int | float)
        and not isinstance(confidence, bool)
        and 0 <= confidence <= 1
        else None,
    )


def parse_rationale_blocks(text: str | None) -> dict[int, RationaleDetail]:
    """Blocks by 1-based call position; malformed ones are skipped, never raised."""
    found: dict[int, RationaleDetail] = {}
    for sequence, match in enumerate(_BLOCK.finditer(text or ""), start=1):
        if sequence > BLOCKS_MAX:
            break
        rationale = extract_rationale(_lenient_json(match.group(2)))
        if rationale is None:
            continue
        named = match.group(1)
        # past 4,300 digits int() raises: a long number names no call of a kept reply anyway
        key = (int(named) if len(named) <= 6 else BLOCKS_MAX + 1) if named else sequence
        while key in found:
            key += 1
        # a block for a call no reply keeps is no call's rationale, nor is `call="0"` (a
        # model counting from 0): kept, a second one took position 1 from the block for it
        if 1 <= key <= BLOCKS_MAX:
            found[key] = rationale
    return found


def strip_rationale_blocks(text: str | None) -> str:
    """The text without rationale blocks or stray rationale tags."""
    if not text:
        return ""
    stripped = _ORPHAN_TAG.sub("", _BLOCK.sub("", text))
    # a tag cut in two around another (`<ratio<rationale>nale>`) is whole once that one is
    # gone: escaped, it is no tag (removing tags until none is left took seconds on a reply of
    # nested halves, each pass making the next tag)
    stripped = _ORPHAN_TAG.sub(lambda tag: "&lt;" + tag.group(0)[1:], stripped)
    return re.sub(r"\n{3,}", "\n\n", stripped).strip()
