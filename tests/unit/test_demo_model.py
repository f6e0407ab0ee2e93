"""The offline scripted model's demo agent: the README's own demo tasks work on it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from activities.chat import direct_messages
from reactive_temporal import prompts
from reactive_temporal.builtin_tools import evaluate_arithmetic
from reactive_temporal.contracts.debrief import AgentDebrief
from reactive_temporal.contracts.entity import ChatMessage
from reactive_temporal.embedded.scripted_llm import Reply, demo_responder
from reactive_temporal.memory import PriorRun, chat_notes, run_notes
from reactive_temporal.prompts import run_system_prompt
from workflows.chat_rules import build_context_summary

CALCULATOR = {"type": "function", "function": {"name": "calculator", "parameters": {}}}


def first_turn(task: str) -> Reply:
    request = {
        "model": "demo",
        "messages": [
            {"role": "system", "content": run_system_prompt("agent", None)},
            {"role": "user", "content": task},
        ],
        "tools": [CALCULATOR],
    }
    reply = demo_responder(request)
    assert isinstance(reply, Reply)
    return reply


@pytest.mark.parametrize(
    ("task", "expression"),
    [
        ("What is 2**10?", "2**10"),  # README: make demo TASK="What is 2**10?"
        ("What is (17 * 23) + 4?", "(17 * 23) + 4"),  # the Makefile's default task
        ("What is 2^-3?", "2^-3"),
        ("What is 2*(3+4)?", "2*(3+4)"),
    ],
)
def test_arithmetic_tasks_go_to_the_calculator(task: str, expression: str):
    reply = first_turn(task)
    assert [c.name for c in reply.tool_calls] == ["calculator"]
    assert reply.tool_calls[0].arguments == {"expression": expression}


def test_the_agent_s_notes_after_the_task_are_not_read_as_its_arithmetic():
    """The task and the notes go as one user turn; a run id in the notes whose hex happened
    to be digits ("run-crash-test-019748-2672985…") was read as a longer expression than the
    task's, and the run computed it (a flaky `test_ten_runs_survive_two_worker_kills`)."""
    notes = run_notes(
        PriorRun(run_id="run-crash-test-019748-2672985abcde", outcome="success",
                 summary="Computed 5 * 7 + 1.", age_hours=0.01),
        [],
    )  # fmt: skip
    reply = first_turn(f"What is 6 * 7 + 1?\n\n{notes}")
    assert reply.tool_calls[0].arguments == {"expression": "6 * 7 + 1"}


def test_the_calculator_answers_what_the_demo_sends_it():
    assert evaluate_arithmetic("2**10") == 1024
    assert evaluate_arithmetic("(17 * 23) + 4") == 395


def test_a_task_without_arithmetic_says_what_the_offline_model_can_do():
    reply = first_turn("Write me a poem")
    assert reply.tool_calls == [] and "only know arithmetic" in (reply.content or "")


def test_chat_on_a_sessions_first_turn_reads_the_notes_sent_with_the_question():
    """A session's first direct turn sends the notes and the question as one user message
    (activities/chat.py): `starter.py chat "What did you find?"` after a run quotes that run,
    not "I have no runs to talk about yet"."""
    debrief = AgentDebrief(
        outcome="success", summary="Used the calculator tool and reported its result."
    )
    system = prompts.direct_chat_system_prompt("agent", None, "")
    notes = chat_notes(build_context_summary(debrief, ["[Tool result]: 2026-12-04T21:46:00Z"]))
    at = datetime(2026, 12, 4, tzinfo=UTC)
    earlier = [
        ChatMessage(role="user", content="hi", timestamp=at),
        ChatMessage(role="assistant", content="hello", timestamp=at),
    ]
    for history in ([], earlier):
        messages = direct_messages(system, notes, history, "What did you find?")
        reply = demo_responder({"model": "demo", "messages": messages})
        assert isinstance(reply, Reply)
        assert reply.content == (
            "(offline model) In my last run: Used the calculator tool and reported its result."
            " The tool returned 2026-12-04T21:46:00Z."
        ), history
