"""Which chat turn holds a session, and which wait behind it: for the `session_busy` query.

A session's turns run one at a time (the entity's per-session lock). A tool-path turn is a
child run, and one of its tool calls that needs approval parks it until a person decides (a
day by default): a second turn in the same session waited on the lock that long, and its
caller could not tell why. The entity now answers, per session, which tool-path run holds it
and which turns (update ids) wait behind it, so a client can say so
(`reactive_temporal/api/session_waits.py`). State only, read by a query: no command changes,
so no patch.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from reactive_temporal.contracts.entity import SessionBusy


class SessionTurns:
    """The turns in progress of each session: the tool-path run one holds, those waiting."""

    def __init__(self) -> None:
        self.tool_runs: dict[str, str] = {}
        self.waiting: dict[str, list[str]] = {}

    @asynccontextmanager
    async def holding(
        self, session_id: str, turn_id: str, lock: asyncio.Lock
    ) -> AsyncIterator[None]:
        """`lock` (the session's), with the turn listed as waiting until it has it."""
        queue = self.waiting.setdefault(session_id, [])
        queue.append(turn_id)
        try:
            await lock.acquire()
        finally:
            queue.remove(turn_id)
            if not queue:
                del self.waiting[session_id]
        try:
            yield
        finally:
            lock.release()

    @contextmanager
    def tool_run(self, session_id: str, run_id: str) -> Iterator[None]:
        """The session's turn runs as the child run `run_id` meanwhile."""
        self.tool_runs[session_id] = run_id
        try:
            yield
        finally:
            self.tool_runs.pop(session_id, None)

    def busy(self, session_id: str) -> SessionBusy:
        return SessionBusy(
            session_id=session_id,
            tool_run=self.tool_runs.get(session_id),
            waiting_turns=list(self.waiting.get(session_id, [])),
        )
