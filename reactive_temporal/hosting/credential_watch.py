"""A process's Temporal credentials renewed while it runs, with no restart.

A worker runs for weeks, and so does a service using the Python API (a web app that built
its agent once); their credentials do not. A Temporal Cloud API key read from a file
(`TEMPORAL_API_KEY_FILE`) is replaced in it by whoever rotates it, and a client certificate
from cert-manager or Vault is renewed in place every few weeks. Read once at the start, the
old key is refused once it is revoked, and the old certificate once it expires: the worker
can no longer poll, the service's calls all fail, until someone restarts them.

So the process looks at those files every `credentials_poll_seconds` (a `stat` each):
- a new API key is handed to the client it has (`Client.api_key`: the SDK sends it with the
  next call, polls included);
- new TLS files make a new client (the SDK cannot change a connection's TLS), connected
  before it replaces the old one (in a worker and its activities, `Worker.client`; in a
  Python API process, under the client its agents hold, `runtime.take_connection`), so a
  certificate that does not work (a key that does not match it, half written) leaves the
  process on the credentials it has, and says so. A change is taken once the files have
  stayed as they are for one look: a certificate and its key are written one after the other;
- the client certificate's end of validity is watched too (`cert_expiry`): a gauge, and a
  warning while less than a week is left.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reactive_temporal.config import Settings
from reactive_temporal.connection import TemporalConnection
from reactive_temporal.embedded.stack import connect
from reactive_temporal.hosting.cert_expiry import CertExpiry
from reactive_temporal.key_files import KeyFile, file_stamp

if TYPE_CHECKING:
    from temporalio.client import Client, Plugin
    from temporalio.runtime import Runtime as TemporalRuntime

log = logging.getLogger(__name__)

Stamps = tuple[tuple[int, int, int] | None, ...]


def stamps_of(paths: Sequence[str]) -> Stamps:
    return tuple(file_stamp(path) for path in paths)


@dataclass
class CredentialWatch:
    """Watches `connection`'s credential files for the process connected with it.

    `reload` reads the connection's configuration again (the profile, the variables) and
    `reconnect` connects a client with it, as the first was (`of` makes both); without them
    only the API key is renewed."""

    connection: TemporalConnection
    reload: Callable[[], TemporalConnection] | None = None
    reconnect: Callable[[TemporalConnection], Awaitable[Client]] | None = None
    poll_seconds: float = 10.0

    @classmethod
    def of(
        cls,
        settings: Settings,
        connection: TemporalConnection,
        *,
        runtime: TemporalRuntime | None = None,
        plugins: Sequence[Plugin] = (),
    ) -> CredentialWatch:
        """The watch of a process that connected with `settings`' `connection` through
        `stack.connect` (on `runtime`, with `plugins`): it reconnects the same way, a worker
        and a Python API process alike."""
        return cls(
            connection,
            reload=functools.partial(settings.temporal_connection, again=True),
            reconnect=functools.partial(
                connect,
                encryption_keys=settings.encryption_keys,
                encryption_required=settings.encryption_required,
                runtime=runtime,
                plugins=plugins,
            ),
            poll_seconds=settings.credentials_poll_seconds,
        )

    @property
    def tls_files(self) -> tuple[str, ...]:
        return self.connection.tls_files if self.reconnect is not None else ()

    @property
    def needed(self) -> bool:
        return bool(self.connection.api_key_file or self.tls_files or self.connection.client_cert)

    async def run(
        self, client_of: Callable[[], Client], replace: Callable[[Client], None] | None = None
    ) -> None:
        """Until cancelled: the current client is `client_of()`, `replace` puts a new one in
        its place (asked only with `reconnect`)."""
        path = self.connection.api_key_file
        key: KeyFile | None = None
        files = self.tls_files
        applied = seen = stamps_of(files)
        refused: Stamps | None = None
        unreadable = False
        expiry = CertExpiry(self.connection.client_cert_source)
        expiry.seen(self.connection.client_cert)
        while True:
            expiry.check()
            await asyncio.sleep(self.poll_seconds)
            if path is not None and key is None:
                try:  # first read here: a file broken since the connect is waited out
                    key = KeyFile(path, "TEMPORAL_API_KEY_FILE")
                except ValueError as err:
                    if not unreadable:
                        log.warning("%s; the API key the client has is kept meanwhile", err)
                    unreadable = True
            if key is not None and (current := key.current()) != client_of().api_key:
                client_of().api_key = current
                log.info("TEMPORAL_API_KEY_FILE: the API key was renewed from %s", path)
            if not files:
                continue
            stamps = stamps_of(files)
            if stamps != applied and stamps == seen:
                assert self.reconnect and self.reload and replace, "TLS files need them"
                try:
                    renewed = self.reload()
                    fresh = await self.reconnect(renewed)
                except Exception as err:
                    if refused != stamps:
                        log.warning(
                            "Temporal's TLS files (%s) changed, but connecting with them "
                            "failed; this process keeps the credentials it has: %s",
                            ", ".join(files),
                            err,
                        )
                    refused = stamps
                else:
                    replace(fresh)
                    applied = stamps
                    expiry.seen(renewed.client_cert)
                    log.info("Temporal's TLS files changed: this process reconnected with them")
            seen = stamps
