"""Workflow history grows linearly with iterations: no activity input carries the transcript."""

from __future__ import annotations

import pytest

from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from tests.workflow.conftest import Harness

pytestmark = pytest.mark.workflow


async def history_bytes_per_iteration(harness: Harness, llm: ScriptedLLM, iterations: int) -> float:
    model = llm.script(
        f"growth-{iterations}",
        # the same tool output every iteration, so only the transcript's length changes
        [Reply("Another step.", [call("calculator", expression="123456789 * 987654321")])],
        repeat_last=True,
    )
    handle = await harness.start(model, "Keep multiplying", max_iterations=iterations)
    result = await handle.result()
    assert result.metadata.iterations == iterations
    history = await handle.fetch_history()
    return len(history.to_json().encode()) / iterations


async def test_history_bytes_per_iteration_stay_flat(harness: Harness, llm: ScriptedLLM):
    short = await history_bytes_per_iteration(harness, llm, 5)
    long = await history_bytes_per_iteration(harness, llm, 30)
    print(f"history bytes/iteration: 5 iterations {short:.0f}, 30 iterations {long:.0f}")
    assert long <= 1.5 * short, (short, long)
