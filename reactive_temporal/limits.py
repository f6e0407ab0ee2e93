"""How big anything a run carries may be, so no payload meets Temporal's walls.

Temporal refuses a payload over 2 MB (an activity result, a workflow input or result, a
signal) and a workflow task completion over 4 MB; an oversized activity *input* fails the
workflow task, which retries forever. The limits below keep every payload of a run far under
those, whatever a model, a tool or an operator sends. Characters are counted, but the budgets
assume the worst encoding (a control character is 6 bytes of JSON, an emoji 4).

`bound_reply` applies them to a model's reply where it enters the system (the `llm_step`
activity), before it is stored or returned; the run loop then refuses, as observations the
model reads, what they marked (`workflows/run_limits.py`).

Together they hold every payload of a run under one ceiling, PAYLOAD_BUDGET_BYTES, worst case:
docs/payload-budget.md composes each payload's worst case from the limits here, and
tests/unit/test_payload_budget.py builds each one and weighs it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TypeVar

from pydantic_core import PydanticSerializationError, to_json

from reactive_temporal.contracts.debrief import SynthesisFields
from reactive_temporal.contracts.llm_payloads import RationaleDetail
from reactive_temporal.contracts.run import (
    FINAL_ANSWER_TOOL,
    AgentConfig,
    AgentRunInput,
    FinalAnswerCapture,
    ToolCall,
)
from reactive_temporal.sanitize import clean_text, clean_value, clip

PAYLOAD_BUDGET_BYTES = 1_800_000
"""The ceiling every payload of an agent run stays under in its worst case (its workflow's
input, result and continue-as-new input, each activity's input and result, its debrief
child's, the news its agent gets), as the limits below compose it: docs/payload-budget.md.
Temporal refuses a payload over 2 MiB (2,097,152 bytes, the server's `limit.blobSize.error`);
the 297,152 bytes between are for what rides on the JSON (28 bytes of metadata, 94 more with
the encryption codec, measured on a 2 MB payload) and for the next optional field a contract
gains, so that one does not tip a worst case over the wall (a run's result was found 0.9%
under it)."""
TOOL_NAMES_MAX_BYTES = 32_768
"""One list of tool names as JSON: an agent's tools, required tools or approval tools, and a
run's tools as its worker resolves them (activities/run_seed.py). A run carries its tools in
its state (three times), every LLM step's input and each continue-as-new; 256 names of 64
characters are 17 KB."""
AGENT_CONFIG_MAX_BYTES = 400_000
"""An agent's whole configuration as JSON, where agents are configured: a system prompt of
100,000 characters of any script (three bytes each at most, but for emoji) and full lists of
tools fit; 100,000 control characters (six bytes each) do not."""
RUN_INPUT_MAX_BYTES = 700_000
"""A run's input (its task and its agent) as JSON: the run carries it whole in each
continue-as-new input (with its state) and its first LLM step's. Checked by the starters
(`api.run_inputs`) and, for an input a client made by hand, by the run itself as it starts,
with its agent's AGENT_CONFIG_MAX_BYTES (it fails at once, saying so: `run_input_problem`)."""
ANSWER_MAX_BYTES = 310_000
"""A final answer's output as JSON (with ANSWER_MAX_CHARS): the answer travels twice in the
run's result and twice in its debrief's input. 100,000 characters of any script but emoji
(three bytes each at most) fit; 100,000 control characters (600,000 bytes) do not."""
CONFIDENCE_MAX_CHARS = 1_000
"""A final answer's confidence (`high`, `medium` or `low`, as the tool asks): it travels in
the result, the debrief and its markdown, so a longer one is clipped."""
REPLY_CONTENT_MAX_BYTES = 260_000
"""A reply's text as JSON, with REPLY_CONTENT_MAX_CHARS: 64,000 characters of any script fit
(emoji, four bytes each, included); control characters (six) are clipped sooner. The run
keeps its last reply in its state, the answer when nothing better ends it."""

MAX_TOOL_CALLS_PER_TURN = 16
"""Tool calls one model turn may make; more are refused as observations (one turn that
fanned out to hundreds of activities is a known failure of comparable projects)."""
MAX_TOOL_CALLS_KEPT = 4 * MAX_TOOL_CALLS_PER_TURN
"""Tool calls of one reply kept at all (those past MAX_TOOL_CALLS_PER_TURN to be refused one
by one); the rest are dropped where the reply enters. A reply of 9,000 calls kept every one
as a stub, their names and ids alone past the reply's byte budget, and bounding it never
ended: the worker's event loop spun there for good."""
TOOL_ARGUMENTS_MAX_CHARS = 64_000
"""One tool call's arguments (JSON text); beyond it the call is refused."""
ANSWER_MAX_CHARS = 100_000
"""A final answer (the `final-answer` tool's output, the operator's signal): it travels twice
in the run's result (output and final_answer), in the debrief's input and the agent's
notification."""
ANSWER_SUMMARY_MAX_CHARS = 16_000
"""A final answer's summary, and its confidence: each travels in the result, the debrief and
its markdown, so an operator's signal with a longer one is clipped (a tool call's are within
its arguments' limit)."""
FINAL_ANSWER_ARGUMENTS_MAX_CHARS = ANSWER_MAX_CHARS + ANSWER_SUMMARY_MAX_CHARS
"""A `final-answer` call's arguments: its output, plus room for the summary."""
TOOL_ARGUMENTS_TOTAL_MAX_CHARS = 300_000
"""All the arguments of one reply together."""
REPLY_CONTENT_MAX_CHARS = 64_000
"""A reply's text; longer text keeps its head and tail around a marker."""
REPLY_MAX_BYTES = 1_400_000
"""The whole reply as JSON, the last word: calls are refused, largest first, until it fits.
The step's result carries it with the reply's rationale and, on a run's first step, its
tools; a step that cannot record it holds it in its heartbeat with the model's thinking:
all within PAYLOAD_BUDGET_BYTES."""
TOOL_CALL_NAME_MAX_CHARS = 128
"""A tool call's name and its id as the model sent them. No tool's wire name is longer than
64 characters, so a longer name names no tool; both travel with every record of the call (the
run's state, its debrief), so a longer one is clipped where it enters."""
OBSERVATION_MAX_CHARS = 16_000
"""What a tool call returns to the model (results and errors alike), head and tail kept."""
ERROR_RECORD_MAX_CHARS = 1_000
"""A failed call's error as the run keeps it for its debrief."""
LIVE_RUNS_MAX_BYTES = 200_000
"""The progress of an agent's runs in progress that mid-run chat reads (`read_live_runs`), as
JSON, the newest runs kept: the result carries the agent's last run beside them (1.27 MB at
its worst), and five runs' progress at theirs (99 KB each) made it 1.77 MB. Two runs at
their worst fit; most runs' progress is a few kilobytes."""


SYSTEM_PROMPT_MAX_CHARS = 100_000
"""An agent's system prompt (checked where agents are configured: the builder, a run's input;
the contract itself accepts what runs already in flight carry)."""
CHAT_CONTEXT_MAX_CHARS = 16_000
"""What chat tells the model of the agent's last run (its debrief and observations)."""
SYNTHESIS_TEXT_MAX_CHARS = 4_000
"""A synthesized debrief's summary or caveats, and each finding, error or lesson."""
SYNTHESIS_ITEMS_MAX = 20
"""Findings, errors or lessons a synthesized debrief keeps (the debrief travels to the store,
the agent's state and every later chat's context)."""
SYNTHESIS_TOTAL_MAX_CHARS = 40_000
"""All of a synthesized debrief's texts together. The debrief goes to the store in one
activity input holding each text twice (its fields and its markdown) with the run's answer:
at the per-text limits alone, 68 texts of 4,000 control characters (six bytes each in JSON)
made that input 2.9 MB, and the debrief's workflow task failed for good, nothing stored."""
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
"""Control characters but tab and newline: no use in a debrief's prose, six bytes in JSON."""


T = TypeVar("T")

RECORDS_MAX_BYTES = 40_000
"""A run's records of one kind (rationale entries, approval decisions, tool-call records,
distinct errors) that its debrief or its next Temporal run carries, as JSON, the latest kept.
Counted in bytes: the debrief's records travel five times in the run's last local activity
(its input, the debrief's fields and markdown, twice), and 100 rationale entries of control
characters (six bytes each in JSON) made a result of 3.7 MB and a continue-as-new input of
2.3 MB: the run's task failed for good."""


def json_bytes(item: object) -> int:
    """What `item` (a model, a string, …) weighs as JSON, as payloads carry it: a lone
    surrogate (a model's `\\ud800` escape, decoded in workflow code) as the U+FFFD the payload
    converter writes (`payloads.py`), where pydantic's JSON raised, in workflow code a
    ValueError no failure type takes: the task failed on every try."""
    try:
        return len(to_json(item))
    except PydanticSerializationError as err:
        if "surrogate" not in str(err):
            raise
        return len(to_json(clean_value(item)))


def within_bytes(
    items: Sequence[T],
    max_bytes: int = RECORDS_MAX_BYTES,
    *,
    latest: bool = True,
    size: Callable[[T], int] = json_bytes,
) -> list[T]:
    """The latest of `items`, or the first, whose `size` (their JSON) is at most `max_bytes`
    together, in their order (possibly none: one item may be bigger)."""
    kept: list[T] = []
    total = 0
    for item in reversed(items) if latest else items:
        total += size(item)
        if total > max_bytes:
            break
        kept.append(item)
    return kept[::-1] if latest else kept


def bound_answer(
    answer: FinalAnswerCapture, *, confidence_max_chars: int = ANSWER_SUMMARY_MAX_CHARS
) -> FinalAnswerCapture:
    """`answer` with its summary within ANSWER_SUMMARY_MAX_CHARS and its confidence within
    `confidence_max_chars` (head and tail kept around a marker); its output is the caller's
    to accept or refuse. Runs since the payload-budget patch pass CONFIDENCE_MAX_CHARS."""
    summary = clip(answer.summary, ANSWER_SUMMARY_MAX_CHARS)
    confidence = (
        clip(answer.confidence, confidence_max_chars) if answer.confidence is not None else None
    )
    if summary is answer.summary and confidence is answer.confidence:
        return answer
    return answer.model_copy(update={"summary": summary, "confidence": confidence})


def answer_over_budget(answer: FinalAnswerCapture) -> bool:
    """Whether `bound_answer(answer, confidence_max_chars=CONFIDENCE_MAX_CHARS)` would change
    it: its summary or confidence is longer than the run carries."""
    confidence = answer.confidence or ""
    return len(answer.summary) > ANSWER_SUMMARY_MAX_CHARS or len(confidence) > CONFIDENCE_MAX_CHARS


def answer_bytes_problem(output: str) -> str | None:
    """Why a final answer's output is refused for its weight as JSON, or None: within
    ANSWER_MAX_CHARS, control characters (six bytes each) can still make it too heavy."""
    if 6 * len(output) + 2 <= ANSWER_MAX_BYTES:
        return None  # light enough whatever its characters: not weighed
    size = json_bytes(output)
    if size <= ANSWER_MAX_BYTES:
        return None
    return (
        f"The final answer is {size:,} bytes as JSON; the limit is {ANSWER_MAX_BYTES:,} (a "
        "control character takes six). Shorten it, or drop its control characters."
    )


def bound_synthesis(fields: SynthesisFields | None) -> SynthesisFields | None:
    """A debrief synthesis within bounds, whatever the model wrote: control characters out,
    each text and all of them together clipped (summary and caveats first, then findings,
    errors and lessons, in order, while the total allows)."""
    if fields is None:
        return None
    left = SYNTHESIS_TOTAL_MAX_CHARS

    def text(value: str | None) -> str | None:
        nonlocal left
        if value is None:
            return None
        kept = clip(
            _CONTROLS.sub("", clean_text(value)), max(min(SYNTHESIS_TEXT_MAX_CHARS, left), 0)
        )
        left -= len(kept)
        return kept

    def items(values: list[str]) -> list[str]:
        return [t for v in values[:SYNTHESIS_ITEMS_MAX] if left > 0 and (t := text(v))]

    return fields.model_copy(
        update={
            "summary": text(fields.summary),
            "caveats": text(fields.caveats),
            "key_findings": items(fields.key_findings),
            "errors_encountered": items(fields.errors_encountered),
            "lessons_learned": items(fields.lessons_learned),
        }
    )


MODEL_NAME_MAX_CHARS = 200
"""A model's name, as `AgentConfig.model` takes it."""
MAX_TOOL_NAMES = 256
"""Tool names an agent's configuration lists in each of tools, required_tools and
approve_tools (a run carries them in every step's input)."""


def agent_config_problem(config: AgentConfig) -> str | None:
    """Why an agent's configuration is refused where agents are configured (the builder, a
    run's input), or None; the contract itself accepts what runs already in flight carry.
    A 5 MB debrief model or list of tools was sent as it was, and refused by gRPC's 4 MB."""
    if problem := system_prompt_problem(config.system_prompt):
        return problem
    if config.debrief_model is not None and len(config.debrief_model) > MODEL_NAME_MAX_CHARS:
        return f"debrief_model is over {MODEL_NAME_MAX_CHARS} characters"
    for field, names in (
        ("tools", config.tools or []),
        ("required_tools", config.required_tools),
        ("approve_tools", config.approve_tools),
    ):
        if problem := tool_names_problem(field, names):
            return problem
    if (size := json_bytes(config)) > AGENT_CONFIG_MAX_BYTES:
        return (
            f"the configuration is {size:,} bytes as JSON; the limit is "
            f"{AGENT_CONFIG_MAX_BYTES:,} (its system prompt weighs most; a control character "
            "takes six bytes)"
        )
    return None


def tool_names_problem(field: str, names: Sequence[str]) -> str | None:
    """Why a list of tool names is more than a run carries, or None."""
    if len(names) > MAX_TOOL_NAMES:
        return f"{field} lists {len(names):,} names; the limit is {MAX_TOOL_NAMES}"
    if too_long := next((n for n in names if len(n) > TOOL_CALL_NAME_MAX_CHARS), None):
        return f"{field} has a name over {TOOL_CALL_NAME_MAX_CHARS} characters: {too_long[:60]!r}…"
    if (size := json_bytes(names)) > TOOL_NAMES_MAX_BYTES:
        return f"{field} is {size:,} bytes as JSON; the limit is {TOOL_NAMES_MAX_BYTES:,}"
    return None


def run_input_problem(run: AgentRunInput) -> str | None:
    """Why a run's input (its task and agent, without what a continuing run carries) is too
    heavy to start, or None: the whole past RUN_INPUT_MAX_BYTES, or its agent past
    AGENT_CONFIG_MAX_BYTES (the run's agent travels on alone, in its news to the agent)."""
    size = json_bytes(run.model_copy(update={"continuation": None}))
    if size > RUN_INPUT_MAX_BYTES:
        return (
            f"the run's input is {size:,} bytes as JSON; the limit is {RUN_INPUT_MAX_BYTES:,} "
            "(its task and its agent's system prompt weigh most; a control character takes six "
            "bytes)"
        )
    if (size := json_bytes(run.agent)) > AGENT_CONFIG_MAX_BYTES:
        return (
            f"the agent's configuration is {size:,} bytes as JSON; the limit is "
            f"{AGENT_CONFIG_MAX_BYTES:,} (its system prompt weighs most)"
        )
    return None


def system_prompt_problem(system_prompt: str | None) -> str | None:
    """Why a system prompt is refused, or None."""
    if system_prompt is None or len(system_prompt) <= SYSTEM_PROMPT_MAX_CHARS:
        return None
    return (
        f"system_prompt is {len(system_prompt):,} characters; the limit is "
        f"{SYSTEM_PROMPT_MAX_CHARS:,}"
    )


def arguments_limit(call: ToolCall) -> int:
    return (
        FINAL_ANSWER_ARGUMENTS_MAX_CHARS
        if call.name == FINAL_ANSWER_TOOL
        else (TOOL_ARGUMENTS_MAX_CHARS)
    )


def _refused(call: ToolCall) -> ToolCall:
    """The call with its arguments dropped and their size kept, for the loop to refuse it."""
    return call.model_copy(update={"arguments": "{}", "oversized": len(call.arguments)})


def _named_within_bounds(call: ToolCall) -> ToolCall:
    if len(call.name) <= TOOL_CALL_NAME_MAX_CHARS and len(call.id) <= TOOL_CALL_NAME_MAX_CHARS:
        return call
    return call.model_copy(
        update={
            "name": clip(call.name, TOOL_CALL_NAME_MAX_CHARS),
            "id": clip(call.id, TOOL_CALL_NAME_MAX_CHARS),
        }
    )


def bound_reply(
    content: str | None, calls: Sequence[ToolCall]
) -> tuple[str | None, list[ToolCall]]:
    """A model's reply within the limits: the text clipped (head and tail kept), calls' names
    and ids clipped past TOOL_CALL_NAME_MAX_CHARS, every call over its own limit or past the
    reply's totals marked `oversized` (arguments dropped), and calls past
    MAX_TOOL_CALLS_PER_TURN stripped of their arguments too (they will not run), calls past
    MAX_TOOL_CALLS_KEPT dropped. A reply within the limits comes back unchanged, but for lone
    surrogates (U+FFFD: they cannot be encoded anywhere downstream)."""
    calls = [_named_within_bounds(c) for c in clean_value(list(calls[:MAX_TOOL_CALLS_KEPT]))]
    if content is not None:
        content = clip_to_bytes(clip(clean_text(content), REPLY_CONTENT_MAX_CHARS),
                                REPLY_CONTENT_MAX_BYTES)  # fmt: skip
    bounded: list[ToolCall] = []
    total = 0
    for position, call in enumerate(calls):
        if position >= MAX_TOOL_CALLS_PER_TURN:
            bounded.append(call.model_copy(update={"arguments": "{}"}))
        elif len(call.arguments) > arguments_limit(call) or (
            total + len(call.arguments) > TOOL_ARGUMENTS_TOTAL_MAX_CHARS
        ):
            bounded.append(_refused(call))
        else:
            total += len(call.arguments)
            bounded.append(call)
    while len(to_json([content, [c.model_dump() for c in bounded]])) > REPLY_MAX_BYTES:
        largest = max(range(len(bounded)), key=lambda i: len(bounded[i].arguments), default=None)
        if largest is not None and len(bounded[largest].arguments) > 2:
            bounded[largest] = _refused(bounded[largest])
        elif content:
            content = clip(content, len(content) // 2)
        elif bounded:  # names and ids alone: not within the caps above, but never a loop
            bounded.pop()
        else:
            break
    return content, bounded


def clip_to_bytes(text: str, max_bytes: int) -> str:
    """`text` when its JSON is within `max_bytes`; else clipped (`clip`: head and tail around
    a marker) to the most characters whose JSON is."""
    if json_bytes(text) <= max_bytes:
        return text
    low, high = 0, len(text)  # fits, does not fit
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if json_bytes(clip(text, middle)) <= max_bytes else (low, middle)
    return clip(text, low)


def bound_rationale(rationale: dict[int, RationaleDetail]) -> dict[int, RationaleDetail]:
    """A reply's rationale blocks (audit mode) within RECORDS_MAX_BYTES, the first calls'
    kept: the run keeps no more of its records than that, and 64 blocks at their limits were
    722 KB more in the step's result, past 2 MB with the reply at its own bound. Lone
    surrogates become U+FFFD, as in the reply."""
    rationale = clean_value(rationale)
    kept = within_bytes(sorted(rationale.items()), latest=False, size=lambda e: json_bytes(e[1]))
    return rationale if len(kept) == len(rationale) else dict(kept)
