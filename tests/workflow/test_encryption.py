"""Encryption on a real dev server: the history holds only ciphertext, the run still works,
and the codec server lets the `temporal` CLI (and the Web UI) read it back."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from google.protobuf import json_format
from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.api.history.v1 import History
from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError

from reactive_temporal.api.agents import Agent
from reactive_temporal.codec import EncryptionCodec, build_data_converter, generate_key_string
from reactive_temporal.config import Settings
from reactive_temporal.contracts import names
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.embedded.codec_server import DEFAULT_ORIGIN, CodecServer
from reactive_temporal.embedded.dev_server import temporal_binary
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM
from reactive_temporal.hosting.runtime import Runtime
from tests.processes import clean_env, starter
from tests.workflow.conftest import running_worker

pytestmark = pytest.mark.workflow

KEYS = f"{generate_key_string('k2')},{generate_key_string('k1')}"
TOKEN = "test-codec-token"
SECRET_WORDS = [b"zanzibar", b"quokka", b"marzipan"]


def payloads_in(message: Message) -> Iterator[Payload]:
    """Every Payload anywhere in a protobuf message (inputs, results, memos, summaries…)."""
    if isinstance(message, Payload):
        yield message
        return
    for field, value in message.ListFields():
        if field.type != field.TYPE_MESSAGE:
            continue
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            items = list(value.values())
        elif isinstance(value, Message):
            items = [value]
        else:  # a repeated field
            items = list(value)
        for item in items:
            if isinstance(item, Message):
                yield from payloads_in(item)


@pytest.fixture
async def encrypted(temporal_address: str, settings: Settings) -> AsyncIterator[tuple[Client, str]]:
    """A client and a worker that encrypt, on a fresh task queue."""
    client = await Client.connect(temporal_address, data_converter=build_data_converter(KEYS))
    # every workflow task replays (and so decrypts) the history
    async with running_worker(client, settings) as harness:
        yield client, harness.task_queue


async def histories(client: Client, *workflow_ids: str) -> list[WorkflowHistory]:
    found = []
    for workflow_id in workflow_ids:
        try:
            found.append(await client.get_workflow_handle(workflow_id).fetch_history())
        except RPCError:
            pass  # e.g. no debrief child: nothing to check
    return found


async def test_history_holds_only_ciphertext(
    encrypted: tuple[Client, str],
    temporal_address: str,
    llm: ScriptedLLM,
    model_name: str,
):
    client, task_queue = encrypted
    # long enough to be worth synthesizing: the run starts a debrief child (a short answer's
    # debrief is kept by the run itself, with no child to check)
    answer = "zanzibar quokka ok, " + "and a long explanation of it " * 4
    synthesis = json.dumps({"summary": "Said zanzibar quokka."})
    llm.script(model_name, [Reply(f"FINAL ANSWER: {answer}"), Reply(synthesis)])
    agent_id = f"enc-{uuid.uuid4().hex[:8]}"
    agent = Agent(
        AgentConfig(agent_id=agent_id, model=model_name),
        Runtime(client, task_queue, offline_model=False),
    )
    result = await agent.run("Say zanzibar quokka, then marzipan.")
    assert result.output == answer.strip() and result.success
    rich = await result.debrief_rich()  # its child's history is checked too
    assert rich is not None and rich.synthesized
    # the agent reads the run from Postgres into its entity workflow (checked too)
    last = await agent.get_last_debrief()
    assert last is not None and last.summary == "Said zanzibar quokka."

    plain = await Client.connect(temporal_address, data_converter=pydantic_data_converter)
    found = await histories(
        plain,
        result.run_id,
        names.debrief_workflow_id(result.run_id),
        names.agent_workflow_id(agent_id),
    )
    assert len(found) == 3  # the run, its debrief child, the agent's entity workflow
    codec = EncryptionCodec(KEYS)
    for history in found:
        proto = History(events=history.events)
        raw = history.to_json().encode() + proto.SerializeToString()
        for word in SECRET_WORDS:
            assert word not in raw, f"{word!r} in plain text in {history.workflow_id}'s history"
        # The check means something: the same history, decrypted, does hold the words.
        decrypted = b"".join(
            p.SerializeToString() for p in await codec.decode(list(payloads_in(proto)))
        )
        assert b"zanzibar" in decrypted, history.workflow_id

    with pytest.raises(Exception, match="binary/encrypted"):
        await plain.get_workflow_handle(result.run_id).result()

    with CodecServer(codec, token=TOKEN) as server:
        shown = await temporal_cli(
            "workflow", "show", "--workflow-id", result.run_id, "--address", temporal_address,
            "--output", "json", "--codec-endpoint", server.url, "--codec-auth", f"Bearer {TOKEN}",
        )  # fmt: skip
    shown_proto = json_format.Parse(shown, History(), ignore_unknown_fields=True)
    assert b"zanzibar quokka ok" in shown_proto.SerializeToString(), shown[:3000]


async def temporal_cli(*args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        temporal_binary(), *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    stdout, stderr = await process.communicate()
    assert process.returncode == 0, stderr.decode()
    return stdout.decode()


async def test_the_cli_without_the_key_says_so_in_one_line(
    encrypted: tuple[Client, str],
    temporal_address: str,
    database_url: str,
    llm: ScriptedLLM,
    model_name: str,
    tmp_path: Path,
):
    """A client with another key, or none: each command printed a traceback; `runs` showed
    no run at all (one it could not decode hid them all) and `replay` blamed the code."""
    client, task_queue = encrypted
    llm.script(model_name, [Reply("FINAL ANSWER: quokka")])
    agent = Agent(
        AgentConfig(agent_id=f"enc-{uuid.uuid4().hex[:8]}", model=model_name, memory=False),
        Runtime(client, task_queue, offline_model=False),
    )
    result = await agent.run("Say quokka.")
    base = {"TEMPORAL_ADDRESS": temporal_address, "DATABASE_URL": database_url}
    other_key = clean_env(**base, REACTIVE_TEMPORAL_ENCRYPTION_KEYS=generate_key_string("k3"))
    no_key = clean_env(**base)

    listed = starter("runs", "--agent", agent.name, "--json", env=other_key, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    [run] = json.loads(listed.stdout)["runs"]
    assert run["run_id"] == result.run_id and run["task"] is None
    assert "key id 'k2', which is not among the configured keys (k3)" in run["unreadable"]
    shown = starter("runs", "--agent", agent.name, env=no_key, cwd=tmp_path)
    assert shown.returncode == 0 and result.run_id in shown.stdout, shown.stderr
    assert "tasks cannot be shown" in shown.stderr and "no key is configured" in shown.stderr

    debrief = starter("debrief", result.run_id, env=other_key, cwd=tmp_path)
    assert debrief.returncode == 1 and "Traceback" not in debrief.stderr, debrief.stderr
    assert "cannot read a payload: payload was encrypted with key id" in debrief.stderr
    replayed = starter("replay", result.run_id, env=other_key, cwd=tmp_path)
    assert replayed.returncode == 1 and "Traceback" not in replayed.stderr, replayed.stderr
    assert "encryption keys" in replayed.stderr and "workflow.patched" not in replayed.stderr


# -- the codec server ---------------------------------------------------------------------


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.fixture
def codec_server() -> Iterator[CodecServer]:
    with CodecServer(EncryptionCodec(KEYS), token=TOKEN) as server:
        yield server


async def encrypted_body(text: str) -> tuple[Payload, dict]:
    """A payload and the protobuf-JSON request body that carries it, encrypted."""
    original = Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(text).encode())
    [sealed] = await EncryptionCodec(KEYS).encode([original])
    body = {
        "payloads": [
            {
                "metadata": {k: b64(v) for k, v in sealed.metadata.items()},
                "data": b64(sealed.data),
            }
        ]
    }
    return original, body


async def test_decode_needs_the_token(codec_server: CodecServer):
    _, body = await encrypted_body("zanzibar")
    async with httpx.AsyncClient(base_url=codec_server.url) as http:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            response = await http.post("/decode", json=body, headers=headers)
            assert response.status_code == 401
            assert "Authorization: Bearer" in response.json()["error"]
            assert "zanzibar" not in response.text


async def test_decode_returns_the_original_payload(codec_server: CodecServer):
    original, body = await encrypted_body("zanzibar quokka")
    async with httpx.AsyncClient(base_url=codec_server.url) as http:
        response = await http.post(
            "/default/decode",  # only the last segment counts (per-namespace endpoints)
            json=body,
            headers={"Authorization": f"Bearer {TOKEN}", "X-Namespace": "default"},
        )
    assert response.status_code == 200, response.text
    assert response.json() == {
        "payloads": [{"metadata": {"encoding": b64(b"json/plain")}, "data": b64(original.data)}]
    }


async def test_encode_then_decode_round_trips(codec_server: CodecServer):
    original = Payload(metadata={"encoding": b"json/plain"}, data=b'"quokka"')
    body = json.loads(json_format.MessageToJson(Payloads(payloads=[original])))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=codec_server.url, headers=headers) as http:
        encoded = await http.post("/encode", json=body)
        assert encoded.status_code == 200 and "quokka" not in encoded.text
        assert encoded.json()["payloads"][0]["metadata"]["encryption-key-id"] == b64(b"k2")
        decoded = await http.post("/decode", json=encoded.json())
        empty = await http.post("/decode", json={"payloads": []})
    assert json_format.Parse(decoded.text, Payloads()).payloads[0] == original
    assert empty.json() == {"payloads": []}


async def test_bad_requests_are_400_and_say_why(codec_server: CodecServer):
    headers = {"Authorization": f"Bearer {TOKEN}"}
    [sealed] = await EncryptionCodec(generate_key_string("elsewhere")).encode([Payload(data=b"x")])
    unknown = {
        "payloads": [
            {"metadata": {k: b64(v) for k, v in sealed.metadata.items()}, "data": b64(sealed.data)}
        ]
    }
    async with httpx.AsyncClient(base_url=codec_server.url, headers=headers) as http:
        not_json = await http.post("/decode", content=b"{nope")
        wrong_key = await http.post("/decode", json=unknown)
        no_route = await http.post("/other", json={"payloads": []})
    assert not_json.status_code == 400 and "protobuf JSON" in not_json.json()["error"]
    assert wrong_key.status_code == 400 and "'elsewhere'" in wrong_key.json()["error"]
    assert no_route.status_code == 404


async def test_cors_only_for_the_allowed_origin(codec_server: CodecServer):
    preflight = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type,x-namespace",
    }
    _, body = await encrypted_body("x")
    async with httpx.AsyncClient(base_url=codec_server.url) as http:
        allowed = await http.options("/decode", headers={**preflight, "Origin": DEFAULT_ORIGIN})
        other = await http.options(
            "/decode", headers={**preflight, "Origin": "http://evil.example"}
        )
        # the Web UI's address as `dev` prints it: the same machine, another origin
        by_address = await http.options(
            "/decode", headers={**preflight, "Origin": "http://127.0.0.1:8233"}
        )
        other_port = await http.options(
            "/decode", headers={**preflight, "Origin": "http://127.0.0.1:9999"}
        )
        allowed_post = await http.post(
            "/decode",
            json=body,
            headers={"Origin": DEFAULT_ORIGIN, "Authorization": f"Bearer {TOKEN}"},
        )
        other_post = await http.post(
            "/decode",
            json=body,
            headers={"Origin": "http://evil.example", "Authorization": f"Bearer {TOKEN}"},
        )
    assert allowed.status_code == 204
    assert allowed.headers["access-control-allow-origin"] == DEFAULT_ORIGIN
    allow_headers = allowed.headers["access-control-allow-headers"].lower()
    for header in ("authorization", "content-type", "x-namespace"):
        assert header in allow_headers
    assert "POST" in allowed.headers["access-control-allow-methods"]
    assert allowed_post.headers["access-control-allow-origin"] == DEFAULT_ORIGIN
    assert by_address.headers["access-control-allow-origin"] == "http://127.0.0.1:8233"
    for response in (other, other_post, other_port):
        assert not any(name.startswith("access-control-") for name in response.headers)


async def test_an_exported_encrypted_history_replays_from_its_file_with_the_keys(
    encrypted: tuple[Client, str],
    temporal_address: str,
    database_url: str,
    llm: ScriptedLLM,
    model_name: str,
    tmp_path: Path,
):
    """`export RUN_ID -o run.json && replay --file run.json` (the README's check before a
    deploy), where histories are encrypted: `replay ID` read them with the keys, `--file`
    with a converter that has none, and said to set the keys that were set."""
    client, task_queue = encrypted
    llm.script(model_name, [Reply("FINAL ANSWER: marzipan")])
    agent = Agent(
        AgentConfig(agent_id=f"enc-{uuid.uuid4().hex[:8]}", model=model_name, memory=False),
        Runtime(client, task_queue, offline_model=False),
    )
    result = await agent.run("Say marzipan.")
    env = clean_env(
        TEMPORAL_ADDRESS=temporal_address,
        DATABASE_URL=database_url,
        REACTIVE_TEMPORAL_ENCRYPTION_KEYS=KEYS,
    )
    exported = tmp_path / "run.json"
    done = starter("export", result.run_id, "-o", str(exported), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert b"marzipan" not in exported.read_bytes()
    replayed = starter("replay", "--file", str(exported), env=env, cwd=tmp_path)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "replay cleanly" in replayed.stdout
    wrong = clean_env(REACTIVE_TEMPORAL_ENCRYPTION_KEYS=generate_key_string("k3"))
    refused = starter("replay", "--file", str(exported), env=wrong, cwd=tmp_path)
    assert refused.returncode == 1 and "encryption keys" in refused.stderr, refused.stderr
