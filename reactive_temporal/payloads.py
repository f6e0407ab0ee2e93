"""The payload converter every client and worker uses: pydantic JSON that never fails on text.

`temporalio.contrib.pydantic`'s converter refuses a lone surrogate ("surrogates not allowed")
and an activity whose result holds one fails on every retry: one stray `\\ud800` in a model's
reply billed a step many times over. This converter serializes exactly as the SDK's does and,
only when that fails on such text, serializes a cleaned copy (lone surrogates as U+FFFD), so
sanitizing costs nothing on the normal path and happens at every boundary the SDK crosses:
activity inputs and results, workflow inputs and results, signals, updates, queries, memos.

With `REACTIVE_TEMPORAL_ENCRYPTION_REQUIRED=1`, the codec marks every payload that arrived
unencrypted (`REFUSED_ENCODING`); converting one raises `PlaintextPayloadError`, so a signal
carrying one is dropped (the SDK logs why), an update is rejected, and a client reading one
gets the error instead of trusting unauthenticated data.
"""

from __future__ import annotations

from typing import Any

from pydantic_core import PydanticSerializationError
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DefaultPayloadConverter,
    EncodingPayloadConverter,
    JSONPlainPayloadConverter,
)

from reactive_temporal.contracts.internal import InternalPayload
from reactive_temporal.sanitize import clean_value

REFUSED_ENCODING = "binary/plaintext-refused"


class PlaintextPayloadError(ValueError):
    """A payload was not encrypted while encryption is required; it was not read."""


class SanitizingJSONPayloadConverter(PydanticJSONPlainPayloadConverter):
    """pydantic's JSON converter; text it cannot encode is cleaned, not fatal; an internal
    payload is written without its fields at their defaults (contracts/internal.py)."""

    def to_payload(self, value: Any) -> Payload | None:
        try:
            return self._to_payload(value)
        except (PydanticSerializationError, UnicodeEncodeError) as err:
            if "surrogate" not in str(err):
                raise
            return self._to_payload(clean_value(value))

    def _to_payload(self, value: Any) -> Payload | None:
        if isinstance(value, InternalPayload):
            data = value.model_dump_json(exclude_defaults=True).encode()
            return Payload(metadata={"encoding": self.encoding.encode()}, data=data)
        return super().to_payload(value)


class RefusedPlaintextConverter(EncodingPayloadConverter):
    """Reads the codec's marker for a refused plaintext payload, and says why."""

    @property
    def encoding(self) -> str:
        return REFUSED_ENCODING

    def to_payload(self, value: Any) -> Payload | None:
        return None  # never chosen for writing

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        raise PlaintextPayloadError(
            "a payload arrived unencrypted while REACTIVE_TEMPORAL_ENCRYPTION_REQUIRED=1; it was "
            "refused (was it sent by a client without REACTIVE_TEMPORAL_ENCRYPTION_KEYS?)"
        )


_JSON = SanitizingJSONPayloadConverter()
"""One for every ProjectPayloadConverter: the SDK makes a new payload converter for each
workflow activation's two data converters (decoding and encoding), and a new pydantic
converter builds its schema serializer each time (an instance took 33 µs, 3.7 µs with this
one shared); shared, its type adapters are also cached once for all."""
_CONVERTERS = (
    *(
        _JSON if isinstance(c, JSONPlainPayloadConverter) else c
        for c in DefaultPayloadConverter.default_encoding_payload_converters
    ),
    RefusedPlaintextConverter(),
)


class ProjectPayloadConverter(CompositePayloadConverter):
    """The SDK's default converters with the sanitizing pydantic JSON one in place of JSON,
    and the refused-plaintext reader."""

    def __init__(self) -> None:
        super().__init__(*_CONVERTERS)
