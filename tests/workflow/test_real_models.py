"""Real models' quirks, on a real dev server and Postgres, against scripted endpoints that
refuse requests exactly as OpenAI does (reactive_temporal.embedded.scripted_llm.Endpoint)."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from reactive_temporal.config import Settings
from reactive_temporal.embedded.scripted_llm import (
    Endpoint,
    HttpError,
    Reply,
    ScriptedLLM,
    Step,
    call,
)
from reactive_temporal.llm_endpoints import ModelEndpoint, endpoint_for
from reactive_temporal.pricing import cost_of
from reactive_temporal.prompts import SYNTHESIS_SYSTEM_PROMPT
from reactive_temporal.telemetry.metrics import REGISTRY
from reactive_temporal.tools import tool
from tests.workflow.conftest import Harness, running_worker

pytestmark = pytest.mark.workflow

LONG_ANSWER = "12 × 3 is 36: the calculator confirmed it, and the result is exact. " * 3
SYNTHESIS = {
    "summary": "The agent multiplied 12 by 3 with the calculator.",
    "key_findings": ["12 × 3 = 36"],
    "errors_encountered": [],
    "lessons_learned": ["Use the calculator for products."],
    "caveats": "",
}
CHAT_REPLY = "In my last run I multiplied 12 by 3 and got 36."


def _system(request: dict[str, Any]) -> str:
    return next((m.get("content") or "" for m in request["messages"] if m["role"] == "system"), "")


def agent_model(request: dict[str, Any]) -> Step:
    """One model for everything the agent does: its run, direct chat, debrief synthesis."""
    if _system(request) == SYNTHESIS_SYSTEM_PROMPT:
        return Reply(json.dumps(SYNTHESIS))
    if not request.get("tools"):
        return Reply(CHAT_REPLY)
    if not any(m["role"] == "tool" for m in request["messages"]):
        return Reply(None, [call("calculator", expression="12*3")])
    return Reply(None, [call("final-answer", output=LONG_ANSWER, format="text", summary="36.")])


async def test_a_reasoning_model_runs_chats_and_debriefs(
    harness: Harness, llm: ScriptedLLM
) -> None:
    """gpt-5 refuses max_tokens and temperature: none of the run, the direct chat, the tool
    chat and the synthesis sends them, and the reasoning tokens are counted and priced."""
    model = llm.endpoint(
        f"u{uuid.uuid4().hex[:6]}/gpt-5-mini", Endpoint.reasoning_model(reasoning_tokens=50)
    )
    llm.script(model, agent_model)
    agent = harness.agent(
        model, agent_id=f"thinker-{uuid.uuid4().hex[:6]}", temperature=0.3,
        reasoning_effort="low",
    )  # fmt: skip

    result = await agent.run("What is 12 times 3?")
    assert result.success and result.terminated_by == "final_answer_tool"
    m = result.metadata
    assert m.reasoning_tokens == 2 * 50  # two LLM steps
    assert m.completion_tokens >= m.reasoning_tokens
    assert m.cost == pytest.approx(cost_of(model, m.prompt_tokens, m.completion_tokens), rel=1e-6)
    assert m.cost > 0  # priced as gpt-5-mini, reasoning tokens as output

    direct = await agent.chat("What did you find?")
    assert direct.routed_via == "direct-llm" and direct.message == CHAT_REPLY
    tools = await agent.chat("calculate 12*3 again", use_tools=True)
    assert tools.routed_via == "react-loop" and tools.message.startswith("12 × 3 is 36")

    rich = await result.debrief_rich()
    assert rich is not None and rich.synthesized
    assert rich.lessons_learned == ["Use the calculator for products."]

    assert llm.rejected[model] == []  # nothing it refuses was ever sent
    sent = llm.requests[model]
    assert all("max_tokens" not in r and "temperature" not in r for r in sent)
    assert all(r.get("reasoning_effort") == "low" for r in sent)
    synthesis = [r for r in sent if _system(r) == SYNTHESIS_SYSTEM_PROMPT]
    assert synthesis and all("max_completion_tokens" in r for r in synthesis)


async def test_a_gateway_s_headers_go_with_every_request_of_runs_chats_and_debriefs(
    client: Client, settings: Settings, llm: ScriptedLLM
) -> None:
    """An LLM gateway (Helicone, Portkey, Cloudflare's, a company proxy) takes its own key in a
    header of its own: AGENT_LLM_HEADERS sends it with each request the worker makes: the
    run's steps, a direct and a tool chat turn, the debrief's synthesis. The headers live in
    the worker's client, not in any payload: the run's history does not hold them."""
    model = llm.script(f"gw-{uuid.uuid4().hex[:6]}", agent_model)
    key = f"sk-gw-{uuid.uuid4().hex[:8]}"
    gateway = settings.model_copy(
        update={"llm_headers": {"Helicone-Auth": f"Bearer {key}", "X-Route": "eu"}}
    )
    async with running_worker(client, gateway) as harness:
        agent = harness.agent(model, agent_id=f"gw-{uuid.uuid4().hex[:6]}")
        handle = await agent.start("What is 12 times 3?")
        result = await agent.result(handle.id)
        assert result.success, result
        assert (await agent.chat("What did you find?")).routed_via == "direct-llm"
        assert (await agent.chat("calculate 12*3 again", use_tools=True)).message
        rich = await result.debrief_rich()
        assert rich is not None and rich.synthesized
        history = (await handle.fetch_history()).to_json()

    sent = llm.request_headers[model]
    assert len(sent) >= 6  # two steps, two chat turns (one of two steps), a synthesis
    assert all(h.get("helicone-auth") == f"Bearer {key}" for h in sent), sent
    assert all(h.get("x-route") == "eu" and h.get("authorization") == "Bearer test" for h in sent)
    assert key not in history


async def test_a_key_rotated_in_its_file_is_sent_without_a_worker_restart(
    client: Client, settings: Settings, llm: ScriptedLLM, tmp_path: Path
) -> None:
    """OPENAI_API_KEY_FILE: a key a sidecar rotates in place (Vault, Kubernetes, an Entra ID
    token renewed every hour) goes with the next request; read once, as OPENAI_API_KEY is,
    every call failed with 401 once the key expired, until the worker was restarted."""
    model = llm.script(f"kf-{uuid.uuid4().hex[:6]}", [Reply("FINAL ANSWER: ok")], repeat_last=True)
    key_file = tmp_path / "openai-key"
    key_file.write_text("sk-before\n")
    keyed = settings.model_copy(
        update={"openai_api_key": None, "openai_api_key_file": str(key_file)}
    )
    async with running_worker(client, keyed) as harness:
        agent = harness.agent(model, agent_id=f"kf-{uuid.uuid4().hex[:6]}", memory=False)
        assert (await agent.run("First")).success
        key_file.write_text("sk-after-rotation\n")
        assert (await agent.run("Second")).success
    sent = [h.get("authorization") for h in llm.request_headers[model]]
    assert sent == ["Bearer sk-before", "Bearer sk-after-rotation"], sent


async def test_a_key_rotated_while_its_request_was_on_its_way_is_sent_again_at_once(
    client: Client, settings: Settings, llm: ScriptedLLM, tmp_path: Path
) -> None:
    """A request that left just before its key file was rotated is refused (401) for a key
    the file no longer holds: the step asks again with the new key, where the run failed for
    good on a key that had been replaced. A key that is simply wrong still fails at once."""
    key_file = tmp_path / "openai-key"
    key_file.write_text("sk-expiring\n")

    def rotated_in_flight(request: dict[str, Any]) -> Step:
        if key_file.read_text().strip() == "sk-expiring":
            key_file.write_text("sk-renewed-in-flight\n")  # the sidecar, mid-request
            return HttpError(401, "Incorrect API key provided: sk-expi*****.")
        return Reply("FINAL ANSWER: ok")

    def refused(request: dict[str, Any]) -> Step:
        return HttpError(401, "Incorrect API key provided.")

    rotated = llm.script(f"kr-{uuid.uuid4().hex[:6]}", rotated_in_flight)
    wrong = llm.script(f"kw-{uuid.uuid4().hex[:6]}", refused)
    keyed = settings.model_copy(
        update={"openai_api_key": None, "openai_api_key_file": str(key_file)}
    )
    async with running_worker(client, keyed) as harness:
        agent = harness.agent(rotated, agent_id=f"kr-{uuid.uuid4().hex[:6]}", memory=False)
        assert (await agent.run("First")).success
        failed = await harness.agent(
            wrong, agent_id=f"kw-{uuid.uuid4().hex[:6]}", memory=False
        ).run("Second")
    sent = [h.get("authorization") for h in llm.request_headers[rotated]]
    assert sent == ["Bearer sk-expiring", "Bearer sk-renewed-in-flight"], sent
    assert failed.terminated_by == "llm_error" and "HTTP 401" in (failed.error or ""), failed
    assert len(llm.requests[wrong]) == 1  # its key never changed: not asked again


async def test_models_go_to_the_endpoint_their_pattern_names(
    client: Client, settings: Settings, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AGENT_LLM_ENDPOINTS: a run's model on the default endpoint, its debrief synthesized by a
    model of another (a cheap local one, say), each with its own key and headers."""
    tag = uuid.uuid4().hex[:6]
    monkeypatch.setenv("LOCAL_LLM_KEY", f"k-{tag}")
    with ScriptedLLM() as local:
        synth = local.script(f"local-{tag}/synth", [Reply(json.dumps(SYNTHESIS))])
        routed = settings.model_copy(
            update={
                "llm_endpoints": {
                    "local-*": ModelEndpoint(
                        base_url=local.base_url,
                        api_key_env="LOCAL_LLM_KEY",
                        headers={"X-Pool": "gpu"},
                    )
                }
            }
        )
        model = llm.script(f"main-{tag}", agent_model)
        async with running_worker(client, routed) as harness:
            result = await harness.agent(model, agent_id=f"routed-{tag}", debrief_model=synth).run(
                "What is 12 times 3?"
            )
            assert result.success, result
            rich = await result.debrief_rich()
            assert rich is not None and rich.synthesized

    assert len(llm.requests[model]) == 2 and synth not in llm.requests  # the run's two steps
    assert [h["authorization"] for h in llm.request_headers[model]] == ["Bearer test"] * 2
    [sent] = local.request_headers[synth]
    assert sent["authorization"] == f"Bearer k-{tag}" and sent["x-pool"] == "gpu"


def test_a_model_goes_to_the_endpoint_naming_it_exactly_else_the_longest_match() -> None:
    patterns = ["claude-*", "claude-3-*", "gpt-4o", "*"]
    assert endpoint_for("claude-3-haiku", patterns) == "claude-3-*"
    assert endpoint_for("claude-sonnet-4-5", patterns) == "claude-*"
    assert endpoint_for("gpt-4o", patterns) == "gpt-4o"
    assert endpoint_for("gpt-4o-mini", patterns) == "*"
    assert endpoint_for("gpt-4o-mini", ["claude-*"]) is None
    assert endpoint_for("Claude-3", ["claude-*"]) is None  # names are case-sensitive


def test_an_endpoint_s_key_variable_must_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    endpoint = ModelEndpoint(base_url="https://api.example.com/v1", api_key_env="NO_SUCH_KEY_VAR")
    with pytest.raises(ValueError, match=r"\['c-\*'\]: environment variable NO_SUCH_KEY_VAR"):
        endpoint.api_key("c-*")
    for bad in ({"base_url": "ftp://x"}, {"base_url": "https://x", "api_key_env": "1X"},
                {"base_url": "https://x", "headers": {"Host": "y"}},
                {"base_url": "https://x", "api_key": "sk-inline"}):  # fmt: skip
        with pytest.raises(ValueError):
            ModelEndpoint.model_validate(bad)


async def test_an_unknown_model_that_refuses_a_parameter_succeeds_after_one_rejection(
    harness: Harness, llm: ScriptedLLM
) -> None:
    """The table does not know this model; its endpoint refuses `temperature`. The first
    request is refused, the call goes again without it, and the worker remembers."""
    model = llm.endpoint(
        f"acme-chat-{uuid.uuid4().hex[:6]}", Endpoint(unsupported_parameters={"temperature": ""})
    )
    llm.script(model, agent_model)
    agent = harness.agent(model, agent_id=f"acme-{uuid.uuid4().hex[:6]}", temperature=0.3)

    result = await agent.run("What is 12 times 3?")
    assert result.success and result.terminated_by == "final_answer_tool"
    reply = await agent.chat("What did you find?")  # chat sends a temperature too
    assert reply.message == CHAT_REPLY

    assert len(llm.rejected[model]) == 1
    assert llm.rejected[model][0]["error"]["param"] == "temperature"
    assert "temperature" in llm.requests[model][0]
    assert all("temperature" not in r for r in llm.requests[model][1:])
    left_out = REGISTRY.get_sample_value(
        "reactive_temporal_llm_adaptations_total", {"model": model, "kind": "parameter_left_out"}
    )
    assert left_out == 1  # once: the worker remembers


@tool
async def fetch_page(page: int) -> str:
    """Fetch one page of the report (about 6 KB of text)."""
    line = f"Page {page}: revenue by region, units, notes and the auditor's remarks. "
    return (line * 90)[:6_000]


def forty_pages(pages: int) -> Any:
    def respond(request: dict[str, Any]) -> Step:
        if _system(request) == SYNTHESIS_SYSTEM_PROMPT:
            return Reply(json.dumps(SYNTHESIS))
        results = [m["content"] for m in request["messages"] if m["role"] == "tool"]
        # the latest observation is always shown whole: it says which page comes next
        done = int(re.match(r"Page (\d+):", results[-1])[1]) if results else 0  # type: ignore[index]
        if done < pages:
            return Reply(f"Reading page {done + 1}.", [call("fetch_page", page=done + 1)])
        return Reply(
            None,
            [call("final-answer", output=f"Read {pages} pages.", format="text",
                  summary="Read them all.")],
        )  # fmt: skip

    return respond


async def test_a_long_run_fits_an_8k_window_and_keeps_every_observation_whole(
    client: Client, settings: Settings, llm: ScriptedLLM
) -> None:
    """40 iterations of 6 KB observations on an 8k-context endpoint the worker knows nothing
    about: the first overflow teaches it the window, older observations are compacted in the
    requests, the run completes, and Postgres keeps every observation whole."""
    model = llm.endpoint(f"local-8k-{uuid.uuid4().hex[:6]}", Endpoint(context_tokens=8_192))
    llm.script(model, forty_pages(40))
    async with running_worker(client, settings, extra_tools=[fetch_page]) as harness:
        agent = harness.agent(
            model, agent_id=f"reader-{uuid.uuid4().hex[:6]}", max_iterations=45,
            tools=["fetch_page"],
        )  # fmt: skip
        result = await agent.run("Read the 40 pages of the report, one at a time.")
        assert result.success, result.error
        assert result.terminated_by == "final_answer_tool"
        assert result.metadata.iterations == 41
        async with harness.store.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT content FROM run_messages WHERE run_id = %s AND role = 'tool'"
                " AND name = 'fetch_page' ORDER BY seq",
                (result.run_id,),
            )
            observations = [r[0] for r in await cur.fetchall()]
            cur = await conn.execute(
                "SELECT count(*) FROM run_context WHERE run_id = %s AND plan IS NOT NULL",
                (result.run_id,),
            )
            plans = (await cur.fetchone() or [0])[0]
    assert len(observations) == 40
    assert all(len(o) == 6_000 and o.startswith(f"Page {i}:") for i, o in
               enumerate(observations, start=1))  # fmt: skip
    sent = [r for r in llm.requests[model] if _system(r) != SYNTHESIS_SYSTEM_PROMPT]
    refused = llm.rejected[model]
    assert 1 <= len(refused) <= 3  # learned the window from the first refusal(s)
    assert all(b["error"]["code"] == "context_length_exceeded" for b in refused)
    served = len(sent) - len(refused)
    assert served == 41
    assert plans >= 1  # compaction was recorded for the steps that used it


async def test_a_retried_or_rerun_step_sends_exactly_what_was_sent(harness: Harness) -> None:
    """The plan a step compacted with is recorded before its request: the same step run again
    (a retry, or a rerun from an earlier point) shows the model the same view, even after the
    window it knows of has changed."""
    from activities.llm_context import StepContexts
    from reactive_temporal.capabilities import capabilities_for
    from reactive_temporal.contracts.run import Message, SeqMessage, ToolCall

    run_id = f"run-context-{uuid.uuid4().hex[:8]}"
    transcript = [
        SeqMessage(seq=0, message=Message(role="system", content="You read pages.")),
        SeqMessage(seq=1, message=Message(role="user", content="Read 12 pages.")),
    ]
    for i in range(12):
        c = ToolCall(id=f"c{i}", name="fetch_page", arguments=json.dumps({"page": i}))
        transcript += [
            SeqMessage(seq=2 + 2 * i, message=Message(role="assistant", tool_calls=[c])),
            SeqMessage(
                seq=3 + 2 * i,
                message=Message(role="tool", content=f"page {i} " * 700, tool_call_id=c.id),
            ),
        ]
    contexts = StepContexts(harness.store)
    small = capabilities_for("m", context_tokens=8_192)
    first = await contexts.prepare(run_id, 26, transcript, [], small)
    assert first.plan.compacted > 0 and first.estimated <= first.budget
    again = await contexts.prepare(run_id, 26, transcript, [], small)
    assert again.view == first.view
    wider = capabilities_for("m", context_tokens=100_000)  # plans never undo compaction
    assert (await contexts.prepare(run_id, 26, transcript, [], wider)).view == first.view


async def test_a_debrief_fits_a_small_debrief_models_window(
    harness: Harness, llm: ScriptedLLM, model_name: str
) -> None:
    """A long task and answer, a debrief model with an 8k window the worker does not know:
    the synthesis is shortened to fit (after one refusal) and the debrief is still written."""
    answer = "The report says revenue grew in every region. " * 30
    llm.script(model_name, [Reply(None, [call("final-answer", output=answer, format="text")])])
    synth = llm.endpoint(f"small-synth-{uuid.uuid4().hex[:6]}", Endpoint(context_tokens=8_192))
    llm.script(synth, [Reply(json.dumps(SYNTHESIS))], repeat_last=True)
    task = "Summarize this report:\n" + "Revenue by region, units sold, notes. " * 1_500
    result = await harness.agent(model_name, debrief_model=synth).run(task)
    rich = await result.debrief_rich()
    assert rich is not None and rich.synthesized
    assert rich.summary == SYNTHESIS["summary"]
    assert len(llm.rejected[synth]) <= 1  # at most one refusal teaches the window
    sent = llm.requests[synth][-1]["messages"][1]["content"]
    assert "characters left out here" in sent and sent.startswith("Task: Summarize this report")


async def test_with_agent_context_tokens_the_run_compacts_before_any_refusal(
    client: Client, settings: Settings, llm: ScriptedLLM
) -> None:
    """The same long run with AGENT_CONTEXT_TOKENS=8192: estimates keep every request inside
    the window from the start, so the endpoint never refuses one."""
    model = llm.endpoint(f"known-8k-{uuid.uuid4().hex[:6]}", Endpoint(context_tokens=8_192))
    llm.script(model, forty_pages(25))
    known = settings.model_copy(update={"context_tokens": 8_192})
    async with running_worker(client, known, extra_tools=[fetch_page]) as harness:
        agent = harness.agent(
            model, agent_id=f"reader-{uuid.uuid4().hex[:6]}", max_iterations=30,
            tools=["fetch_page"], memory=False,
        )  # fmt: skip
        result = await agent.run("Read the 25 pages of the report, one at a time.")
    assert result.success and result.metadata.iterations == 26, result.error
    assert llm.rejected[model] == []
    assert all(
        r["messages"][1]["content"].startswith("Read the 25 pages") for r in llm.requests[model]
    )
