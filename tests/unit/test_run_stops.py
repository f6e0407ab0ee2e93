"""A run's calls in flight stop with the run (`activities.run_stops`): the board's rules, in
Temporal's activity test environment (no server)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from temporalio.activity import ActivityCancellationDetails
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory
from temporalio.testing import ActivityEnvironment

from activities import run_stops
from activities.run_stops import RunStops


@pytest.fixture(autouse=True)
def short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_stops, "STOP_GRACE_SECONDS", 0.01)


def env_for(run_key: str) -> ActivityEnvironment:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, workflow_run_id=run_key, activity_type="llm_step")
    return env


class SlowCall:
    """A call that waits until told, noting whether it was cancelled where it waited."""

    def __init__(self, stops: RunStops) -> None:
        self.stops = stops
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = False

    async def __call__(self) -> str:
        async with self.stops.stoppable():
            self.started.set()
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.cancelled = True
                raise
            return "answered"


async def started(
    stops: RunStops, env: ActivityEnvironment | None = None
) -> tuple[SlowCall, asyncio.Task[str]]:
    """A call of run-1 (or of `env`'s run) in flight, waiting until told."""
    call = SlowCall(stops)
    running = asyncio.create_task((env or env_for("run-1")).run(call))
    await call.started.wait()
    return call, running


async def test_a_stopped_run_s_call_is_cancelled_where_it_waits_and_fails_benign():
    stops = RunStops()
    call, running = await started(stops)
    assert stops.in_flight("run-1") == 1

    assert stops.stop("run-1") == 1
    with pytest.raises(ApplicationError) as raised:
        await running
    assert call.cancelled
    assert raised.value.type == "RunStopped"
    assert raised.value.non_retryable
    assert raised.value.category == ApplicationErrorCategory.BENIGN  # not logged as a failure
    assert "llm_step" in str(raised.value)
    assert stops.in_flight("run-1") == 0


async def test_the_stopped_call_fails_only_after_the_grace(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(run_stops, "STOP_GRACE_SECONDS", 0.3)
    stops = RunStops()
    call, running = await started(stops)
    stops.stop("run-1")
    await asyncio.sleep(0.1)
    assert call.cancelled and not running.done()  # its model hung up on, its run closing
    with pytest.raises(ApplicationError):
        await running


async def test_a_call_of_a_run_already_stopped_never_runs():
    stops = RunStops()
    stops.stop("run-1")
    call = SlowCall(stops)
    with pytest.raises(ApplicationError, match="stopped"):
        await env_for("run-1").run(call)
    assert not call.started.is_set()


async def test_other_runs_calls_go_on():
    stops = RunStops()
    mine, theirs = SlowCall(stops), SlowCall(stops)
    stopping = asyncio.create_task(env_for("run-1").run(mine))
    going = asyncio.create_task(env_for("run-2").run(theirs))
    await asyncio.gather(mine.started.wait(), theirs.started.wait())
    stops.stop("run-1")
    with pytest.raises(ApplicationError):
        await stopping
    theirs.release.set()
    assert await going == "answered"
    assert not theirs.cancelled
    assert (stops.in_flight("run-1"), stops.in_flight("run-2")) == (0, 0)


async def test_temporal_s_own_cancel_goes_through_as_a_cancel():
    stops = RunStops()
    env = env_for("run-1")
    call, running = await started(stops, env)
    env.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert call.cancelled and stops.in_flight("run-1") == 0


async def test_a_call_whose_run_temporal_no_longer_has_ends_benign():
    """A terminated run's calls learn it at a heartbeat, as a cancel whose details say the run
    was not found: not a failure worth a warning and a traceback in the worker's log."""
    stops = RunStops()
    env = env_for("run-1")
    call, running = await started(stops, env)
    env.cancel(ActivityCancellationDetails(not_found=True))
    with pytest.raises(ApplicationError) as raised:
        await running
    assert call.cancelled
    assert (raised.value.type, raised.value.category) == (
        "RunGone",
        ApplicationErrorCategory.BENIGN,
    )


async def test_a_call_stopped_twice_is_cancelled_once():
    """The wrap-up stops the run's calls on its worker and announces it; the announcement
    comes back to that worker too, while its stopped calls wait out their grace."""
    stops = RunStops()
    call, running = await started(stops)
    assert stops.stop("run-1") == 1
    assert stops.stop("run-1") == 0
    with pytest.raises(ApplicationError):  # not a CancelledError out of its grace
        await running


async def test_a_call_that_ended_is_not_stopped():
    stops = RunStops()
    call = SlowCall(stops)
    call.release.set()
    assert await env_for("run-1").run(call) == "answered"
    assert stops.stop("run-1") == 0


def test_the_stopped_runs_remembered_are_bounded():
    stops = RunStops(remember=3)
    for n in range(5):
        stops.stop(f"run-{n}")
    assert [stops.stopped(f"run-{n}") for n in range(5)] == [False, False, True, True, True]
    stops.stop("run-2")  # told again: remembered as the latest
    stops.stop("run-5")
    assert [stops.stopped(f"run-{n}") for n in (2, 3, 4, 5)] == [True, False, True, True]
