"""The model capability table, request parameters, and learning from a provider's 400."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from reactive_temporal.capabilities import (
    DEFAULT_CONTEXT_TOKENS,
    REASONING_ROOM_TOKENS,
    ModelCapabilities,
    WantedParams,
    capabilities_for,
    request_params,
)
from reactive_temporal.config import Settings, settings_error_message
from reactive_temporal.embedded.scripted_llm import Endpoint, Reply, ScriptedLLM
from reactive_temporal.model_quirks import (
    NINE_CHAR_CALL_IDS,
    STRICT_ROLES,
    THINKING_OFF_UNSTREAMED,
    THINKING_SENT_BACK,
    TOOL_SCHEMA_SUBSET,
    TOOLS_IN_PROMPT,
    ContextOverflow,
    ModelQuirks,
    ParameterRejection,
    error_message,
    read_context_overflow,
    read_rejection,
    read_shape_refusal,
    read_stream_refusal,
)

WANTED = WantedParams(max_output_tokens=1024, temperature=0.7, reasoning_effort="low")


@pytest.mark.parametrize(
    "model",
    ["o1", "o3", "o3-mini", "o4-mini", "o4-mini-2025-04-16", "gpt-5", "gpt-5-mini", "gpt-5.1",
     "openai/o3", "azure/gpt-5-nano", "O3-MINI"],
)  # fmt: skip
def test_reasoning_families_get_max_completion_tokens_and_no_sampling(model: str) -> None:
    caps = capabilities_for(model)
    assert caps.reasoning
    assert request_params(caps, WANTED) == {
        "max_completion_tokens": 1024 + REASONING_ROOM_TOKENS,
        "reasoning_effort": "low",
    }


@pytest.mark.parametrize(
    "model", ["gpt-4o", "gpt-4o-mini-2024-07-18", "gpt-4.1", "gpt-5-chat-latest", "claude-sonnet-4"]
)
def test_chat_families_get_max_tokens_and_sampling_but_no_reasoning_effort(model: str) -> None:
    caps = capabilities_for(model)
    assert not caps.reasoning
    assert request_params(caps, WANTED) == {"max_tokens": 1024, "temperature": 0.7}


def test_the_oldest_reasoning_models_take_no_reasoning_effort() -> None:
    assert request_params(capabilities_for("o1-mini"), WANTED) == {
        "max_completion_tokens": 1024 + REASONING_ROOM_TOKENS
    }


def test_gemini_thinking_models_take_reasoning_effort_and_sampling() -> None:
    assert request_params(capabilities_for("gemini-2.5-flash"), WANTED) == {
        "max_tokens": 1024,
        "temperature": 0.7,
        "reasoning_effort": "low",
    }


def test_context_windows_per_family_and_a_modest_default() -> None:
    assert capabilities_for("gpt-4o-mini").context_tokens == 128_000
    assert capabilities_for("o4-mini").context_tokens == 200_000
    assert capabilities_for("gpt-5").context_tokens == 400_000
    assert capabilities_for("gpt-4.1-mini").context_tokens == 1_047_576
    assert capabilities_for("gpt-4").context_tokens == 8_192
    assert capabilities_for("llama3.1:8b").context_tokens == DEFAULT_CONTEXT_TOKENS


def test_output_is_capped_at_what_the_model_can_produce() -> None:
    params = request_params(capabilities_for("gpt-4o"), WantedParams(max_output_tokens=100_000))
    assert params == {"max_tokens": 16_384}


def test_nothing_wanted_sends_nothing() -> None:
    assert request_params(capabilities_for("o3"), WantedParams()) == {}
    assert request_params(capabilities_for("gpt-4o"), WantedParams()) == {}


def test_an_override_sets_only_the_fields_it_names_and_covers_dated_variants() -> None:
    overrides = {
        "my-deployment": ModelCapabilities.model_validate({"reasoning": True}),
        "gpt-4o": ModelCapabilities.model_validate({"context_tokens": 50_000}),
    }
    mine = capabilities_for("my-deployment", overrides)
    assert mine.reasoning and mine.context_tokens == DEFAULT_CONTEXT_TOKENS
    dated = capabilities_for("gpt-4o-2024-08-06", overrides)
    assert dated.context_tokens == 50_000 and dated.max_output_tokens == 16_384


def test_agent_context_tokens_overrides_the_table_and_a_model_override_wins_over_it() -> None:
    overrides = {"big": ModelCapabilities.model_validate({"context_tokens": 64_000})}
    assert capabilities_for("gpt-4o", overrides, context_tokens=8_192).context_tokens == 8_192
    assert capabilities_for("big", overrides, context_tokens=8_192).context_tokens == 64_000


def test_settings_read_capabilities_and_context_tokens_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(
        "AGENT_MODEL_CAPABILITIES",
        '{"azure-o3": {"reasoning": true, "context_tokens": 200000}, "local": {"omit": ["top_p"]}}',
    )
    monkeypatch.setenv("AGENT_CONTEXT_TOKENS", "16384")
    settings = Settings()
    assert settings.context_tokens == 16_384
    caps = capabilities_for(
        "azure-o3", settings.model_capabilities, context_tokens=settings.context_tokens
    )
    assert caps.reasoning and caps.context_tokens == 200_000
    local = capabilities_for(
        "local", settings.model_capabilities, context_tokens=settings.context_tokens
    )
    assert local.context_tokens == 16_384
    assert request_params(local, WantedParams(top_p=0.9, temperature=0.1)) == {"temperature": 0.1}


def test_bad_capability_settings_name_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_MODEL_CAPABILITIES", "{not json")
    with pytest.raises(Exception) as err:
        Settings()
    assert "AGENT_MODEL_CAPABILITIES" in settings_error_message(err.value)
    monkeypatch.setenv("AGENT_MODEL_CAPABILITIES", '{"m": {"context_tokens": 10}}')
    with pytest.raises(Exception, match="context_tokens"):
        Settings()
    monkeypatch.delenv("AGENT_MODEL_CAPABILITIES")
    monkeypatch.setenv("AGENT_CONTEXT_TOKENS", "lots")
    with pytest.raises(Exception, match="AGENT_CONTEXT_TOKENS"):
        Settings()


# -- reading a 400 -----------------------------------------------------------------------------

OPENAI_MAX_TOKENS = {
    "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
    "Use 'max_completion_tokens' instead.",
    "type": "invalid_request_error",
    "param": "max_tokens",
    "code": "unsupported_parameter",
}
OPENAI_TEMPERATURE = {
    "message": "Unsupported value: 'temperature' does not support 0.7 with this model. "
    "Only the default (1) value is supported.",
    "type": "invalid_request_error",
    "param": "temperature",
    "code": "unsupported_value",
}
SENT = {"model", "messages", "tools", "max_tokens", "temperature", "reasoning_effort", "top_p"}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (OPENAI_MAX_TOKENS, ParameterRejection("max_tokens", "max_completion_tokens")),
        ({"error": OPENAI_MAX_TOKENS}, ParameterRejection("max_tokens", "max_completion_tokens")),
        (OPENAI_TEMPERATURE, ParameterRejection("temperature")),
        (
            {"message": "Unrecognized request argument supplied: reasoning_effort",
             "type": "invalid_request_error", "param": None, "code": None},
            ParameterRejection("reasoning_effort"),
        ),
        (  # vLLM with strict request models
            {"object": "error", "type": "BadRequestError", "code": 400,
             "message": "[{'type': 'extra_forbidden', 'loc': ('body', 'reasoning_effort'), "
                        "'msg': 'Extra inputs are not permitted'}]"},
            ParameterRejection("reasoning_effort"),
        ),
        (  # LiteLLM proxy
            {"message": "litellm.UnsupportedParamsError: ollama does not support parameters: "
                        "['top_p'], for model=llama3. To drop these, set "
                        "`litellm.drop_params=True`",
             "type": None, "param": None, "code": "400"},
            ParameterRejection("top_p"),
        ),
        (  # Gemini's OpenAI-compatible endpoint
            [{"error": {"code": 400, "status": "INVALID_ARGUMENT",
                        "message": 'Invalid JSON payload received. Unknown name "top_p": '
                                   "Cannot find field."}}],
            ParameterRejection("top_p"),
        ),
        ({"message": 'Invalid JSON payload received. Unknown name "top_p": Cannot find field.'},
         ParameterRejection("top_p")),
        (  # Gemini on a tool schema's keyword that is also a parameter's name: not one
            [{"error": {"code": 400, "status": "INVALID_ARGUMENT",
                        "message": 'Invalid JSON payload received. Unknown name "temperature" at '
                                   "'tools[0].function_declarations[0].parameters.properties[0]"
                                   ".value': Cannot find field."}}],
            None,
        ),
        (  # ... among them, the one at the top: that one
            [{"error": {"code": 400, "status": "INVALID_ARGUMENT",
                        "message": 'Invalid JSON payload received. Unknown name "max_tokens" at '
                                   "'tools[0].function_declarations[1].parameters': Cannot find "
                                   'field.\nInvalid JSON payload received. Unknown name "top_p": '
                                   "Cannot find field."}}],
            ParameterRejection("top_p"),
        ),
        (  # a parameter this request did not send is not learned
            {"message": "Unsupported parameter: 'seed' is not supported with this model.",
             "param": "seed", "code": "unsupported_parameter"},
            None,
        ),
        (  # the call cannot do without these
            {"message": "Invalid 'messages': empty array.", "param": "messages",
             "code": "empty_array"},
            None,
        ),
        ({"message": "Invalid type for 'tools[0].function.name'", "param": "tools"}, None),
        ({"message": "Something else went wrong"}, None),
        ("plain text body", None),
        (None, None),
    ],
)  # fmt: skip
def test_read_rejection(body: object, expected: ParameterRejection | None) -> None:
    assert read_rejection(body, SENT) == expected


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"message": "This model's maximum context length is 8192 tokens. However, your "
                        "messages resulted in 9000 tokens. Please reduce the length of the "
                        "messages.",
             "type": "invalid_request_error", "param": "messages",
             "code": "context_length_exceeded"},
            ContextOverflow(8192),
        ),
        (  # vLLM: the same words, no code
            {"object": "error", "type": "BadRequestError", "param": None, "code": 400,
             "message": "This model's maximum context length is 4096 tokens. However, you "
                        "requested 5000 tokens (4000 in the messages, 1000 in the completion)."},
            ContextOverflow(4096),
        ),
        (  # Anthropic
            {"type": "invalid_request_error",
             "message": "prompt is too long: 210000 tokens > 200000 maximum"},
            ContextOverflow(200000),
        ),
        (  # Gemini
            {"message": "The input token count (1200000) exceeds the maximum number of tokens "
                        "allowed (1048576)."},
            ContextOverflow(1048576),
        ),
        ({"code": "context_length_exceeded", "message": "too long"}, ContextOverflow(None)),
        (OPENAI_TEMPERATURE, None),
        ({"message": "Invalid 'messages[2].content'"}, None),
    ],
)  # fmt: skip
def test_read_context_overflow(body: object, expected: ContextOverflow | None) -> None:
    assert read_context_overflow(body) == expected


def test_quirks_learned_for_a_model_apply_to_every_later_call() -> None:
    quirks = ModelQuirks()
    caps = capabilities_for("acme-reasoner")
    assert request_params(quirks.apply("acme-reasoner", caps), WANTED) == {
        "max_tokens": 1024,
        "temperature": 0.7,
    }
    quirks.learn("acme-reasoner", ParameterRejection("max_tokens", "max_completion_tokens"))
    quirks.learn("acme-reasoner", ParameterRejection("temperature"))
    quirks.learn_context("acme-reasoner", 8_192)
    learned = quirks.apply("acme-reasoner", caps)
    assert request_params(learned, WANTED) == {"max_completion_tokens": 1024}  # renamed only
    assert learned.context_tokens == 8_192
    assert quirks.apply("other-model", caps) is caps  # per model
    assert quirks.learned() == {
        "acme-reasoner": ["omit temperature", "max_tokens → max_completion_tokens", "context 8192"]
    }


@pytest.mark.parametrize(
    "model",
    ["mistral-large-latest", "mistralai/Mistral-7B-Instruct-v0.3", "open-mistral-nemo",
     "mistral-small3.1:24b", "Mixtral-8x7B-Instruct-v0.1", "codestral-latest",
     "devstral-small-2505", "magistral-medium", "ministral-8b-latest", "pixtral-12b"],
)  # fmt: skip
def test_mistral_families_want_strict_roles_and_nine_character_ids(model: str) -> None:
    caps = capabilities_for(model)
    assert (caps.strict_roles, caps.nine_char_call_ids) == (True, True)


@pytest.mark.parametrize(
    "model",
    ["deepseek-r1:14b", "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "deepseek-reasoner",
     "qwq:32b", "Qwen/QwQ-32B", "qwen3:8b", "Qwen/Qwen3-30B-A3B-Thinking-2507", "gpt-oss:20b",
     "openai/gpt-oss-120b", "phi4-reasoning", "phi-4-mini-reasoning", "magistral-small"],
)  # fmt: skip
def test_models_that_think_first_get_room_to_think_and_keep_their_parameters(model: str) -> None:
    caps = capabilities_for(model)
    assert caps.thinks and not caps.reasoning
    params = request_params(caps, WantedParams(max_output_tokens=1024, temperature=0.6))
    assert params == {"max_tokens": 1024 + REASONING_ROOM_TOKENS, "temperature": 0.6}


@pytest.mark.parametrize(
    "model", ["qwen3-coder:30b", "Qwen/Qwen3-235B-A22B-Instruct-2507", "qwen2.5", "llama3.1"]
)
def test_models_that_answer_at_once_get_no_room(model: str) -> None:
    assert not capabilities_for(model).thinks


@pytest.mark.parametrize(
    ("model", "sent_back"),
    [("deepseek-reasoner", True), ("deepseek-v4-flash", True), ("deepseek/deepseek-v4-pro", True),
     ("kimi-k2-thinking", True), ("kimi-k2.5", True), ("Pro/moonshotai/Kimi-K2.5", True),
     ("deepseek-chat", False), ("deepseek-r1:14b", False), ("kimi-k2-0905-preview", False),
     ("qwen3:8b", False), ("gpt-oss:20b", False), ("o3", False)],
)  # fmt: skip
def test_only_apis_that_want_thinking_back_get_it(model: str, sent_back: bool) -> None:
    """DeepSeek's and Moonshot's thinking modes refuse turns without their thinking; every
    other model is sent its answers only (its makers' advice: old thoughts fill the window)."""
    assert capabilities_for(model).thinking_sent_back is sent_back


@pytest.mark.parametrize(
    ("model", "subset"),
    [("gemini-2.5-flash", True), ("gemini-1.5-pro", True), ("google/gemini-3-pro-preview", True),
     ("gpt-4o", False), ("claude-sonnet-4", False), ("qwen3:8b", False)],
)  # fmt: skip
def test_gemini_gets_its_tool_schemas_in_its_subset(model: str, subset: bool) -> None:
    assert capabilities_for(model).tool_schema_subset is subset


def test_the_schema_subset_is_set_per_model_in_the_configuration(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A gateway's name for Gemini, said from the start."""
    monkeypatch.setenv("AGENT_MODEL_CAPABILITIES", '{"house-llm": {"tool_schema_subset": true}}')
    settings = Settings()
    assert capabilities_for("house-llm", settings.model_capabilities).tool_schema_subset
    assert not capabilities_for("other", settings.model_capabilities).tool_schema_subset


def test_a_model_seen_thinking_is_learned_as_one() -> None:
    quirks = ModelQuirks()
    caps = capabilities_for("my-served-thinker")
    quirks.learn_thinks("my-served-thinker")
    learned = quirks.apply("my-served-thinker", caps)
    assert learned.thinks and request_params(learned, WantedParams(max_output_tokens=800)) == {
        "max_tokens": 800 + REASONING_ROOM_TOKENS
    }
    assert quirks.learned() == {"my-served-thinker": ["thinks"]}


@pytest.mark.parametrize(
    ("model", "read"),
    [("gpt-4o", False), ("o3", False), ("claude-sonnet-4", False), ("gemini-2.5-pro", False),
     ("llama3.1:8b", True), ("qwen3:8b", True), ("my-own-model", True)],
)  # fmt: skip
def test_calls_are_read_from_text_only_for_endpoints_that_may_not_parse_them(
    model: str, read: bool
) -> None:
    """A hosted provider's endpoint parses its models' calls: a block in a reply is quoted."""
    assert capabilities_for(model).calls_in_text is read


@pytest.mark.parametrize("model", ["gpt-4o", "claude-sonnet-4", "llama3.1:8b", "qwen2.5"])
def test_other_families_take_openai_s_shape(model: str) -> None:
    caps = capabilities_for(model)
    assert (caps.strict_roles, caps.nine_char_call_ids) == (False, False)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (  # vLLM, a strict Jinja template raising
            {"object": "error", "type": "BadRequestError", "param": None, "code": 400,
             "message": "After the optional system message, conversation roles must alternate "
                        "user/assistant/user/assistant/..."},
            STRICT_ROLES,
        ),
        (  # Mistral's API (mistral-common's order check)
            {"object": "error", "message": "Unexpected role 'user' after role 'tool'",
             "type": "invalid_request_message_order", "param": None, "code": "3230"},
            STRICT_ROLES,
        ),
        (  # Mistral-7B-Instruct-v0.3's template under vLLM
            {"object": "error", "type": "BadRequestError", "param": None, "code": 400,
             "message": "Tool call IDs should be alphanumeric strings with length 9!"},
            NINE_CHAR_CALL_IDS,
        ),
        (  # mistral-common's validator
            {"object": "error", "type": "invalid_request_error", "param": None, "code": None,
             "message": "Tool call id was call_4d1a2b3c4d5e6f but must be a-z, A-Z, 0-9, with "
                        "a length of 9."},
            NINE_CHAR_CALL_IDS,
        ),
        (  # Alibaba Cloud Model Studio (DashScope), Qwen3 not streamed
            {"error": {"code": "invalid_parameter_error", "param": None, "type":
                       "invalid_request_error", "message": "parameter.enable_thinking must be "
                       "set to false for non-streaming calls"}},
            THINKING_OFF_UNSTREAMED,
        ),
        (  # the same, as its Chinese console's requests are answered
            {"error": {"code": "invalid_parameter_error", "param": None, "type":
                       "invalid_request_error", "message": "parameter.enable_thinking必须设置"
                       "为false才能进行非流式调用"}},
            THINKING_OFF_UNSTREAMED,
        ),
        (  # DeepSeek's API, the V4 models in thinking mode
            {"error": {"message": "The `reasoning_content` in the thinking mode must be passed "
                       "back to the API.", "type": "invalid_request_error", "param": None,
                       "code": "invalid_request_error"}},
            THINKING_SENT_BACK,
        ),
        (  # DeepSeek's API, deepseek-reasoner (V3.2)
            {"error": {"message": "Missing `reasoning_content` field in the assistant message at "
                       "message index 2. For more information, please refer to https://api-docs"
                       ".deepseek.com/guides/thinking_mode#tool-calls", "type":
                       "invalid_request_error", "param": None, "code": "invalid_request_error"}},
            THINKING_SENT_BACK,
        ),
        (  # Moonshot's API, Kimi K2.5 (and SiliconFlow serving it)
            {"error": {"message": "thinking is enabled but reasoning_content is missing in "
                       "assistant tool call message at index 7", "type": "invalid_request_error"}},
            THINKING_SENT_BACK,
        ),
        (  # Gemini's OpenAI-compatible endpoint, a zod-written MCP server's schema
            [{"error": {"code": 400, "status": "INVALID_ARGUMENT", "message":
                        'Invalid JSON payload received. Unknown name "additionalProperties" at '
                        "'tools[0].function_declarations[0].parameters': Cannot find field.\n"
                        'Invalid JSON payload received. Unknown name "$schema" at '
                        "'tools[0].function_declarations[1].parameters': Cannot find field."}}],
            TOOL_SCHEMA_SUBSET,
        ),
        (  # ... numbers in an enum
            {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message":
                       "Invalid value at 'tools[0].function_declarations[10].parameters"
                       ".properties[0].value.enum[0]' (TYPE_STRING), 500"}},
            TOOL_SCHEMA_SUBSET,
        ),
        (  # ... a type list
            {"error": {"code": 400, "message": 'Invalid JSON payload received. Unknown name '
                       "\"type\" at 'tools[0].function_declarations[4].parameters.properties[1]"
                       ".value': Proto field is not repeating, cannot start list."}},
            TOOL_SCHEMA_SUBSET,
        ),
        (  # Gemini's own checks
            {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message":
                       "* GenerateContentRequest.tools[0].function_declarations[3].parameters"
                       ".required[0]: property is not defined\n"}},
            TOOL_SCHEMA_SUBSET,
        ),
        (  # Vertex AI
            [{"error": {"code": 400, "status": "INVALID_ARGUMENT", "message":
                        "Unable to submit request because `edit` functionDeclaration "
                        "`parameters.edits` schema specified other fields alongside any_of. "
                        "When using any_of, it must be the only field set."}}],
            TOOL_SCHEMA_SUBSET,
        ),
        (  # a parameter Gemini does not know is not a schema's
            [{"error": {"code": 400, "status": "INVALID_ARGUMENT", "message":
                        'Invalid JSON payload received. Unknown name "reasoning": Cannot find '
                        "field."}}],
            None,
        ),
        (  # Ollama's /v1, a model whose template has no tools
            {"error": {"message": "registry.ollama.ai/library/gemma3:4b does not support tools",
                       "type": "api_error", "param": None, "code": None}},
            TOOLS_IN_PROMPT,
        ),
        (  # Ollama's own API, and its older /v1 (the model's name alone)
            {"error": "registry.ollama.ai/library/deepseek-r1:latest does not support tools"},
            TOOLS_IN_PROMPT,
        ),
        (  # llama.cpp's server started without --jinja
            {"error": {"code": 400, "message": "tools param requires --jinja flag",
                       "type": "invalid_request_error"}},
            TOOLS_IN_PROMPT,
        ),
        (OPENAI_TEMPERATURE, None),
        ({"message": "Invalid 'messages[2].content'"}, None),
        ({"message": "Unrecognized field 'reasoning_content' in messages[1]"}, None),
        ({"message": "enable_thinking is not supported"}, None),
    ],
)  # fmt: skip
def test_read_shape_refusal(body: object, expected: str | None) -> None:
    assert read_shape_refusal(body) == expected


@pytest.mark.parametrize(
    ("body", "expected"),
    [({"error": {"message": "Unrecognized request argument supplied: stream_options",
                 "param": None}}, "stream_options"),
     ({"message": "stream is not supported", "param": "stream"}, "stream"),
     ({"detail": "Unknown field 'stream'"}, "stream"),
     (OPENAI_TEMPERATURE, None)],
)  # fmt: skip
def test_read_stream_refusal(body: object, expected: str | None) -> None:
    """Never learned as parameters to leave out (a call cannot do without them), so read
    apart: the call goes unstreamed, or streamed without asking for the usage chunk."""
    assert read_stream_refusal(body) == expected
    assert read_rejection(body, ("stream", "stream_options")) is None


def _through_openrouter(provider_body: object) -> dict[str, Any]:
    """An error as OpenRouter passes a provider's on: its own words, the provider's body in
    `metadata.raw` as JSON text."""
    metadata = {"raw": json.dumps(provider_body), "provider_name": "DeepSeek"}
    return {"error": {"code": 400, "message": "Provider returned error", "metadata": metadata}}


def test_a_provider_s_error_passed_on_by_a_gateway_is_read() -> None:
    """OpenRouter says "Provider returned error" and puts the provider's body apart: every
    reading of the 400 saw only its own words, so nothing was learned from it (a model that
    wants its thinking back, a parameter refused, a window) and the run's error said nothing."""
    thinking = {"error": {"message": "The `reasoning_content` in the thinking mode must be "
                          "passed back to the API.", "type": "invalid_request_error"}}  # fmt: skip
    assert read_shape_refusal(_through_openrouter(thinking)) == THINKING_SENT_BACK
    assert error_message(_through_openrouter(thinking)) == (
        "Provider returned error: The `reasoning_content` in the thinking mode must be passed "
        "back to the API."
    )
    assert read_rejection(_through_openrouter(OPENAI_TEMPERATURE), {"temperature"}) is not None
    window = {"error": {"message": "This model's maximum context length is 65536 tokens."}}
    assert read_context_overflow(_through_openrouter(window)) == ContextOverflow(65536)
    raw_text = {
        "error": {"message": "Provider returned error", "metadata": {"raw": "upstream 503"}}
    }
    assert error_message(raw_text) == "Provider returned error: upstream 503"
    nested = {"error": {"message": "a", "metadata": {"raw": json.dumps(_through_openrouter("b"))}}}
    assert error_message(nested).startswith("a: Provider returned error")


def test_a_learned_shape_applies_to_the_model_only() -> None:
    quirks = ModelQuirks()
    caps = capabilities_for("local-model")
    quirks.learn_shape("local-model", STRICT_ROLES)
    learned = quirks.apply("local-model", caps)
    assert (learned.strict_roles, learned.nine_char_call_ids) == (True, False)
    assert quirks.apply("other-model", caps) is caps
    assert quirks.learned() == {"local-model": [STRICT_ROLES]}


def test_a_model_whose_server_takes_no_tools_has_its_calls_read_from_its_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Learned or configured, even for a model the table says is behind an endpoint that
    parses calls (a hosted model behind a proxy that takes no tools): its calls come back in
    its text, and would be taken for its answer."""
    quirks = ModelQuirks()
    assert not capabilities_for("gpt-4o").calls_in_text
    quirks.learn_shape("gpt-4o", TOOLS_IN_PROMPT)
    learned = quirks.apply("gpt-4o", capabilities_for("gpt-4o"))
    assert (learned.tools_in_prompt, learned.calls_in_text) == (True, True)
    assert quirks.learned() == {"gpt-4o": [TOOLS_IN_PROMPT]}
    config = '{"gpt-4o": {"tools_in_prompt": true, "calls_in_text": false}}'
    monkeypatch.setenv("AGENT_MODEL_CAPABILITIES", config)
    overrides = Settings().model_capabilities
    set_so = capabilities_for("gpt-4o-2024-08-06", overrides)
    assert (set_so.tools_in_prompt, set_so.calls_in_text) == (True, True)
    assert not capabilities_for("gemma3:4b", overrides).tools_in_prompt  # not unless learned


# -- against the scripted endpoints, with the real openai client -------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as llm:
        yield llm


def _call_learning(
    client: openai.OpenAI, quirks: ModelQuirks, model: str, wanted: WantedParams
) -> tuple[Any, int]:
    """What the LLM helper does: send, and on a 400 naming a parameter, learn and resend."""
    rejected = 0
    while True:
        params = request_params(quirks.apply(model, capabilities_for(model)), wanted)
        try:
            response = client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": "hi"}], **params
            )
            return response, rejected
        except openai.BadRequestError as err:
            rejection = read_rejection(err.body, {"model", "messages", *params})
            if rejection is None or rejected >= 4:
                raise
            quirks.learn(model, rejection)
            rejected += 1


def test_learning_converges_against_an_unknown_reasoning_model(server: ScriptedLLM) -> None:
    """A reasoning model the table does not know: each 400 teaches one parameter."""
    model = server.endpoint("acme-thinker", Endpoint.reasoning_model())
    server.script(model, [Reply("ok")], repeat_last=True)
    client = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0)
    quirks = ModelQuirks()
    wanted = WantedParams(max_output_tokens=256, temperature=0.2)
    response, rejected = _call_learning(client, quirks, model, wanted)
    assert response.choices[0].message.content == "ok"
    assert rejected == 2  # max_tokens (renamed), then temperature (left out)
    sent = server.requests[model][-1]
    assert sent["max_completion_tokens"] == 256 and "temperature" not in sent
    _, again = _call_learning(client, quirks, model, wanted)
    assert again == 0  # remembered for the model


def test_learning_from_the_older_unrecognized_form(server: ScriptedLLM) -> None:
    model = server.endpoint("local-a2", Endpoint(unrecognized=("reasoning_effort",)))
    server.script(model, [Reply("ok")], repeat_last=True)
    client = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0)
    quirks = ModelQuirks()
    overrides = {"local-a2": ModelCapabilities.model_validate({"reasoning_effort": True})}
    caps = capabilities_for(model, overrides)
    params = request_params(caps, WantedParams(reasoning_effort="high"))
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hi"}], **params
        )
    rejection = read_rejection(err.value.body, {"model", "messages", *params})
    assert rejection == ParameterRejection("reasoning_effort")
    quirks.learn(model, rejection)
    assert request_params(quirks.apply(model, caps), WantedParams(reasoning_effort="high")) == {}
