"""Dev servers of a test module's own, started with dynamic config the shared one lacks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from reactive_temporal.embedded.dev_server import DevServer

PRODUCTION_PARTITIONS = 4
"""A self-hosted cluster's task queue partitions (`matching.numTaskqueueReadPartitions` and
`…WritePartitions`: 4 by default; Temporal Cloud partitions its queues too)."""


@asynccontextmanager
async def dev_server_with(directory: Path, *settings: str) -> AsyncIterator[DevServer]:
    """A dev server of its own (its log in `directory`), each `KEY=VALUE` dynamic config set."""
    extra_args: list[str] = []
    for setting in settings:
        if "=" not in setting:
            raise ValueError(f"dynamic config {setting!r} is not KEY=VALUE")
        extra_args += ["--dynamic-config-value", setting]
    server = DevServer(db_file=None, log_file=directory / "temporal.log", extra_args=extra_args)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def partitioned(partitions: int = PRODUCTION_PARTITIONS) -> tuple[str, str]:
    """The settings that serve every task queue in `partitions` partitions, reads and writes.

    Said outright, so the tests do not hang on the CLI's default (the 1.9.1 dev server's is 4:
    measured, a worker's polls landed on `/_sys/<queue>/1` to `/3`).
    """
    return (
        f"matching.numTaskqueueReadPartitions={partitions}",
        f"matching.numTaskqueueWritePartitions={partitions}",
    )
