"""The scripted endpoints answer as real providers do, byte for byte in the error bodies.

Driven with the real openai client over HTTP, so what the client raises here is what the
LLM helper meets against OpenAI, and the bodies are the ones in field-notes.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from reactive_temporal.embedded.scripted_llm import (
    Endpoint,
    Reply,
    ScriptedLLM,
    estimate_request_tokens,
)

MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as llm:
        yield llm


@pytest.fixture(scope="module")
def client(server: ScriptedLLM) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)


def ask(client: openai.OpenAI, model: str, messages: Any = MESSAGES, **params: Any) -> Any:
    """One chat completion, parameters passed as they are (some on purpose wrong)."""
    return client.chat.completions.create(model=model, messages=messages, **params)


def _body(err: pytest.ExceptionInfo[openai.BadRequestError]) -> dict[str, object]:
    assert err.value.status_code == 400
    body = err.value.response.json()
    assert isinstance(body, dict)
    return body


def test_reasoning_model_rejects_max_tokens_with_openais_body(
    server: ScriptedLLM, client: openai.OpenAI
) -> None:
    model = server.endpoint("o4-mini-a1", Endpoint.reasoning_model())
    with pytest.raises(openai.BadRequestError) as err:
        ask(client, model, max_tokens=100)
    assert _body(err) == {
        "error": {
            "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead.",
            "type": "invalid_request_error",
            "param": "max_tokens",
            "code": "unsupported_parameter",
        }
    }
    assert err.value.code == "unsupported_parameter" and err.value.param == "max_tokens"


def test_reasoning_model_rejects_a_non_default_temperature(
    server: ScriptedLLM, client: openai.OpenAI
) -> None:
    model = server.endpoint("o3-a1", Endpoint.reasoning_model())
    with pytest.raises(openai.BadRequestError) as err:
        ask(client, model, temperature=0.7)
    assert _body(err) == {
        "error": {
            "message": "Unsupported value: 'temperature' does not support 0.7 with this model. "
            "Only the default (1) value is supported.",
            "type": "invalid_request_error",
            "param": "temperature",
            "code": "unsupported_value",
        }
    }
    with pytest.raises(openai.BadRequestError) as err:
        ask(client, model, top_p=0.5)
    assert err.value.param == "top_p" and err.value.code == "unsupported_value"
    # the default value is accepted, as OpenAI accepts it
    ask(client, model, temperature=1)


def test_reasoning_model_serves_its_own_parameters_and_reports_reasoning_tokens(
    server: ScriptedLLM, client: openai.OpenAI
) -> None:
    model = server.endpoint("gpt-5-a1", Endpoint.reasoning_model(reasoning_tokens=128))
    server.script(model, [Reply("four", usage=(10, 5))])
    response = ask(
        client,
        model,
        max_completion_tokens=500,
        reasoning_effort="low",
    )
    assert response.choices[0].message.content == "four"
    usage = response.usage
    assert usage is not None and usage.completion_tokens_details is not None
    assert usage.completion_tokens_details.reasoning_tokens == 128
    assert usage.completion_tokens == 5 + 128  # reasoning is billed as output
    assert usage.total_tokens == 10 + 5 + 128
    with pytest.raises(openai.BadRequestError) as err:
        ask(
            client,
            model,
            reasoning_effort="extreme",
        )
    assert _body(err)["error"] == {
        "message": "Unsupported value: 'reasoning_effort' does not support 'extreme' with this "
        "model. Supported values are: 'minimal', 'low', 'medium', and 'high'.",
        "type": "invalid_request_error",
        "param": "reasoning_effort",
        "code": "unsupported_value",
    }


def test_an_unknown_model_rejects_a_named_parameter_and_serves_without_it(
    server: ScriptedLLM, client: openai.OpenAI
) -> None:
    model = server.endpoint(
        "acme-chat-a1", Endpoint(unsupported_parameters={"parallel_tool_calls": ""})
    )
    server.script(model, [Reply("served")])
    with pytest.raises(openai.BadRequestError) as err:
        ask(
            client,
            model,
            parallel_tool_calls=False,
        )
    assert _body(err)["error"] == {
        "message": "Unsupported parameter: 'parallel_tool_calls' is not supported with this model.",
        "type": "invalid_request_error",
        "param": "parallel_tool_calls",
        "code": "unsupported_parameter",
    }
    response = ask(
        client,
        model,
    )
    assert response.choices[0].message.content == "served"
    assert len(server.requests[model]) == 2 and len(server.rejected[model]) == 1


def test_an_endpoint_can_refuse_the_older_unrecognized_argument_way(
    server: ScriptedLLM, client: openai.OpenAI
) -> None:
    model = server.endpoint("local-llama-a1", Endpoint(unrecognized=("reasoning_effort",)))
    with pytest.raises(openai.BadRequestError) as err:
        ask(
            client,
            model,
            reasoning_effort="low",
        )
    assert _body(err)["error"] == {
        "message": "Unrecognized request argument supplied: reasoning_effort",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }


def test_a_context_window_rejects_longer_requests_with_context_length_exceeded(
    server: ScriptedLLM, client: openai.OpenAI
) -> None:
    model = server.endpoint("small-8k-a1", Endpoint(context_tokens=8192))
    server.script(model, [Reply("ok")], repeat_last=True)
    long = [{"role": "user", "content": "x" * 40_000}]
    prompt = estimate_request_tokens({"messages": long})
    assert prompt > 8192
    with pytest.raises(openai.BadRequestError) as err:
        ask(client, model, messages=long)
    assert _body(err)["error"] == {
        "message": f"This model's maximum context length is 8192 tokens. However, your "
        f"messages resulted in {prompt} tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
    # the messages fit, the output they ask for does not
    fits = [{"role": "user", "content": "x" * 28_000}]
    with pytest.raises(openai.BadRequestError) as err:
        ask(client, model, messages=fits, max_tokens=2000)
    assert err.value.code == "context_length_exceeded"
    in_messages = estimate_request_tokens({"messages": fits})
    assert f"({in_messages} in the messages, 2000 in the completion)" in err.value.message
    # within the window it is served, and reports prompt tokens as its window counts them
    response = ask(client, model, messages=fits)
    assert response.usage is not None
    assert response.usage.prompt_tokens == estimate_request_tokens({"messages": fits})


def test_a_context_length_that_cuts_answers_the_oldest_messages_dropped_and_counts_the_rest(
    server: ScriptedLLM, client: openai.OpenAI
) -> None:
    """Ollama at its `num_ctx`, LM Studio with its overflow policy: no 400; the oldest
    messages after the system prompt dropped, `prompt_tokens` what was left."""
    model = server.endpoint("cuts-1k-a1", Endpoint(truncates_to=1_024))
    seen: list[list[dict[str, Any]]] = []

    def respond(request: dict[str, Any]) -> Reply:
        seen.append(request["messages"])
        return Reply("ok")

    server.script(model, respond)
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "The task: " + "t" * 3_000},
        {"role": "assistant", "content": "a" * 2_000},
        {"role": "user", "content": "the latest"},
    ]
    response = ask(client, model, messages=messages)
    assert response.choices[0].message.content == "ok"
    assert [m["content"][:10] for m in seen[-1]] == ["Be brief.", "a" * 10, "the latest"]
    assert response.usage is not None
    assert response.usage.prompt_tokens == estimate_request_tokens({"messages": seen[-1]})
    assert server.requests[model][-1]["messages"] == messages  # the request as it was sent
    # the last message is kept whatever its length, and the count stops at the window
    response = ask(client, model, messages=[{"role": "user", "content": "x" * 40_000}])
    assert response.usage is not None and response.usage.prompt_tokens == 1_024
    # what fits is served whole
    response = ask(client, model)
    assert seen[-1] == MESSAGES
    assert response.usage is not None
    assert response.usage.prompt_tokens == estimate_request_tokens({"messages": MESSAGES})


def test_models_without_an_endpoint_behave_as_before(
    server: ScriptedLLM, client: openai.OpenAI
) -> None:
    model = server.script("plain-a1", [Reply("hi")])
    response = ask(
        client,
        model,
        max_tokens=10,
        temperature=0.3,
    )
    assert response.choices[0].message.content == "hi"
    assert response.usage is not None and response.usage.completion_tokens_details is None


def test_gemini_refuses_a_tool_schema_outside_its_subset_in_its_own_words(
    server: ScriptedLLM, client: openai.OpenAI
) -> None:
    """Each keyword it has no field for, each type list, each number in an enum, named where
    it is, in one message; the body a one-element list."""
    model = server.endpoint("gemini-2.5-flash-a1", Endpoint(schema_subset=True))
    server.script(model, [Reply("served")])
    parameters = {
        "type": "object",
        "$schema": "http://json-schema.org/draft-07/schema#",
        "properties": {
            "a": {"type": ["string", "null"]},
            "b": {"anyOf": [{"const": "x"}, {"type": "integer", "enum": [1, 2]}]},
        },
        "additionalProperties": False,
    }
    tools: Any = [{"type": "function", "function": {"name": "f", "parameters": parameters}}]
    with pytest.raises(openai.BadRequestError) as err:
        ask(client, model, tools=tools)
    [wrapped] = err.value.response.json()
    at = "tools[0].function_declarations[0].parameters"
    assert wrapped["error"]["status"] == "INVALID_ARGUMENT"
    assert wrapped["error"]["message"].split("\n") == [
        f"Invalid JSON payload received. Unknown name \"$schema\" at '{at}': Cannot find field.",
        f"Invalid JSON payload received. Unknown name \"additionalProperties\" at '{at}': Cannot "
        "find field.",
        f"Invalid JSON payload received. Unknown name \"type\" at '{at}.properties[0].value': "
        "Proto field is not repeating, cannot start list.",
        f'Invalid JSON payload received. Unknown name "const" at \'{at}.properties[1].value'
        ".any_of[0]': Cannot find field.",
        f"Invalid value at '{at}.properties[1].value.any_of[1].enum[0]' (TYPE_STRING), 1",
        f"Invalid value at '{at}.properties[1].value.any_of[1].enum[1]' (TYPE_STRING), 2",
    ]
    subset = {"type": "object", "properties": {"a": {"type": "string", "nullable": True}}}
    tools[0]["function"]["parameters"] = subset
    assert ask(client, model, tools=tools).choices[0].message.content == "served"


def test_gemini_refuses_parameters_of_no_properties_in_its_own_words(
    server: ScriptedLLM, client: openai.OpenAI
) -> None:
    """Once the schemas parse, an object with no properties is refused, `{}` or none alike,
    one line each; a function without `parameters` is taken."""
    model = server.endpoint("gemini-2.5-flash-a2", Endpoint(schema_subset=True))
    server.script(model, [Reply("served")])
    written = [
        {"type": "object", "properties": {}},
        {"type": "object", "properties": {"q": {"type": "string"}}},
        {"type": "object"},
    ]
    tools: Any = [
        {"type": "function", "function": {"name": f"f{i}", "parameters": p}}
        for i, p in enumerate(written)
    ]
    with pytest.raises(openai.BadRequestError) as err:
        ask(client, model, tools=tools)
    [wrapped] = err.value.response.json()
    assert wrapped["error"]["status"] == "INVALID_ARGUMENT"
    assert wrapped["error"]["message"] == "".join(
        f"* GenerateContentRequest.tools[0].function_declarations[{i}].parameters.properties: "
        "should be non-empty for OBJECT type\n"
        for i in (0, 2)
    )
    for i in (0, 2):
        del tools[i]["function"]["parameters"]
    assert ask(client, model, tools=tools).choices[0].message.content == "served"
