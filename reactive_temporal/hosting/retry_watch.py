"""The worker's note of local activities that fail and will be tried again.

Temporal's server sees a regular activity's attempts (`describe()` lists them); a local
activity's it never sees: they run and are retried inside the worker. This interceptor tells
`reactive_temporal.local_retries` of each failed attempt of one, and when it settles, so a run
stuck on a Postgres write says so in its `progress` query.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from reactive_temporal import local_retries


class LocalRetryWatch(Interceptor):
    """Notes the failed attempts of local activities started by workflows."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Inbound(next)


class _Inbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        run_id = info.workflow_run_id
        if not info.is_local or run_id is None:
            return await self.next.execute_activity(input)
        try:
            result = await self.next.execute_activity(input)
        except asyncio.CancelledError:
            details = activity.cancellation_details()
            if details is not None and details.timed_out and _tried_again(info, None):
                # a Postgres write waiting for a connection that never comes ends this way
                _note(info, run_id, f"timed out after {_seconds(info)}", timed_out=True)
            else:
                local_retries.note_settled(run_id, info.activity_id)
            raise
        except Exception as err:
            if _tried_again(info, err):
                _note(info, run_id, f"{type(err).__name__}: {err}" if str(err) else repr(err))
            else:
                local_retries.note_settled(run_id, info.activity_id)
            raise
        if info.attempt > 1:  # a first attempt that lands left nothing to forget
            local_retries.note_settled(run_id, info.activity_id)
        return result


def _note(info: activity.Info, run_id: str, error: str, *, timed_out: bool = False) -> None:
    local_retries.note_failure(
        run_id,
        info.activity_id,
        activity=info.activity_type,
        attempt=info.attempt,
        since=info.scheduled_time,
        error=error,
        timed_out=timed_out,
    )


def _tried_again(info: activity.Info, err: Exception | None) -> bool:
    """Whether Temporal will try the activity again after this attempt fails with `err`."""
    if isinstance(err, ApplicationError) and err.non_retryable:
        return False
    policy = info.retry_policy
    if policy is None:
        return True
    if policy.maximum_attempts and info.attempt >= policy.maximum_attempts:
        return False
    kinds = {type(err).__name__, getattr(err, "type", None)} if err is not None else set()
    return not kinds & set(policy.non_retryable_error_types or ())


def _seconds(info: activity.Info) -> str:
    timeout = info.start_to_close_timeout or info.schedule_to_close_timeout
    return f"{timeout.total_seconds():g} s" if timeout else "its timeout"
