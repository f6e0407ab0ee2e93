"""The offline scripted model's demo agent: the README's own demo tasks work on it."""

from __future__ import annotations

import pytest

from reactive_temporal.builtin_tools import evaluate_arithmetic
from reactive_temporal.embedded.scripted_llm import Reply, demo_responder
from reactive_temporal.prompts import run_system_prompt

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


def test_the_calculator_answers_what_the_demo_sends_it():
    assert evaluate_arithmetic("2**10") == 1024
    assert evaluate_arithmetic("(17 * 23) + 4") == 395


def test_a_task_without_arithmetic_says_what_the_offline_model_can_do():
    reply = first_turn("Write me a poem")
    assert reply.tool_calls == [] and "only know arithmetic" in (reply.content or "")
