"""Headers an operator adds to the worker's requests (to an MCP server, to the model's
endpoint): what may be added at all.

Gateways and hosted servers take their credentials, and their routing, in headers of their
own (`Authorization`, `Helicone-Auth`, `x-portkey-api-key`, `cf-aig-authorization`…). What the
HTTP client or a protocol sets itself may not be added: a second `Content-Length` or `Host`
breaks the request, and `Accept-Encoding` would undo the worker's refusal of compressed
replies (a cap on the bytes on the wire does not bound what they inflate to). A value holds no
line break: that would be a second header smuggled into the request.

A value may be read from a file (`read_header_file`): a token a sidecar rotates in place.

Problems are said naming the header, never its value: a value is a secret more often than not.
"""

from __future__ import annotations

import os
import re
import stat

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


MAX_FILE_BYTES = 64 * 1024
"""The longest file a header is read from: a token or a key is a few kilobytes at most, and a
longer file is a wrong path (a log, a binary), not a credential."""


def read_header_file(path: str, where: str) -> str:
    """The content of the file a `${file:PATH}` names, stripped of surrounding whitespace; a
    ValueError naming `where` (the header) and the file, never its content, when it cannot be
    read (`read_secret_file`) or holds what a header's value may not."""
    text = read_secret_file(path, where)
    if (problem := value_problem(text) or _character_problem(text)) is not None:
        raise ValueError(f"{where}: file {path}: {problem}")
    return text


def read_secret_file(path: str, where: str, limit: int = MAX_FILE_BYTES) -> str:
    """The text of a file holding a secret, stripped of surrounding whitespace; a ValueError
    naming `where` (the setting) and the file, never its content, when it cannot be read, is
    not a regular file (a FIFO would hold the worker's start), is longer than `limit` bytes,
    or is empty."""
    if not path:
        raise ValueError(f"{where}: no file is named")

    def unreadable(err: OSError) -> ValueError:
        return ValueError(f"{where}: cannot read file {path} ({err.strerror or err})")

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        raise unreadable(err) from None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
        data = _read_at_most(fd, limit + 1) if regular else b""
    except OSError as err:
        raise unreadable(err) from None
    finally:
        os.close(fd)
    if not regular:
        raise ValueError(f"{where}: file {path} is not a regular file")
    if len(data) > limit:
        raise ValueError(f"{where}: file {path} is longer than {limit} bytes")
    text = data.decode("utf-8", "replace").strip()
    if not text:
        raise ValueError(f"{where}: file {path} is empty")
    return text


def _read_at_most(fd: int, size: int) -> bytes:
    """Up to `size` bytes of the file open as `fd`: to its end, or `size` when it is longer."""
    chunks: list[bytes] = []
    while size > 0 and (chunk := os.read(fd, size)):
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _character_problem(text: str) -> str | None:
    """What a header's value may not hold besides a line break: a control character other
    than a tab (the HTTP client refuses it at each request), or one outside ASCII (the HTTP
    client encodes values as ASCII and fails each session)."""
    if all(" " <= c <= "~" or c == "\t" for c in text):
        return None
    return "it holds a control character, or one outside ASCII, which a header may not"
