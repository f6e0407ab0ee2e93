"""The `run_tool` activity: one tool call, turned into an observation either way.

A tool that raises, times out, or gets arguments that do not fit its signature produces an
error observation (`[Tool error: …]`) the model sees next turn.

A tool runs at most once per call (activities.step_records): its result and observation are
written in one write as soon as it returns, and a retried attempt returns that record
instead of running the tool again. Postgres being down when the tool returns is waited out
inside the attempt, with the result held, not answered by running the tool again; the tool
can read its call's idempotency key with `current_tool_call()`.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from temporalio import activity

from activities.heartbeat import heartbeating
from activities.pg_refusals import refused_data_fails
from activities.run_events import Announcement, RunEvents
from activities.run_stops import RUN_STOPS
from activities.step_records import StepRecords, record_step, recorded
from activities.store import Store
from reactive_temporal.contracts import names
from reactive_temporal.contracts.events import NewEvent, once_key
from reactive_temporal.contracts.run import Message, RunToolInput, ToolResult
from reactive_temporal.limits import OBSERVATION_MAX_CHARS
from reactive_temporal.sanitize import clip
from reactive_temporal.telemetry.observe import observe_tool_call
from reactive_temporal.tool_registry import ToolRegistry
from reactive_temporal.tools import ToolArgumentsError, ToolCallContext, tool_call_context

EVENT_FIELD_MAX_CHARS = 500
"""Arguments and observation previews in the live output are clipped to this (the
transcript has them whole)."""


def clip_fields(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with every string value clipped for the live output."""
    return {k: clip(v, EVENT_FIELD_MAX_CHARS) if isinstance(v, str) else v for k, v in data.items()}


def tool_event(type: str, step: int, data: dict[str, Any]) -> NewEvent:
    """A tool call starting or ending, written once per call (in its activity)."""
    key = once_key(type, step, activity.info().workflow_run_id)
    return NewEvent(type=type, step=step, data=data, key=key)  # type: ignore[arg-type]


_INTERRUPTS = (KeyboardInterrupt, GeneratorExit)
"""What a tool may raise that is the process's, not the tool's failure."""


def _not_the_tools(err: BaseException) -> bool:
    """`err` is (or a group of exceptions holds) an interrupt, or the activity's cancellation:
    a CancelledError while the activity's task is being cancelled (its cancel, its heartbeat
    timing out, the worker shutting down). One a tool raises while nothing cancels it (it
    awaited a future a library cancelled under it) is the tool's failure: raised out of the
    activity as one, each of Temporal's retries ran the tool again."""
    task = asyncio.current_task()
    cancelled = task is not None and task.cancelling() > 0
    stops = (*_INTERRUPTS, asyncio.CancelledError) if cancelled else _INTERRUPTS
    if isinstance(err, stops):
        return True
    return isinstance(err, BaseExceptionGroup) and err.subgroup(stops) is not None


CUT_OFF_ARGUMENTS = (
    "Your reply was cut off at the output token limit, so these arguments are incomplete: "
    "make the call again in a shorter reply"
)


def render_observation(value: Any) -> str:
    """What the model reads back: text as is, anything else as JSON."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except Exception:
        return _text_of(value)


def _text_of(value: object) -> str:
    """`str(value)`, or a description that cannot fail: a value whose `__str__` raised went
    out of the activity before its result was recorded, and every retry ran the tool again."""
    try:
        return str(value)
    except Exception:
        return f"<unprintable {type(value).__name__}>"


def bounded_observation(text: str) -> str:
    """Every observation, a result or an error, within OBSERVATION_MAX_CHARS: its head and
    tail kept around a marker (an error's cause is often at its end)."""
    return clip(text, OBSERVATION_MAX_CHARS)


class ToolActivities:
    def __init__(
        self, store: Store, registry: ToolRegistry, records: StepRecords | None = None
    ) -> None:
        self.store = store
        self.records = records or StepRecords(store)
        self.registry = registry
        self.events = RunEvents(store)

    @activity.defn(name=names.RUN_TOOL)
    @refused_data_fails
    async def run_tool(self, input: RunToolInput) -> ToolResult:
        """Run the call's tool once, record its observation and result together, return it;
        stopped with its run (`activities.run_stops`)."""
        call = input.call
        async with RUN_STOPS.stoppable(), heartbeating():
            earlier = await recorded(self.store, input.run_id, input.seq, ToolResult)
            if earlier is not None:
                return earlier
            started = time.monotonic()
            announced = None
            if input.live_output:  # with the end when the tool is quick, else alone
                start = {"call_id": call.id, "tool": call.name, "arguments": call.arguments}
                announced = self.events.announce(
                    input.run_id, tool_event("tool_start", input.seq, clip_fields(start))
                )
            try:
                return await self._run(input, started, announced)
            finally:
                if announced is not None:
                    announced.cancel()  # failed or cancelled before its end was written

    async def _run(
        self, input: RunToolInput, started: float, announced: Announcement | None
    ) -> ToolResult:
        """Run the tool, record its result and write its end (with its start, when that is
        still pending) in one round trip."""
        call = input.call
        # A name the model made up is counted as one label, not one per invention.
        label = call.name if self.registry.get(call.name) is not None else "(unknown)"
        with (
            tool_call_context(ToolCallContext(input.run_id, input.seq, call.id)),
            observe_tool_call(label, call.id) as observed,  # a span and the count
        ):
            success, content = await self._execute(call.name, call.arguments, input.cut_off)
            if not success:
                observed.failed()
        content = bounded_observation(content)
        result = ToolResult(
            call_id=call.id,
            name=call.name,
            success=success,
            content=content,
            duration_ms=int((time.monotonic() - started) * 1000),
        )
        message = Message(role="tool", content=content, tool_call_id=call.id, name=call.name)
        events = []
        if announced is not None:
            end = {
                "call_id": call.id,
                "tool": call.name,
                "success": success,
                "duration_ms": result.duration_ms,
                "preview": content,
            }
            events = [*await announced.take(), tool_event("tool_end", input.seq, clip_fields(end))]
        await record_step(
            self.records,
            input.run_id,
            input.seq,
            message,
            result,
            events=events,  # in the same round trip, after the record
            what=f"recording {call.name}'s result",
        )
        return result

    async def _execute(self, name: str, arguments: str, cut_off: bool = False) -> tuple[bool, str]:
        tool = self.registry.get(name)
        if tool is None:
            available = ", ".join(self.registry.names) or "none"
            return False, f"[Tool error: unknown tool {name!r}. Available tools: {available}]"
        try:
            kwargs = tool.parse_arguments(arguments)
        except ToolArgumentsError as err:
            why = f"invalid arguments for {name}: {err}"
            if cut_off:  # the model would otherwise guess at a JSON mistake it did not make
                why += f". {CUT_OFF_ARGUMENTS}"
            return False, f"[Tool error: {why}]"
        deadline = asyncio.timeout(tool.timeout_seconds)
        try:
            async with heartbeating(), deadline:
                value = await tool(**kwargs)
        except TimeoutError as err:
            if deadline.expired():
                return False, f"[Tool error: {name} timed out after {tool.timeout_seconds:g}s]"
            # the tool's own TimeoutError (a client's deadline inside it): its message says more
            return (
                False,
                f"[Tool error: {name} failed: TimeoutError: {_text_of(err) or 'timed out'}]",
            )
        except BaseException as err:  # any tool failure is the model's to read, not the run's
            # to die of, a plugin's `sys.exit(f"HTTP 502: {body}")` and a task group's exit too
            # (raised out of the activity, each of Temporal's retries ran the tool again); not
            # a cancellation or Ctrl-C, alone or inside a group
            if _not_the_tools(err):
                raise
            activity.logger.info("tool %s raised %s", name, type(err).__name__)
            return False, f"[Tool error: {name} failed: {type(err).__name__}: {_text_of(err)}]"
        return True, render_observation(value)
