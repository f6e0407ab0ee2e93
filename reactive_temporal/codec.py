"""Opt-in payload encryption: AES-256-GCM over every payload the SDK sends to Temporal.

Temporal stores workflow inputs, results, activity arguments, memos and summaries in its
history in the clear; an agent's history holds the task, every prompt, every tool result and
the answer. With `REACTIVE_TEMPORAL_ENCRYPTION_KEYS` set, the client and worker encrypt each
payload before it leaves the process, so the server (and anyone reading its database) sees
only ciphertext. The Web UI and the `temporal` CLI read it through the codec server
(`reactive_temporal.embedded.codec_server`), which holds the same keys.

Keys are named so they can be rotated without losing old histories: the first key encrypts,
every key decrypts, and each payload records the id of the key that encrypted it.

    REACTIVE_TEMPORAL_ENCRYPTION_KEYS="k2:<new base64 key>,k1:<old base64 key>"

Failure messages and stack traces are encrypted too, each cause's as well (Temporal's encoded
failure attributes: provider error bodies and database errors can quote prompts). Not
encrypted: search attributes, which the server must index.

`REACTIVE_TEMPORAL_ENCRYPTION_REQUIRED=1` (with keys) refuses payloads that arrive
unencrypted: a signal carrying one is dropped, an update rejected, a read fails with
`PlaintextPayloadError` (see `reactive_temporal.payloads`).

`python -m reactive_temporal.codec [KEY_ID]` prints a new key entry.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter, PayloadCodec

from reactive_temporal.errors import causes
from reactive_temporal.failure_budget import (
    BoundedFailureConverter,
    BoundedFailureConverterWithEncodedAttributes,
)
from reactive_temporal.payloads import (
    REFUSED_ENCODING,
    PlaintextPayloadError,
    ProjectPayloadConverter,
)

ENV_VAR = "REACTIVE_TEMPORAL_ENCRYPTION_KEYS"
REQUIRED_ENV_VAR = "REACTIVE_TEMPORAL_ENCRYPTION_REQUIRED"
ENCODING = b"binary/encrypted"
KEY_ID_METADATA = "encryption-key-id"
KEY_BYTES = 32
NONCE_BYTES = 12
_KEY_ID = re.compile(r"^[A-Za-z0-9_.\-]+$")


class DecryptionError(Exception):
    """An encrypted payload could not be decrypted; the message names the key id and why."""


def unreadable_payload(err: BaseException) -> str | None:
    """Why a payload could not be read, when that is what `err` (or what caused it) says: a
    key missing or wrong, no key at all, plaintext refused; None for any other error."""
    for seen in causes(err):
        if isinstance(seen, DecryptionError | PlaintextPayloadError):
            return str(seen)
        if isinstance(seen, KeyError) and ENCODING.decode() in str(seen):
            return (
                f"a payload is encrypted ({ENCODING.decode()}) and no key is configured: "
                f"set {ENV_VAR}"
            )
    return None


def parse_encryption_keys(value: str) -> dict[str, bytes]:
    """`id1:BASE64KEY,id2:BASE64KEY` as {id: 32-byte key}, in order (the first encrypts).

    Errors name the entry and its key id but never echo key material, since they end up in
    logs and terminals.
    """
    entries = [entry.strip() for entry in value.split(",")]
    entries = [entry for entry in entries if entry]  # a trailing comma is harmless
    if not entries:
        raise ValueError(
            f"{ENV_VAR} is empty; expected id1:BASE64KEY[,id2:BASE64KEY...] "
            "(generate one with `python -m reactive_temporal.codec`)"
        )
    keys: dict[str, bytes] = {}
    for position, entry in enumerate(entries, start=1):
        key_id, sep, encoded = (part.strip() for part in entry.partition(":"))
        if not sep or not key_id or not encoded:
            raise ValueError(
                f"{ENV_VAR} entry {position} is not KEY_ID:BASE64KEY "
                "(entries are separated by commas)"
            )
        if not _KEY_ID.match(key_id):
            raise ValueError(
                f"{ENV_VAR} entry {position}: key id {key_id!r} may only contain letters, "
                "digits, '_', '-' and '.'"
            )
        if key_id in keys:
            raise ValueError(f"{ENV_VAR} names key id {key_id!r} twice; key ids must be unique")
        key = _decode_base64(encoded)
        if key is None:
            raise ValueError(f"{ENV_VAR}: the key for id {key_id!r} is not valid base64")
        if len(key) != KEY_BYTES:
            raise ValueError(
                f"{ENV_VAR}: the key for id {key_id!r} is {len(key)} bytes; "
                f"AES-256 needs exactly {KEY_BYTES}"
            )
        keys[key_id] = key
    return keys


def _decode_base64(text: str) -> bytes | None:
    """Standard or URL-safe base64, padded or not; None when it is neither."""
    normalized = text.replace("-", "+").replace("_", "/")
    normalized += "=" * (-len(normalized) % 4)
    try:
        return base64.b64decode(normalized, validate=True)
    except (binascii.Error, ValueError):
        return None


def generate_key_string(key_id: str | None = None) -> str:
    """A new `KEY_ID:BASE64KEY` entry; the id defaults to today's date (`k20250131`)."""
    key_id = key_id or time.strftime("k%Y%m%d")
    if not _KEY_ID.match(key_id):
        raise ValueError(f"key id {key_id!r} may only contain letters, digits, '_', '-' and '.'")
    key = AESGCM.generate_key(bit_length=KEY_BYTES * 8)
    return f"{key_id}:{base64.urlsafe_b64encode(key).decode()}"


class EncryptionCodec(PayloadCodec):
    """AES-256-GCM: each payload becomes nonce + ciphertext of the serialized original.

    The original's metadata (its encoding, its type hints) is inside the ciphertext, so
    nothing about the value is visible; only `encoding` and the key id stay in the clear.
    """

    def __init__(self, keys: str | Mapping[str, bytes], *, required: bool = False) -> None:
        self.required = required
        """Refuse payloads that arrive unencrypted (they decode to a marker that fails to
        convert, naming the reason) instead of passing them through."""
        parsed = parse_encryption_keys(keys) if isinstance(keys, str) else dict(keys)
        if not parsed:
            raise ValueError("EncryptionCodec needs at least one key")
        for key_id, key in parsed.items():
            if len(key) != KEY_BYTES:
                raise ValueError(
                    f"the key for id {key_id!r} is {len(key)} bytes; AES-256 needs {KEY_BYTES}"
                )
        self._ciphers = {key_id: AESGCM(key) for key_id, key in parsed.items()}
        self.key_id = next(iter(parsed))
        """The id of the key that encrypts; the others only decrypt."""

    @property
    def key_ids(self) -> list[str]:
        return list(self._ciphers)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.encrypt(payload) for payload in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.decrypt(payload) for payload in payloads]

    def encrypt(self, payload: Payload) -> Payload:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[self.key_id].encrypt(nonce, payload.SerializeToString(), None)
        return Payload(
            metadata={"encoding": ENCODING, KEY_ID_METADATA: self.key_id.encode()},
            data=nonce + sealed,
        )

    def decrypt(self, payload: Payload) -> Payload:
        """The original payload; one that is not encrypted is returned as it is, or, when
        encryption is required, replaced by the refused-plaintext marker."""
        if payload.metadata.get("encoding") != ENCODING:
            if self.required:
                return Payload(metadata={"encoding": REFUSED_ENCODING.encode()})
            return payload
        key_id = payload.metadata.get(KEY_ID_METADATA, b"").decode(errors="replace")
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise DecryptionError(
                f"payload was encrypted with key id {key_id!r}, which is not among the "
                f"configured keys ({', '.join(self._ciphers)}); add it to {ENV_VAR}"
            )
        data = payload.data
        try:
            plain = cipher.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], None)
        except InvalidTag:
            raise DecryptionError(
                f"payload encrypted with key id {key_id!r} failed authentication: it was "
                "altered, or the key configured under that id is not the one that encrypted it"
            ) from None
        return Payload.FromString(plain)


project_data_converter = DataConverter(
    payload_converter_class=ProjectPayloadConverter,
    failure_converter_class=BoundedFailureConverter,
)
"""The converter without encryption: pydantic JSON that cleans text it cannot encode, and
failures within the failure budget (`reactive_temporal.failure_budget`)."""


def build_data_converter(encryption_keys: str | None, *, required: bool = False) -> DataConverter:
    """The project's converter, with encryption (payloads and failure messages) when keys
    are configured, refusing unencrypted payloads when `required`.

    Every client and worker of a namespace must use the same keys: a worker without them
    cannot read encrypted inputs, and one with them writes histories others cannot read.
    """
    if encryption_keys is None or not encryption_keys.strip():
        if required:
            raise ValueError(f"{REQUIRED_ENV_VAR}=1 needs {ENV_VAR} (the keys to require)")
        return project_data_converter
    return dataclasses.replace(
        project_data_converter,
        payload_codec=EncryptionCodec(encryption_keys, required=required),
        failure_converter_class=BoundedFailureConverterWithEncodedAttributes,
    )


if __name__ == "__main__":
    print(generate_key_string(sys.argv[1] if len(sys.argv) > 1 else None))
