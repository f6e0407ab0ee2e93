"""What a client process (the CLI or the Python API) needs to start runs.

Three situations, tried in order:
1. `TEMPORAL_ADDRESS` is set: connect to it; workers run elsewhere (`python worker.py`).
2. `python starter.py dev` is running here: connect to its published stack and worker.
3. Nothing is running: start the embedded stack and a worker inside this process, for as
   long as it lives. This is what makes the first command on a fresh clone work.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

from temporalio.client import Client

from reactive_temporal.config import Settings
from reactive_temporal.embedded.stack import EmbeddedStack, connect, read_published_stack
from reactive_temporal.hosting.worker_factory import AgentWorker, create_worker


@dataclass
class Runtime:
    client: Client
    task_queue: str
    offline_model: bool | None
    """True/False when this process knows which model serves runs; None when it cannot tell."""
    stack: EmbeddedStack | None = None
    worker: AgentWorker | None = None
    worker_task: asyncio.Task[None] | None = None

    async def close(self) -> None:
        if self.worker is not None and self.worker_task is not None:
            await self.worker.worker.shutdown()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.worker_task
            await self.worker.close()
            self.worker = self.worker_task = None
        if self.stack is not None:
            await self.stack.stop()
            self.stack = None


async def open_runtime(settings: Settings, *, tool_modules: Sequence[str] = ()) -> Runtime:
    if settings.temporal_address is not None:
        client = await connect(
            settings.temporal_address,
            settings.temporal_namespace,
            settings.encryption_keys,
            encryption_required=settings.encryption_required,
        )
        return Runtime(client, settings.temporal_task_queue, offline_model=None)

    published = read_published_stack(settings.data_dir.resolve())
    if published is not None:
        client = await connect(
            published.temporal_address,
            published.namespace,
            settings.encryption_keys,
            encryption_required=settings.encryption_required,
        )
        return Runtime(client, published.task_queue, published.offline_model)

    stack = await EmbeddedStack(settings).start()
    try:
        assert stack.client is not None
        agent_worker = await create_worker(
            stack.client,
            settings,
            database_url=stack.database_url,
            llm_base_url=stack.llm_base_url,
            tool_modules=tool_modules,
        )
    except BaseException:
        await stack.stop()
        raise
    return Runtime(
        stack.client,
        settings.temporal_task_queue,
        stack.offline_model,
        stack=stack,
        worker=agent_worker,
        worker_task=asyncio.create_task(agent_worker.worker.run()),
    )
