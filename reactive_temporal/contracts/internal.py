"""Payloads only this project's own workflows and activities read: no fields at defaults.

A run's history holds an LLM step's input and reply and a tool step's input and result on
every iteration, and a fifth of their bytes were fields at their defaults (`"cost":0.0`,
`"seed":null`, `"rationale":{}`, `"oversized":null`). The project's payload converter
(`reactive_temporal.payloads`) writes a model deriving from `InternalPayload` with pydantic's
`exclude_defaults`, and reads it back with the reader's defaults. So a default here means
what a payload without the field means, and never changes (the contracts' rule already: a
new field has a default, names never change).

A run's input and result, chat's updates and queries and the agent entity's state are not
internal: other clients, the CLI's `--json` and the Web UI read them whole. `model_dump()`
is unchanged for every model (the transcript's stored step results keep every field).
"""

from __future__ import annotations

from pydantic import BaseModel


class InternalPayload(BaseModel):
    """An activity's input or result, or a child workflow's input, read only by our code."""
