"""Hypothesis strategies for what an attacker controls: a model's reply, a tool's result, a web
page, a chat message, an operator's signal or a CLI argument.

`tests/adversarial/cases.py` lists hostile cases one by one; these generate them. Every
strategy mixes plain arbitrary text with the pieces the project's parsers look for (markers,
tags, JSON and CSV punctuation), so that generated text reaches the branches a parser has,
not only its first `if`. Huge inputs are built by repeating a generated piece, so they cost
hypothesis a few bytes of choices, not megabytes.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st
from pydantic_core import to_json

from reactive_temporal import limits
from reactive_temporal.contracts.approvals import (
    DECIDER_MAX_CHARS,
    REASON_MAX_CHARS,
    ApprovalRecord,
)
from reactive_temporal.contracts.debrief import RationaleEntry
from reactive_temporal.contracts.llm_payloads import RationaleDetail
from reactive_temporal.contracts.run import FinalAnswerCapture, ToolResult
from workflows.run_state import RunState

ATOMS = (
    # markers a run, chat or debrief reads
    "FINAL ANSWER:", "final answer", "**Final Answer:**", "FINAL ANSWER：", "final", "answer",
    "<tool_call>", "</tool_call>", "[TOOL_CALLS]", "[ARGS]", "<|python_tag|>", "<|channel|>",
    "<think>", "</think>", "<thinking>", "[THINK]", "[/THINK]",
    '<rationale call="1">', "<rationale>", "</rationale>", "<rationale call='99999999'>",
    "<notes>", "</notes>", "</no", "tes>", "[Tool error: ", "]", "[", "{", "}", '"', "'", "`",
    "```json", "```", '{"name": "calculator", "arguments": {}}', '{"why": "x"}',
    '"output"', '"format"', '"summary"', '"confidence"', ":", ",", "\\", "\\u0000", "\\ud800",
    "search online", "write to file", "read the file", "github", "github/", "calculate",
    "what did you", "fetch", "⚠️", "✓ final-answer", "[Tool result]: ", "[Agent analysis]: ",
    # characters that break encoders, terminals, regexes and CSV
    "\x00", "\x01", "\x1b]8;;http://x\x07", "\x7f", "\r", "\n", "\r\n", "\t", " ", "\u2028",
    "\u202e", "\ufeff", "\ufffd", "\ud800", "\udfff", "😀", "é", "ſ", "K", "İ", "ß", "١",
    "*", "**", "__", "#", "-", "|",
)  # fmt: skip
"""Pieces of text the project's parsers look for, and characters that break things."""

JS_SAFE_INTEGER = 2**53 - 1
PAYLOAD_MAX_BYTES = 2 * 1024 * 1024
"""Temporal's limit on one payload (`limit.blobSize.error`): an activity's input, a workflow's
input or result, a signal, an update, a continue-as-new input."""
PAYLOAD_BUDGET_BYTES = limits.PAYLOAD_BUDGET_BYTES
"""The ceiling a run's payloads stay under, worst case, leaving room under PAYLOAD_MAX_BYTES
for metadata, the encryption codec and the next field a contract gains: what the generated
properties hold them to (docs/payload-budget.md)."""

characters = st.characters(codec=None, exclude_categories=())
"""Any code point, lone surrogates (category Cs) included: a `str` can hold them, and a
model's JSON escapes (`\\ud800`) decoded by the openai SDK make them."""

plain_text = st.text(characters, max_size=40)


@st.composite
def _repeated(draw: st.DrawFn, max_repeat: int) -> str:
    piece = draw(st.sampled_from(ATOMS) | st.text(characters, min_size=1, max_size=8))
    return piece * draw(st.integers(0, max_repeat))


def hostile_text(*, max_repeat: int = 5_000, max_pieces: int = 12) -> st.SearchStrategy[str]:
    """Arbitrary unicode (surrogates, controls, NUL), the parsers' markers, and huge text."""
    piece = st.sampled_from(ATOMS) | plain_text | _repeated(max_repeat)
    return st.one_of(
        plain_text,
        st.lists(piece, max_size=max_pieces).map("".join),
    )


def storable_text(**kwargs: Any) -> st.SearchStrategy[str]:
    """Hostile text as it arrives in a workflow through a payload: pydantic's JSON refuses a
    lone surrogate, so none reaches a workflow (NUL and every other character do)."""
    return hostile_text(**kwargs).map(_no_surrogates)


def _no_surrogates(text: str) -> str:
    return text.encode("utf-8", "replace").decode("utf-8")


hostile_floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e21, 1e300, -0.0, 5e-324]),
)
"""Every float pydantic takes from JSON: `NaN`, `Infinity` and `1e400` (as inf) included."""

hostile_ints = st.one_of(
    st.integers(-1_000, 1_000),
    st.integers(-(2**64), 2**64),
    st.sampled_from([JS_SAFE_INTEGER, JS_SAFE_INTEGER + 1, -JS_SAFE_INTEGER - 2, 2**63, 2**1024]),
    st.integers(0, 4_000).map(lambda digits: 10**digits),
)
"""Integers around and past JavaScript's safe bound, int64's and a double's range; pydantic
takes from JSON any integer of up to 4,300 digits."""

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    hostile_ints.filter(lambda n: abs(n) < 10**4000),
    hostile_floats,
    hostile_text(max_repeat=200),
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(hostile_text(max_repeat=20), children, max_size=4)
    ),
    max_leaves=12,
)
"""JSON as Python's `json` reads it (NaN and Infinity included, as the openai SDK takes them)."""


@st.composite
def json_texts(draw: st.DrawFn) -> str:
    """JSON text a model may send: valid, deep past any parser's limit, cut off, or junk."""
    kind = draw(st.sampled_from(["value", "object", "deep", "cut", "junk"]))
    if kind == "value":
        return json.dumps(draw(json_values))
    if kind == "object":
        return json.dumps(draw(st.dictionaries(st.sampled_from(KEYS), json_values, max_size=5)))
    if kind == "deep":
        depth = draw(st.integers(1, 20_000))
        opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}"), ('{"why":[', "]}")]))
        return (
            opener * depth
            + draw(st.sampled_from(["", "1", "null"]))
            + closer * draw(st.sampled_from([0, 1, depth]))
        )
    text = json.dumps(draw(json_values))
    if kind == "cut":
        return text[: draw(st.integers(0, len(text)))]
    return draw(hostile_text(max_repeat=2_000))


KEYS = (
    "output", "format", "summary", "confidence", "name", "arguments", "parameters", "why",
    "refs", "",
)  # fmt: skip


HEAVY = ("\x01", "😀", "é", '"', "a")
"""The characters heaviest in JSON first: a control character is six bytes, an emoji four."""


def sized(max_chars: int) -> st.SearchStrategy[str]:
    """Text of one heavy character, up to `max_chars` long, often exactly that long: the
    sizes a payload's worst case is made of."""
    return st.tuples(
        st.sampled_from(HEAVY), st.sampled_from([0, 1, max_chars]) | st.integers(0, max_chars)
    ).map(lambda t: t[0] * t[1])


def json_bytes(value: object) -> int:
    """What `value` weighs as a payload (pydantic's JSON, as the project's converter writes)."""
    return len(to_json(value))


# -- a run at every limit at once ---------------------------------------------------------------

HEAVY_AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def heaviest_run() -> RunState:
    """A long run of a hostile model with every record a run keeps at its limit at once, in
    control characters (six bytes each in JSON): 150 failed calls of made-up names (clipped to
    their limit where the reply entered), 120 rationale entries, 120 denials."""
    state = RunState(tool_names=["calculator"])
    for n in range(150):
        name = "\x01" * (limits.TOOL_CALL_NAME_MAX_CHARS - 4) + f"{n:04d}"
        error = "\x01" * 2 * limits.ERROR_RECORD_MAX_CHARS
        state.record_tool_results(
            [ToolResult(call_id="c", name=name, success=False, content=f"{error}{n}")]
        )
    detail = RationaleDetail(why="\x01" * 280, refs=["\x01" * 200] * 8, confidence=0.5)
    state.rationale = [
        RationaleEntry(iteration=n, tool_name="t", rationale=detail) for n in range(120)
    ]
    denial = ApprovalRecord(
        call_id="call-1",
        tool="calculator",
        arguments="\x01" * 501,
        decision="denied",
        by="\x01" * DECIDER_MAX_CHARS,
        at=HEAVY_AT,
        reason="\x01" * REASON_MAX_CHARS,
    )
    state.approvals = [denial] * 120
    return state


HEAVIEST_ANSWER = FinalAnswerCapture(
    output="\x01" * ((limits.ANSWER_MAX_BYTES - 2) // 6),
    summary="\x01" * 20_000,
    confidence="\x01" * 20_000,
)
"""An operator's `final_answer` signal at its limits (its output as heavy as its bytes allow,
its summary and confidence past their limits, to be clipped), in control characters."""
