"""What the worker says about a reply it read: to dashboards, and in the log to operators.

Kept apart from reading the reply (`reply_calls`, pure) and from the step (`llm_step`), which
only hands each reply over.
"""

from __future__ import annotations

from temporalio import activity

from activities.reply_calls import ReadReply
from reactive_temporal.sanitize import one_line
from reactive_temporal.telemetry.metrics import record_adaptation

_SAID: dict[str, set[str]] = {}
"""Adaptation kind → the models whose endpoint this worker named for it already."""


def note_reply(model: str, run_id: str, read: ReadReply, *, tools_in_prompt: bool = False) -> None:
    """Count what the worker adapted to in `model`'s reply, and say what an operator should
    know: calls left in the text (once per model; not for a model whose tools are described
    in its prompt, `ModelCapabilities.tools_in_prompt`: there the text is where they belong,
    and the learning was said already), calls it wrote that could not be read (once per
    model: the run tells the model each time), a tool's result the model quoted as calls
    (each time: a page or a tool's output tried to have the agent run them)."""
    if read.calls_from_text and not tools_in_prompt:
        _calls_written_as_text(model)
    if read.harmony_in_text:
        _harmony_left_in_text(model)
    if read.unread_calls is not None:
        _calls_unread(model)
    for _ in range(read.unwrapped_names):
        record_adaptation(model, "tool_name_unwrapped")
    if read.copied_calls is not None:
        activity.logger.warning(
            "run %s: model %s ended its reply with tool calls copied from a tool's result "
            "(a page or a tool's output planting calls, most likely); they were not run: %r",
            run_id,
            model,
            one_line(read.copied_calls, 300),
        )


def _calls_written_as_text(model: str) -> None:
    """A reply whose calls were in its text: they are read from it, but the endpoint is the
    thing to fix."""
    _endpoint_leaves(
        model,
        "calls_in_text",
        "its tool calls into its reply's text: its endpoint does not parse them (vLLM: "
        "--enable-auto-tool-choice with the model's --tool-call-parser; llama.cpp: --jinja). "
        "This worker reads them from the text.",
    )


def _calls_unread(model: str) -> None:
    """A reply that ended with calls written in its text that could not be read (a block
    that names no tool): not made, and the model told so (`LlmStepResult.unread_calls`). A
    steady rate is a model that does not write the format it is asked for."""
    _endpoint_leaves(
        model,
        "unread_text_calls",
        "tool calls into its reply's text that could not be read (a block that names no "
        "tool: no name, cut off before it, not a JSON object); they were not run, and the "
        "model is told how to write one. Often a small model: a steady rate says it does "
        "not follow the format (a larger model, or an endpoint that parses its calls).",
    )


def _harmony_left_in_text(model: str) -> None:
    """A reply whose text held gpt-oss's harmony channels: read here by channel, but every
    other client of that endpoint shows the model's thoughts as its answer."""
    _endpoint_leaves(
        model,
        "harmony_in_text",
        "gpt-oss's harmony channels (analysis, final) into its reply's text: its endpoint "
        "does not parse them (vLLM: --reasoning-parser openai_gptoss and --tool-call-parser "
        "openai; llama.cpp: --jinja with the model's own template). This worker reads them "
        "from the text: the analysis as thinking, the final as the answer.",
    )


def _endpoint_leaves(model: str, kind: str, what: str) -> None:
    """Count a reply of `kind` (an adaptation), and say once per model and worker what the
    model wrote that its endpoint should have parsed."""
    record_adaptation(model, kind)
    seen = _SAID.setdefault(kind, set())
    if model not in seen:
        seen.add(model)
        activity.logger.warning("model %s wrote %s", model, what)
