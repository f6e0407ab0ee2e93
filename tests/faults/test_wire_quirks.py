"""What OpenAI-compatible servers send on the wire that OpenAI does not, over real HTTP: a
streamed call whose id changes from chunk to chunk, an error page in place of an error
body."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.exceptions import ApplicationError

from activities.llm_calls import LlmEndpoint
from activities.llm_request import chat_request
from reactive_temporal.config import Settings
from reactive_temporal.embedded.scripted_llm import Raw, Reply, ScriptedLLM
from reactive_temporal.hosting.worker_factory import llm_client
from tests.support.sse_replies import chunk, sse
from tests.support.steps import attempt
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


NGINX_504 = (
    b"<html>\r\n<head><title>504 Gateway Time-out</title></head>\r\n<body>\r\n"
    b"<center><h1>504 Gateway Time-out</h1></center>\r\n<hr><center>nginx</center>\r\n"
    b"</body>\r\n</html>\r\n"
)
CLOUD_408 = (
    b"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>Error 408 (Request "
    b"Timeout)!!1</title><style>*{margin:0;padding:0}html,code{font:15px/22px arial}"
    + b"a{color:#777}"
    * 40
    + b"</style></head><body><p><b>408.</b> That&#39;s an error.<p>Your client has taken too "
    b"long to issue its request.</body></html>"
)


@pytest.mark.parametrize(
    ("status", "page", "said"),
    [
        (504, NGINX_504, "504 Gateway Time-out"),
        (408, CLOUD_408, "Your client has taken too long to issue its request."),
    ],
)
async def test_a_gateway_s_error_page_is_said_in_its_words(
    status: int, page: bytes, said: str, settings: Settings, llm: ScriptedLLM, model_name: str
):
    """A proxy's or a load balancer's timeout answers with its HTML page: the run's error was
    the page's first 500 characters of markup and styles ("<html>\\r\\n<head><title>…"),
    the words often past them. Its title and text are said; it is retried as before."""
    llm.script(model_name, [Raw([page], status=status, content_type="text/html")])
    endpoint = LlmEndpoint(llm_client(settings, llm.base_url))
    request = chat_request(model_name, [{"role": "user", "content": "hi"}])
    try:
        with pytest.raises(ApplicationError) as refused:
            await attempt(1).run(endpoint.complete, request, max_attempts=3)
    finally:
        await endpoint.close()
    message = str(refused.value)
    assert said in message and "<" not in message and "{" not in message, message
    assert refused.value.non_retryable is False
