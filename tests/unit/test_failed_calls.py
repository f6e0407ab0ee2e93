"""Which generations an endpoint refused as tool calls are read as calls
(`reactive_temporal.failed_calls`): only those that leave nothing to guess."""

from __future__ import annotations

import json

import pytest

from reactive_temporal.failed_calls import calls_of_failed_generation

NAMES = {"get_weather": "get_weather", "final-answer": "final-answer", "calc": "calculator"}
PARIS = json.dumps({"city": "Paris"})


@pytest.mark.parametrize(
    ("written", "calls"),
    [
        ('<function=get_weather>{"city": "Paris"}</function>', [("get_weather", PARIS)]),
        ('<function=get_weather,{"city":"Paris"}></function>', [("get_weather", PARIS)]),
        ('<function=get_weather{"city": "Paris"}</function>', [("get_weather", PARIS)]),
        (
            ' <function=get_weather>{"city": "Paris"}</function>\n'
            '<function=calc>{"expression": "6*7"}</function>',
            [("get_weather", PARIS), ("calculator", '{"expression": "6*7"}')],
        ),
        ("<function=calc>{}</function>", [("calculator", "{}")]),
        (
            '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>',
            [("get_weather", PARIS)],
        ),
        ('{"name": "get_weather", "parameters": {"city": "Paris"}}', [("get_weather", PARIS)]),
    ],
)
def test_a_generation_that_is_calls_of_offered_tools_is_read(
    written: str, calls: list[tuple[str, str]]
):
    assert calls_of_failed_generation(written, NAMES) == calls


@pytest.mark.parametrize(
    "written",
    [
        '<function=calc>{"expression": 6*7}</function>',  # not JSON
        "<function=calc>{6*7}</function>",
        '<function=delete_everything>{"path": "/"}</function>',  # not offered
        'Let me check. <function=get_weather>{"city": "Paris"}</function>',  # words first
        '<function=get_weather>{"city": "Paris"}</function> and then done',  # words after
        '<function=get_weather>["Paris"]</function>',  # no object
        '<function=get_weather>{"city": "Paris"}',  # not closed
        '<tool_call>{"name": "get_weather", "arguments": "Paris"}</tool_call>',
        "I could not call a tool.",
        "",
    ],
)
def test_a_generation_that_leaves_anything_to_guess_is_not_read(written: str):
    assert calls_of_failed_generation(written, NAMES) is None
