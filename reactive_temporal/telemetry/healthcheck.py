"""The worker image's health check: `python -m reactive_temporal.telemetry.healthcheck`.

With REACTIVE_TEMPORAL_METRICS_PORT set, healthy means the worker's `/healthz` answers 200
(it polls; 503 while it starts or drains). Without it, a `worker.py` process runs here and
Temporal's frontend (TEMPORAL_ADDRESS) accepts TCP connections. Exit status 0 healthy, 1 not.
"""

from __future__ import annotations

import os
import socket
import sys
import urllib.error
import urllib.request
from pathlib import Path


def check(environ: dict[str, str]) -> str | None:
    """None when healthy, else why not."""
    port = environ.get("REACTIVE_TEMPORAL_METRICS_PORT", "").strip()
    if port:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5):
                return None
        except urllib.error.HTTPError as err:
            return f"/healthz answered {err.code}"
        except OSError as err:
            return f"/healthz on port {port} did not answer: {err}"
    running = False
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        running = running or any(arg.endswith(b"worker.py") for arg in argv)
    if not running:
        return "worker.py is not running"
    host, _, tport = environ.get("TEMPORAL_ADDRESS", "localhost:7233").rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(tport)), timeout=5).close()
    except (OSError, ValueError) as err:
        return f"Temporal at {host}:{tport} is unreachable: {err}"
    return None


if __name__ == "__main__":
    problem = check(dict(os.environ))
    if problem:
        print(problem, file=sys.stderr)
    sys.exit(1 if problem else 0)
