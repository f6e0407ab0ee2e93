"""Where Temporal's core writes its log: through Python's logging, in every runtime the
project makes.

Left to itself, a runtime's core writes its warnings (an RPC it retries while the server is
gone, a refused poll or heartbeat) to stdout, in colour, past every filter the process set on
the `temporalio.core` logger: the CLI's default runtime forwarded them
(`cli.terminal.core_logs_to_python`), but the runtime a worker makes to export metrics
(`--metrics-port`, telemetry.endpoint) did not, so such a worker printed each retry warning
(11 lines in 15 s with the server cut off) and its credentials' refusals raw, where the same
worker without a metrics port said one line a minute and one clear refusal
(`hosting.core_log_quiet`, `hosting.refusal_logs`).
"""

from __future__ import annotations

import logging

from temporalio.runtime import LogForwardingConfig, LoggingConfig, TelemetryFilter

CORE_LOGGER = "temporalio.core"
"""The logger the core's lines arrive on (the filters of the worker and the CLI are on it)."""


def core_logging() -> LoggingConfig:
    """The core's warnings (and its other crates' errors), forwarded to CORE_LOGGER."""
    return LoggingConfig(
        filter=TelemetryFilter(core_level="WARN", other_level="ERROR"),
        forwarding=LogForwardingConfig(logger=logging.getLogger(CORE_LOGGER)),
    )
