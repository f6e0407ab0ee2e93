"""A model endpoint's API key read from a file, and read again when the file changes.

Keys that rotate are written to a file in place: Kubernetes secrets and projected tokens, a
Vault agent's sidecar, a job renewing Azure Entra ID tokens (they expire within the hour). A
key read once at the start (`OPENAI_API_KEY`) takes a worker restart at each rotation, and a
long-lived worker otherwise fails every call with 401 once its key has expired.
`OPENAI_API_KEY_FILE` (and `api_key_file` in AGENT_LLM_ENDPOINTS) names the file instead; the
openai client asks `KeyFile` for the key before each request, which costs one `stat` of the
file and a read only when it changed.

The file is checked at the start like any header value (`http_headers.read_header_file`); a
file that cannot be read later (caught mid-rewrite, empty for an instant) keeps the last key,
with a warning, rather than failing the calls that come meanwhile.

A request can leave with a key that is rotated out while it is on its way: the endpoint's
401 then refuses a key the file no longer holds. `renewed_since` tells that refusal from a key
that is simply wrong, so the step asks again at once with the new key instead of failing the
run for good (`llm_errors.raise_for_status`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import weakref
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from reactive_temporal.http_headers import read_header_file

if TYPE_CHECKING:
    from reactive_temporal.config import Settings

log = logging.getLogger(__name__)

KEYS_REMEMBERED = 4
"""The keys a file held before its current one that are still told apart from a wrong key:
a request outlives a rotation or two at most."""
_LIVE: weakref.WeakSet[KeyFile] = weakref.WeakSet()
"""Every key file the process reads (one per endpoint client)."""


def file_stamp(path: str) -> tuple[int, int, int] | None:
    """What tells a rewritten file from the one read: its inode, size and mtime (None: it
    cannot be looked at)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _digest(key: str) -> bytes:
    """What is remembered of a rotated-out key: not the secret itself."""
    return hashlib.sha256(key.encode()).digest()


class WatchedFile:
    """A secret held in a file, as it is now (`where` names the setting in errors and warnings).

    Read at the start by `read` (a ValueError then stops the process); afterwards read again
    only when the file changed (one `stat` a call), and while it cannot be read (caught
    mid-rewrite, empty for an instant) the last good value is kept, warned once until it can
    be read again. `KeyFile` and `database_settings.UrlFile` are this, for a key and a URL."""

    WHAT = "value"
    MEANWHILE = "the last value read from it is used meanwhile"
    LOG = log
    """Where it says so: the logger of the module that reads such a file."""

    def __init__(self, path: str, where: str, read: Callable[[str, str], str]) -> None:
        self.path = path
        self.where = where
        self._read = read
        self._stamp = file_stamp(path)
        self._value = read(path, where)  # at the start: a ValueError stops the process
        self._failing = False

    def current(self) -> str:
        """The value: the file read again when it changed since the last read."""
        stamp = file_stamp(self.path)
        if stamp is not None and stamp == self._stamp:
            return self._value
        try:
            value = self._read(self.path, self.where)
        except ValueError as err:
            if not self._failing:
                self.LOG.warning("%s; %s", err, self.MEANWHILE)
            self._failing = True
            return self._value
        if self._failing or value != self._value:
            self.LOG.info(
                "%s: the %s in %s was read again (it changed)", self.where, self.WHAT, self.path
            )
        if value != self._value:
            self._replaced(self._value)
        self._value, self._stamp, self._failing = value, stamp, False
        return value

    def _replaced(self, old: str) -> None:
        """`old` is no longer the file's: what a subclass remembers of it."""


class KeyFile(WatchedFile):
    """A model endpoint's (or Temporal's) API key in a file, as it is now."""

    WHAT = "key"
    MEANWHILE = "the last key read from it is sent meanwhile"

    def __init__(self, path: str, where: str) -> None:
        super().__init__(path, where, read_header_file)
        self._before: deque[bytes] = deque(maxlen=KEYS_REMEMBERED)
        _LIVE.add(self)

    def _replaced(self, old: str) -> None:
        self._before.append(_digest(old))

    def rotated_out(self, key: str) -> bool:
        """Whether `key` is one this file held before the key it holds now (the file is
        looked at again first)."""
        return key != self.current() and _digest(key) in self._before

    async def __call__(self) -> str:
        """The openai client's `api_key` provider, asked before each request."""
        return self.current()


def renewed_since(authorization: str | None) -> bool:
    """Whether a refused request's `Authorization` header carried a key that a key file has
    replaced since: the request went out as the key was rotated, and goes again at once."""
    scheme, _, key = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not key:
        return False
    return any(keys.rotated_out(key) for keys in list(_LIVE))


def read_llm_keys(settings: Settings) -> None:
    """Every model endpoint's key read now, as the worker will (`OPENAI_API_KEY_FILE`, and
    each AGENT_LLM_ENDPOINTS endpoint's variable or file): a ValueError naming the one that
    is unset, unreadable or empty, said before anything is connected."""
    if settings.openai_api_key_file is not None:
        KeyFile(settings.openai_api_key_file, "OPENAI_API_KEY_FILE")
    for pattern, endpoint in settings.llm_endpoints.items():
        endpoint.api_key(pattern)
