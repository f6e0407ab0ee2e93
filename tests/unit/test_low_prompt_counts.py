"""A prompt count the endpoint reports far below the request it answered (a server that cut
the prompt to its context length, or counted only what it had not cached) is counted each
time and said once per model, with what to do; the usage stays as reported."""

from __future__ import annotations

import logging
import uuid

import pytest

from activities.llm_usage import prompt_count_low
from reactive_temporal.context_window import wire_prompt_tokens
from reactive_temporal.contracts.run import Usage
from reactive_temporal.telemetry.metrics import REGISTRY

REQUEST = {
    "model": "m",
    "messages": [
        {"role": "system", "content": "You are careful. " * 30},
        {"role": "user", "content": "Summarize the report below.\n" + "Revenue rose. " * 3_000},
    ],
}


def low_counts(model: str) -> float:
    sample = REGISTRY.get_sample_value(
        "reactive_temporal_llm_adaptations_total", {"model": model, "kind": "prompt_count_low"}
    )
    return sample or 0.0


def test_a_cut_prompt_is_counted_each_time_and_said_once_per_model(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model, other = f"llama-{uuid.uuid4().hex[:6]}", f"qwen-{uuid.uuid4().hex[:6]}"
    sent = wire_prompt_tokens(REQUEST)
    assert sent > 12_000
    cut = Usage(prompt_tokens=4_096, completion_tokens=20)
    warned: set[str] = set()
    with caplog.at_level(logging.WARNING):
        assert prompt_count_low(model, cut, REQUEST, warned)
        assert prompt_count_low(model, cut, REQUEST, warned)
        assert prompt_count_low(other, cut, REQUEST, warned)
    assert (low_counts(model), low_counts(other)) == (2, 1)
    said = [r.getMessage() for r in caplog.records if "prompt tokens for a request" in r.msg]
    assert len(said) == 2  # once per model
    assert f"counted 4096 prompt tokens for a request of about {sent}" in said[0]
    for words in ("num_ctx", "OLLAMA_CONTEXT_LENGTH", "LM Studio", "AGENT_MODEL_CAPABILITIES"):
        assert words in said[0]
    assert f"set context_tokens for {model} in" in said[0]


def test_an_honest_count_or_a_short_request_says_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = f"llama-{uuid.uuid4().hex[:6]}"
    honest = Usage(prompt_tokens=wire_prompt_tokens(REQUEST) * 3 // 4, completion_tokens=5)
    short = {"model": "m", "messages": [{"role": "user", "content": "What is 2+2?"}]}
    with caplog.at_level(logging.WARNING):
        assert not prompt_count_low(model, honest, REQUEST, set())
        assert not prompt_count_low(model, Usage(prompt_tokens=1), short, set())
    assert low_counts(model) == 0
    assert not caplog.records
