"""What OpenAI-compatible servers send on the wire that OpenAI does not, over real HTTP: a
streamed call whose id changes from chunk to chunk, an error page in place of an error
body."""

from __future__ import annotations

import asyncio

import pytest

from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM
from tests.support.sse_replies import chunk, sse
from tests.workflow.conftest import Harness

pytestmark = [pytest.mark.faults, pytest.mark.workflow]


def fragment(call_id: str, arguments: str, name: str | None = None) -> dict[str, object]:
    function = {"arguments": arguments, **({"name": name} if name else {})}
    return chunk({"tool_calls": [{"index": 0, "id": call_id, "function": function}]})


async def test_a_streamed_call_whose_id_changes_each_chunk_is_one_call(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """An endpoint that makes up a new call id for every chunk of one call (vLLM's tool
    parsers, in some versions): each fragment after the first was a call of its own, with no
    name, and the real call lost its arguments. It is one call, as the endpoint meant."""
    stream = sse(
        chunk({"role": "assistant"}),
        fragment("chatcmpl-tool-a1", "", name="calculator"),
        fragment("chatcmpl-tool-b2", '{"expression": '),
        fragment("chatcmpl-tool-c3", '"6*7"}'),
        chunk({}, "tool_calls"),
    )
    llm.script(model_name, [stream, Reply("FINAL ANSWER: 42")])
    result = await asyncio.wait_for(
        harness.run(model_name, "6*7?", memory=False, live_output=True, max_iterations=3), 60
    )
    assert (result.terminated_by, result.output) == ("final_answer", "42"), result
    sent = llm.requests[model_name]
    calls = [c for m in sent[1]["messages"] for c in m.get("tool_calls") or []]
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        ("calculator", '{"expression": "6*7"}')
    ], calls
    results = [m["content"] for m in sent[1]["messages"] if m["role"] == "tool"]
    assert len(results) == 1 and "42" in results[0], results
