"""The rich debrief's activities: one LLM synthesis call, and persistence.

`synthesize_debrief` never fails on a bad answer: an answer that is not usable JSON comes
back as `parsed=None` and the deterministic debrief stands. HTTP failures are raised like
`llm_step`'s, so Temporal retries them; the DebriefWorkflow falls back when retries end.
"""

from __future__ import annotations

import json
import re
from typing import Any

import openai
from pydantic import ValidationError
from temporalio import activity

from activities.llm import heartbeating, llm_errors
from activities.store import DebriefStore
from reactive_temporal.config import ModelPrice
from reactive_temporal.contracts import names
from reactive_temporal.contracts.debrief import (
    DebriefInput,
    PersistDebriefInput,
    SynthesisFields,
    SynthesisRequest,
    SynthesisResult,
    SynthesisTokens,
)
from reactive_temporal.pricing import cost_of

MAX_FINAL_OUTPUT_CHARS = 12_000
SYNTHESIS_MAX_TOKENS = 800
SYSTEM_PROMPT = """You are summarizing an AI agent's completed task for a structured debrief record.
Return ONLY a JSON object — no prose, no markdown fences — with exactly these fields:
{"summary": "2-3 sentence narrative of what was accomplished",
 "key_findings": ["finding 1", "finding 2"],
 "errors_encountered": ["error description if any"],
 "lessons_learned": ["actionable lesson for future runs"],
 "caveats": "anything uncertain, incomplete, or worth flagging (empty string if none)"}
The user message may include a "Final output" section: that text is what the user received
and is authoritative. Your summary MUST agree with it; do not claim that no answer was
produced when the output answers the task. Several tool calls are not by themselves
evidence of failure."""


def _truncate(text: str) -> str:
    if len(text) <= MAX_FINAL_OUTPUT_CHARS:
        return text
    more = len(text) - MAX_FINAL_OUTPUT_CHARS
    return f"{text[:MAX_FINAL_OUTPUT_CHARS]}\n… [truncated {more} more characters]"


def synthesis_prompt(input: DebriefInput) -> str:
    """The user message: the run's signals, in the reference's section order."""
    capture = input.final_answer
    final_output = (input.final_output or "").strip() or (capture.output.strip() if capture else "")
    if capture and capture.summary.strip():
        self_report = capture.summary.strip()
    elif capture and capture.output.strip():
        self_report = (
            "No summary field on final-answer capture; opening of final-answer output:\n"
            + _truncate(capture.output)
        )
    elif final_output:
        self_report = (
            "No final-answer tool metadata; "
            "user-facing output is in the Final output section below."
        )
    else:
        self_report = "No self-report or final output was recorded."
    tools = (
        "\n".join(
            f"- {t.name}: {t.calls} call(s), {t.errors} error(s), avg {t.avg_duration_ms}ms"
            for t in input.tool_stats
        )
        or "No tools called"
    )
    sections = [
        f"Task: {input.task}",
        f"Agent self-report (from final-answer metadata when present): {self_report}",
        "Final output (authoritative — what the user received as the task answer):\n"
        + (_truncate(final_output) or "(none — empty)"),
        f"Terminated by: {input.terminated_by}",
        f"Tools used:\n{tools}",
        f"Errors from loop: {'; '.join(input.errors_from_loop) or 'none'}",
    ]
    if input.rationale:
        lines = []
        for r in input.rationale:
            tool = f" ({r.tool_name})" if r.tool_name else ""
            conf = (
                f" (confidence: {round(r.rationale.confidence * 100)}%)"
                if r.rationale.confidence is not None
                else ""
            )
            lines.append(
                f"- Iteration {r.iteration}: {r.decision}{tool}\n  Why: {r.rationale.why}{conf}"
            )
        sections.append("Decision rationale (why the agent made key choices):\n" + "\n".join(lines))
    sections += [
        f"Total iterations: {input.metrics.iterations}",
        f"Total tokens: {input.metrics.tokens}",
    ]
    return "\n\n".join(s for s in sections if s)


_FENCE_OPEN = re.compile(r"^\s*```(?:json)?\s*", re.IGNORECASE)
_FENCE_CLOSE = re.compile(r"\s*```\s*$")


def parse_synthesis(text: str | None) -> SynthesisFields | None:
    """The JSON object in the answer, plain, fenced or wrapped in prose; None if there is none."""
    cleaned = _FENCE_CLOSE.sub("", _FENCE_OPEN.sub("", (text or "").strip()))
    candidates = [cleaned]
    start, end = cleaned.find("{"), cleaned.rfind("}")
    if start != -1 and end > start:
        candidates.append(cleaned[start : end + 1])  # upstream does not look inside prose
    for candidate in candidates:
        try:
            value: Any = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            try:
                return SynthesisFields.model_validate(value)
            except ValidationError:
                return None
    return None


class DebriefActivities:
    def __init__(
        self,
        debriefs: DebriefStore,
        client: openai.AsyncOpenAI,
        prices: dict[str, ModelPrice] | None = None,
    ) -> None:
        self.debriefs = debriefs
        self.client = client
        self.prices = prices or {}

    @activity.defn(name=names.SYNTHESIZE_DEBRIEF)
    async def synthesize_debrief(self, request: SynthesisRequest) -> SynthesisResult:
        with llm_errors(request.max_attempts):
            async with heartbeating():
                response = await self.client.chat.completions.create(
                    model=request.model,
                    messages=[
                        {"role": "system", "content": SYSTEM_PROMPT},
                        {"role": "user", "content": synthesis_prompt(request.input)},
                    ],
                    temperature=0.2,
                    max_tokens=SYNTHESIS_MAX_TOKENS,
                )
        content = response.choices[0].message.content if response.choices else None
        prompt = response.usage.prompt_tokens if response.usage else 0
        completion = response.usage.completion_tokens if response.usage else 0
        parsed = parse_synthesis(content)
        if parsed is None:
            activity.logger.warning(
                "debrief synthesis answer was not usable JSON; keeping fallback"
            )
        return SynthesisResult(
            parsed=parsed,
            raw_excerpt=(content or "")[:500],
            tokens=SynthesisTokens(
                input=prompt,
                output=completion,
                total=prompt + completion,
                cost=cost_of(request.model, prompt, completion, self.prices),
            ),
        )

    @activity.defn(name=names.PERSIST_DEBRIEF)
    async def persist_debrief(self, input: PersistDebriefInput) -> None:
        await self.debriefs.save(input.input, input.debrief)
