"""Headers an operator adds to the worker's requests (to an MCP server, to the model's
endpoint): what may be added at all.

Gateways and hosted servers take their credentials, and their routing, in headers of their
own (`Authorization`, `Helicone-Auth`, `x-portkey-api-key`, `cf-aig-authorization`…). What the
HTTP client or a protocol sets itself may not be added: a second `Content-Length` or `Host`
breaks the request, and `Accept-Encoding` would undo the worker's refusal of compressed
replies (a cap on the bytes on the wire does not bound what they inflate to). A value holds no
line break: that would be a second header smuggled into the request.

Problems are said naming the header, never its value: a value is a secret more often than not.
"""

from __future__ import annotations

import re

HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
"""RFC 9110's token: what a header's name may be."""
RESERVED = frozenset(
    {
        "accept-encoding",
        "connection",
        "content-length",
        "content-type",
        "host",
        "keep-alive",
        "proxy-connection",
        "te",
        "transfer-encoding",
        "upgrade",
    }
)
"""Headers the HTTP client sets itself, or that undo a protection of the worker's."""


def name_problem(name: str, reserved: frozenset[str] = RESERVED) -> str | None:
    """What is wrong with `name` as an added header's name; None when nothing is."""
    if not HEADER_NAME.fullmatch(name):
        return f"{name!r} is not a header name"
    if name.lower() in reserved:
        return f"{name} is set by the worker itself, not by an option"
    return None


def value_problem(value: str) -> str | None:
    """What is wrong with `value` as an added header's value (without saying the value)."""
    if any(c in value for c in "\r\n\0"):
        return "the value holds a line break or NUL"
    if not value.strip():
        return "the value is empty"
    return None
