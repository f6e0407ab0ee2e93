"""A model endpoint's key read from a file, again whenever the file changes."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pydantic import ValidationError

from reactive_temporal.config import Settings
from reactive_temporal.key_files import KeyFile, read_llm_keys, renewed_since
from reactive_temporal.llm_endpoints import ModelEndpoint


def test_a_key_rotated_in_its_file_is_sent_from_the_next_request(tmp_path: Path) -> None:
    path = tmp_path / "key"
    path.write_text("sk-first\n")
    key = KeyFile(str(path), "OPENAI_API_KEY_FILE")
    assert key.current() == "sk-first"
    path.write_text("sk-second-and-longer\n")
    assert key.current() == "sk-second-and-longer"
    replaced = tmp_path / "key.new"  # a rotation by rename, as Kubernetes writes secrets
    replaced.write_text("sk-third-key-by-rename")
    replaced.replace(path)
    assert key.current() == "sk-third-key-by-rename"


def test_a_file_caught_mid_rewrite_keeps_the_last_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "key"
    path.write_text("sk-first")
    key = KeyFile(str(path), "OPENAI_API_KEY_FILE")
    path.write_text("")
    with caplog.at_level(logging.WARNING, logger="reactive_temporal.key_files"):
        assert [key.current(), key.current()] == ["sk-first", "sk-first"]
    warned = [r.getMessage() for r in caplog.records]
    assert warned == [
        f"OPENAI_API_KEY_FILE: file {path} is empty; the last key read from it is sent meanwhile"
    ]
    path.write_text("sk-renewed")
    assert key.current() == "sk-renewed"
    assert "sk-" not in " ".join(warned)  # never the key itself


@pytest.mark.parametrize(
    ("content", "said"),
    [(None, "cannot read file"), ("", "is empty"), ("sk-1\nX-Evil: 1", "line break")],
)
def test_a_file_that_holds_no_key_stops_the_start_naming_it(
    tmp_path: Path, content: str | None, said: str
) -> None:
    path = tmp_path / "key"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ValueError, match=f"OPENAI_API_KEY_FILE: .*{said}") as err:
        KeyFile(str(path), "OPENAI_API_KEY_FILE")
    assert str(path) in str(err.value) and "sk-1" not in str(err.value)


def test_one_key_source_each(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="OPENAI_API_KEY and OPENAI_API_KEY_FILE"):
        Settings(openai_api_key="sk-1", openai_api_key_file=str(tmp_path / "key"))
    with pytest.raises(ValidationError, match="api_key_env and api_key_file are both set"):
        ModelEndpoint(base_url="http://vllm:8000/v1", api_key_env="K", api_key_file="/k")
    assert not Settings(openai_api_key_file=str(tmp_path / "key")).uses_offline_model


def test_every_endpoint_s_key_is_read_before_the_worker_connects(tmp_path: Path) -> None:
    good = tmp_path / "key"
    good.write_text("sk-1")
    endpoints = {"claude-*": {"base_url": "https://api.anthropic.com/v1/",
                              "api_key_file": str(tmp_path / "missing")}}  # fmt: skip
    read_llm_keys(Settings(openai_api_key_file=str(good)))
    with pytest.raises(ValueError, match=r"AGENT_LLM_ENDPOINTS\['claude-\*'\] api_key_file"):
        read_llm_keys(Settings(openai_api_key_file=str(good), llm_endpoints=endpoints))
    endpoint = ModelEndpoint(base_url="http://vllm:8000/v1", api_key_file=str(good))
    key = endpoint.api_key("llama*")
    assert isinstance(key, KeyFile) and key.current() == "sk-1"


def test_a_refusal_of_a_key_rotated_out_is_told_from_a_wrong_key(tmp_path: Path) -> None:
    """A 401 for a key the file held before is worth asking again; one for the key the file
    still holds, or for a key it never held, is not."""
    path = tmp_path / "key"
    path.write_text("sk-old-key-1")
    key = KeyFile(str(path), "OPENAI_API_KEY_FILE")
    assert key.current() == "sk-old-key-1"
    assert not renewed_since("Bearer sk-old-key-1")  # not rotated: the key is wrong
    path.write_text("sk-new-key-22")  # rotated while a request was out; nothing read it yet
    assert renewed_since("Bearer sk-old-key-1")
    assert renewed_since("bearer sk-old-key-1")
    assert not renewed_since("Bearer sk-new-key-22")
    assert not renewed_since("Bearer sk-never-held")
    assert not renewed_since("Basic sk-old-key-1") and not renewed_since(None)
    assert not renewed_since("Bearer ")
