"""Helpers for tests that run activity steps outside a worker, against real Postgres."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg import sql
from temporalio.testing import ActivityEnvironment

from activities.store import Store
from reactive_temporal.contracts.run import Message, SeqMessage


def attempt(
    number: int,
    workflow_run_id: str = "temporal-run-1",
    *,
    start_to_close: timedelta = timedelta(seconds=30),
    heartbeat_details: Sequence[Any] = (),
) -> ActivityEnvironment:
    """An activity context of attempt `number` that started now with 30 s to run (or
    `start_to_close`), handed `heartbeat_details` by the attempt before it."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info,
        attempt=number,
        scheduled_time=datetime.now(UTC),  # the step's first attempt, as rate limits count it
        started_time=datetime.now(UTC),
        start_to_close_timeout=start_to_close,
        workflow_run_id=workflow_run_id,
        heartbeat_details=list(heartbeat_details),
    )
    return env


def seeded(*contents: str, first: int = 0) -> list[SeqMessage]:
    """User messages at consecutive places of a transcript, from `first`."""
    return [
        SeqMessage(seq=first + i, message=Message(role="user", content=c))
        for i, c in enumerate(contents)
    ]


async def live_events(store: Store, run_id: str) -> list[str]:
    """The types of a run's live-output events, in order."""
    async with store.pool.connection() as conn:
        cur = await conn.execute(
            'SELECT type FROM run_events WHERE run_id = %s ORDER BY "offset"', (run_id,)
        )
        return [r[0] for r in await cur.fetchall()]


async def transactions_of(store: Store, run_ids: list[str], table: str = "run_events") -> int:
    """How many transactions wrote these runs' rows of `table` (rows written together share
    xmin)."""
    query = sql.SQL("SELECT count(DISTINCT xmin::text) FROM {} WHERE run_id = ANY(%s)")
    async with store.pool.connection() as conn:
        cur = await conn.execute(query.format(sql.Identifier(table)), (run_ids,))
        row = await cur.fetchone()
    return row[0] if row else 0
