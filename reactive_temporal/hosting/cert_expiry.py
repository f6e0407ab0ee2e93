"""When the client certificate a process connects to Temporal with expires, said before then.

An expired client certificate is found out the hard way: the server refuses the next
connection the process makes (after a network blip, a server restart), and every run it
serves stalls. Nothing said it was coming. So the process reads its certificate's end of
validity when it connects (and when it reconnects with renewed files,
`credential_watch.py`), shows it as a gauge to alert on
(`reactive_temporal_temporal_client_cert_expiry_timestamp_seconds`), and logs a warning when
less than EXPIRY_WARNING is left, again every WARN_EVERY while it stays so.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from cryptography import x509

from reactive_temporal.telemetry.metrics import TEMPORAL_CERT_EXPIRY

log = logging.getLogger(__name__)

EXPIRY_WARNING = timedelta(days=7)
"""Less than this left: warned (cert-manager renews at a third of a certificate's life left;
a certificate this close to its end was not renewed)."""
WARN_EVERY = timedelta(hours=6)


def not_after(pem: bytes | None) -> datetime | None:
    """The end of validity of the first certificate in `pem` (the client's, before its
    chain); None when there is none to read."""
    if not pem:
        return None
    try:
        return x509.load_pem_x509_certificate(pem).not_valid_after_utc
    except ValueError:
        return None


class CertExpiry:
    """The client certificate's end of validity, as the process knows it; `source` names it
    in warnings (TEMPORAL_TLS_CLIENT_CERT_PATH's file, say)."""

    def __init__(self, source: str | None) -> None:
        self.source = source or "the client certificate"
        self.expires: datetime | None = None
        self._warned_at: datetime | None = None

    def seen(self, pem: bytes | None) -> None:
        """The certificate the process connected with now."""
        expires = not_after(pem)
        if expires != self.expires:
            self._warned_at = None
        self.expires = expires
        if expires is not None:
            TEMPORAL_CERT_EXPIRY.set(expires.timestamp())

    def check(self, now: datetime | None = None) -> None:
        """Warn when the end is near (or past), at most every WARN_EVERY."""
        if self.expires is None:
            return
        now = now or datetime.now(UTC)
        left = self.expires - now
        if left > EXPIRY_WARNING:
            return
        if self._warned_at is not None and now - self._warned_at < WARN_EVERY:
            return
        self._warned_at = now
        when = self.expires.strftime("%Y-%m-%d %H:%M UTC")
        if left <= timedelta(0):
            log.warning(
                "Temporal client certificate %s expired at %s: the server will refuse this "
                "process's next connection; renew it (a worker or a Python API process takes "
                "renewed files without a restart)",
                self.source,
                when,
            )
        else:
            log.warning(
                "Temporal client certificate %s expires at %s (in %s): renew it before then",
                self.source,
                when,
                _duration(left),
            )


def _duration(left: timedelta) -> str:
    hours = int(left.total_seconds() // 3600)
    return f"{hours // 24} days {hours % 24} h" if hours >= 24 else f"{hours} h"
