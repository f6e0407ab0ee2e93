"""`/metrics` for a process using the Python API: its client certificate's expiry.

A service that builds its agents once and runs for weeks (a web app serving chats) connects
to Temporal with a client certificate of its own, often not the workers' (another identity,
fewer permissions), and takes its renewals without a restart (hosting/credential_watch.py).
It kept the certificate's end of validity in
`reactive_temporal_temporal_client_cert_expiry_timestamp_seconds` and warned in its log under
a week, but served no `/metrics`: the alerts on that gauge (ReactiveTemporalClientCert…)
watched the workers' certificates only, and a service whose certificate expired was found
out when Temporal refused its next connection. `serve_metrics` serves the process's own
series (the agent metrics' registry: in such a process, that gauge) for Prometheus to scrape,
the same rules then alert on it. The CLI's commands need none: they are not up long enough
to be scraped, read their certificate when they connect, and `check` says its expiry.
"""

from __future__ import annotations

from reactive_temporal.telemetry.endpoint import Health, MetricsEndpoint


def serve_metrics(port: int, host: str = "127.0.0.1") -> MetricsEndpoint:
    """Serve this process's `/metrics` on `host:port` until `.stop()`.

    `/healthz` answers 200 meanwhile. A ValueError names a port that is taken; `port=0`
    takes a free one (`.port`).
    """
    endpoint = MetricsEndpoint(port, None, host=host)
    endpoint.health = Health.SERVING
    return endpoint.start()
