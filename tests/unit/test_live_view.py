"""How `watch` and `run` print a run's live output: one readable line per event (text as it
streams), or JSON Lines without unset fields; the model's and tools' text is untrusted and
never reaches the terminal with its escape sequences."""

from __future__ import annotations

import asyncio
import io
import json

from activities.text_stream import LIVE_TEXT_CUT, LIVE_TEXT_MAX_CHARS, TextStream
from reactive_temporal.cli.live_view import LivePrinter
from reactive_temporal.contracts.events import NewEvent, RunEvent
from reactive_temporal.contracts.result import AgentResult

RUN = "run-agent-1"


def event(type_: str, **fields: object) -> RunEvent:
    return RunEvent.model_validate({"type": type_, "run_id": RUN, **fields})


def printed(*events: RunEvent, json_lines: bool = False) -> str:
    out = io.StringIO()
    printer = LivePrinter(out, json_lines=json_lines)
    for e in events:
        printer.show(e)
    return out.getvalue()


def result(**fields: object) -> AgentResult:
    return AgentResult.model_validate(
        {
            "run_id": RUN,
            "agent_id": "agent",
            "output": "42",
            "success": True,
            "terminated_by": "final_answer",
            "metadata": {"duration_ms": 10, "iterations": 1, "tokens_used": 5, "cost": 0.0},
            **fields,
        }
    )


def test_a_run_reads_as_text_streaming_between_its_lines():
    text = printed(
        event("iteration", iteration=1),
        event("text", step=1, delta="Let me "),
        event("text", step=1, delta="add."),
        event("tool_start", tool="calculator", arguments='{"expression": "40+2"}'),
        event("tool_end", tool="calculator", success=True, preview="42", duration_ms=3),
        event("finished", status="completed", result=result()),
    )
    assert text == (
        "── iteration 1 ──\n"
        "Let me add.\n"  # the deltas join on one line, ended before the next event
        '→ calculator({"expression": "40+2"})\n'
        "← calculator ✓ 42 (3 ms)\n"
        "■ final_answer · succeeded\n"
    )


def test_approvals_a_restart_and_an_end_without_a_result():
    text = printed(
        event("approval", status="pending", tool="wire", arguments="{}", call_id="c1"),
        event(
            "approval",
            status="denied",
            tool="wire",
            arguments="{}",
            call_id="c1",
            by="bob",
            reason="not a customer",
        ),  # fmt: skip
        event("text", step=3, delta="I think 41"),
        event("text", step=3, delta="It is 42", restart=True),
        event("tool_end", tool="wire", success=False, preview="boom", duration_ms=1),
        event("finished", status="terminated"),
    )
    assert text.splitlines() == [
        "⏸ wire({}) call c1 waits for approval",
        "⏸ wire({}) call c1 denied by bob: not a customer",
        "I think 41",
        "↻ (the model's reply restarted after a retry)",
        "It is 42",
        "← wire ✗ boom (1 ms)",
        "■ the run ended without a result (terminated)",
    ]


def test_hostile_text_never_reaches_the_terminal_as_escape_sequences():
    text = printed(
        event("text", step=1, delta="safe\x1b[2J\x1b]0;pwned\x07 text\r\n"),
        event("tool_start", tool="calc\x1b[31m", arguments="\x1b[1A" + "x" * 500),
    )
    assert "\x1b" not in text and "\x07" not in text and "\r" not in text
    first, second = text.splitlines()
    assert first == "safe text"
    assert second.startswith("→ calc(") and second.endswith("…)")  # arguments clipped
    assert len(second) < 140


def test_json_lines_are_one_object_per_event_without_unset_fields():
    lines = printed(
        event("text", step=1, delta="hi", offset=0),
        event("finished", status="completed", result=result()),
        json_lines=True,
    ).splitlines()
    first, last = (json.loads(line) for line in lines)
    assert first == {"type": "text", "run_id": RUN, "step": 1, "delta": "hi", "offset": 0}
    assert (last["type"], last["result"]["output"]) == ("finished", "42")
    assert None not in last.values()


class _Written:
    """Stands in for RunEvents: keeps what a stream appends."""

    def __init__(self) -> None:
        self.events: list[NewEvent] = []

    async def try_append(self, run_id: str, events: list[NewEvent]) -> None:
        self.events += events


async def test_a_reply_of_megabytes_is_shown_live_up_to_what_the_run_keeps():
    """A 5 MB reply streamed in 5,000 deltas: the live output holds the first
    LIVE_TEXT_MAX_CHARS characters and one marker (it stored all of it, 9.7 MB of rows with a
    retry, for a reply the run keeps 64,000 characters of)."""
    written = _Written()
    stream = TextStream(written, "run-x", 1, 1, write_interval=0, first_after=0)  # type: ignore[arg-type]
    for _ in range(5_000):
        stream.add("x" * 1_000)
        await asyncio.sleep(0)
    await stream.close()
    text = "".join(e.data["delta"] for e in written.events)
    assert text == "x" * LIVE_TEXT_MAX_CHARS + LIVE_TEXT_CUT
    positions = [e.position for e in written.events]
    assert positions == sorted(positions)
