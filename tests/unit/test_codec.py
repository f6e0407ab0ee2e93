"""Payload encryption: round trips, key rotation, and errors that say what is wrong."""

from __future__ import annotations

import base64
import os

import pytest
from temporalio.api.common.v1 import Payload

from reactive_temporal.codec import (
    ENCODING,
    KEY_ID_METADATA,
    DecryptionError,
    EncryptionCodec,
    build_data_converter,
    generate_key_string,
    parse_encryption_keys,
    project_data_converter,
)
from reactive_temporal.failure_budget import (
    BoundedFailureConverter,
    BoundedFailureConverterWithEncodedAttributes,
)
from reactive_temporal.payloads import (
    PlaintextPayloadError,
    ProjectPayloadConverter,
    SanitizingJSONPayloadConverter,
)


def plain(text: str) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=f'"{text}"'.encode())


async def test_round_trip_hides_data_and_metadata():
    codec = EncryptionCodec(generate_key_string("k1"))
    original = [plain("zanzibar quokka"), plain("second")]
    encoded = await codec.encode(original)
    assert len(encoded) == 2
    for payload in encoded:
        assert payload.metadata["encoding"] == ENCODING
        assert payload.metadata[KEY_ID_METADATA] == b"k1"
        assert b"zanzibar" not in payload.data and b"json/plain" not in payload.data
    assert encoded[0].data[:12] != encoded[1].data[:12]  # a fresh nonce per payload
    assert await codec.decode(encoded) == original


async def test_rotation_old_payloads_still_decrypt_new_ones_use_the_first_key():
    old = generate_key_string("old")
    encrypted_with_old = await EncryptionCodec(old).encode([plain("before rotation")])
    rotated = EncryptionCodec(f"{generate_key_string('new')},{old}")
    assert rotated.key_id == "new"
    assert await rotated.decode(encrypted_with_old) == [plain("before rotation")]
    fresh = await rotated.encode([plain("after rotation")])
    assert fresh[0].metadata[KEY_ID_METADATA] == b"new"


async def test_unknown_key_id_names_it():
    encrypted = await EncryptionCodec(generate_key_string("retired")).encode([plain("x")])
    codec = EncryptionCodec(generate_key_string("current"))
    with pytest.raises(DecryptionError, match="key id 'retired'.*not among the configured keys"):
        await codec.decode(encrypted)


async def test_tampered_ciphertext_fails_authentication():
    codec = EncryptionCodec(generate_key_string("k1"))
    [payload] = await codec.encode([plain("do not touch")])
    flipped = bytearray(payload.data)
    flipped[-1] ^= 0x01
    tampered = Payload(metadata=dict(payload.metadata), data=bytes(flipped))
    with pytest.raises(DecryptionError, match="key id 'k1' failed authentication"):
        await codec.decode([tampered])


async def test_same_id_with_another_key_fails_authentication():
    [payload] = await EncryptionCodec(generate_key_string("k1")).encode([plain("x")])
    with pytest.raises(DecryptionError, match="failed authentication"):
        await EncryptionCodec(generate_key_string("k1")).decode([payload])


async def test_plain_payloads_pass_through_decode():
    codec = EncryptionCodec(generate_key_string("k1"))
    payloads = [plain("not encrypted"), Payload(metadata={"encoding": b"binary/null"})]
    assert await codec.decode(payloads) == payloads


def test_parser_accepts_standard_and_urlsafe_base64_with_or_without_padding():
    key = bytes(range(250, 256)) + os.urandom(26)  # bytes that differ between the alphabets
    standard = base64.b64encode(key).decode()
    urlsafe = base64.urlsafe_b64encode(key).decode().rstrip("=")
    keys = parse_encryption_keys(f" a:{standard} , b:{urlsafe},")
    assert list(keys) == ["a", "b"] and keys["a"] == keys["b"] == key


FIXED_KEY = base64.urlsafe_b64encode(bytes(range(32))).decode()
"""A key fixed at collection, so every test process collects the same test ids."""


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "is empty"),
        (" , ", "is empty"),
        ("justakey", "entry 1 is not KEY_ID:BASE64KEY"),
        (f"a:{FIXED_KEY},:abc", "entry 2 is not KEY_ID:BASE64KEY"),
        ("a:", "entry 1 is not KEY_ID:BASE64KEY"),
        ("bad id:" + base64.b64encode(bytes(32)).decode(), "key id 'bad id' may only contain"),
        ("a:not*base64!", "key for id 'a' is not valid base64"),
        ("a:" + base64.b64encode(bytes(16)).decode(), "key for id 'a' is 16 bytes"),
        (
            f"a:{FIXED_KEY},a:{base64.urlsafe_b64encode(bytes(32)).decode()}",
            "names key id 'a' twice",
        ),
    ],
)
def test_parser_errors_say_what_is_wrong(value, message):
    with pytest.raises(ValueError, match=message) as raised:
        parse_encryption_keys(value)
    assert "REACTIVE_TEMPORAL_ENCRYPTION_KEYS" in str(raised.value)


def test_parser_errors_never_echo_key_material():
    short = base64.b64encode(b"sixteen byte key").decode()
    with pytest.raises(ValueError) as raised:
        parse_encryption_keys(f"a:{short}")
    assert short not in str(raised.value)


def test_generated_key_strings_parse():
    entry = generate_key_string()
    [(key_id, key)] = parse_encryption_keys(entry).items()
    assert entry.startswith(f"{key_id}:") and len(key) == 32


def test_build_data_converter_is_plain_without_keys():
    assert build_data_converter(None) is project_data_converter
    assert build_data_converter("  ") is project_data_converter
    assert project_data_converter.payload_codec is None
    converter = build_data_converter(generate_key_string("k1"))
    assert isinstance(converter.payload_codec, EncryptionCodec)
    assert converter.payload_converter_class is project_data_converter.payload_converter_class
    assert converter.failure_converter_class is BoundedFailureConverterWithEncodedAttributes
    assert project_data_converter.failure_converter_class is BoundedFailureConverter
    with pytest.raises(ValueError, match="is 3 bytes"):
        build_data_converter("k1:" + base64.b64encode(b"abc").decode())
    with pytest.raises(ValueError, match="ENCRYPTION_REQUIRED=1 needs"):
        build_data_converter(None, required=True)


async def test_lone_surrogates_are_cleaned_not_fatal():
    from reactive_temporal.contracts.run import Message

    for converter in (project_data_converter, build_data_converter(generate_key_string("k1"))):
        payloads = await converter.encode(
            [Message(role="assistant", content="a\ud800b"), {"k\udfff": ["\\u0000 stays"]}]
        )
        message, mapping = await converter.decode(payloads, [Message, dict])
        assert message.content == "a\ufffdb"
        assert mapping == {"k\ufffd": ["\\u0000 stays"]}  # a literal backslash-u0000 is text


def test_the_payload_converters_made_per_activation_share_one_json_converter():
    """The SDK makes a payload converter for each workflow activation's data converters;
    each uses the project's one JSON converter (its type adapters cached once) rather than
    building its own (33 µs each, bench/README.md), and still converts as the first does."""
    first, fresh = ProjectPayloadConverter(), ProjectPayloadConverter()
    assert isinstance(first.converters[b"json/plain"], SanitizingJSONPayloadConverter)
    assert fresh.converters[b"json/plain"] is first.converters[b"json/plain"]
    assert list(fresh.converters) == list(first.converters)
    payloads = fresh.to_payloads([{"k": "a\ud800"}, None, b"raw"])
    assert first.from_payloads(payloads, [dict, type(None), bytes]) == [
        {"k": "a\ufffd"},
        None,
        b"raw",
    ]


async def test_required_encryption_refuses_plaintext_payloads():
    keys = generate_key_string("k1")
    required = build_data_converter(keys, required=True)
    encrypted = await build_data_converter(keys).encode(["sealed"])
    assert await required.decode(encrypted, [str]) == ["sealed"]
    plaintext = await project_data_converter.encode(["forged"])
    with pytest.raises(PlaintextPayloadError, match="arrived unencrypted"):
        await required.decode(plaintext, [str])
    assert await build_data_converter(keys).decode(plaintext, [str]) == ["forged"]  # rollout


async def test_failure_messages_are_encrypted():
    from temporalio.api.failure.v1 import Failure

    converter = build_data_converter(generate_key_string("k1"))
    failure = Failure()
    await converter.encode_failure(RuntimeError("provider said: zanzibar prompt"), failure)
    assert b"zanzibar" not in failure.SerializeToString()
    assert failure.message == "Encoded failure"
    error = await converter.decode_failure(failure)
    assert "zanzibar prompt" in str(error)


async def test_converter_round_trips_values_through_encryption():
    converter = build_data_converter(generate_key_string("k1"))
    [payload] = await converter.encode([{"task": "zanzibar quokka"}])
    assert b"zanzibar" not in payload.SerializeToString()
    assert await converter.decode([payload], [dict]) == [{"task": "zanzibar quokka"}]
