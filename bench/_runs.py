"""Starting bench runs (agent runs and floor runs) and reading what they cost from histories.

Both benches that run the worker in its own process (bench/cost.py, bench/scale.py) start
runs here: an agent run through the project's Python API (`Agent.start`), memory on or off,
on the bench model `bench-t<N>-d<S>` (N noop calls, then `FINAL ANSWER: done`); a floor run
as `BenchFloorWorkflow` with the same number of LLM and tool activities.

After a batch, `account()` reads every workflow involved — each run, its debrief child
(memory on), and the agent entity's events since the batch began — and counts billable
actions (bench/_actions.py), events, workflow tasks and workflow-task timeouts.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from temporalio.api.enums.v1 import EventType, TimeoutType
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from bench._actions import count_events, history_actions
from bench._floor import FloorInput
from bench._model import model_name
from bench._stack import HistoryProfile, profile_history
from reactive_temporal.api.agents import Agent
from reactive_temporal.api.results import result_of
from reactive_temporal.contracts.names import agent_workflow_id, debrief_workflow_id
from reactive_temporal.contracts.result import AgentResult
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.hosting.runtime import Runtime

FLOOR = "floor"
FLOOR_IO = "floor + I/O"
"""The floor whose steps do the I/O an agent's cannot skip (bench/_floor.py)."""
FLOOR_IO_LOCAL_PREPARE = "floor + I/O · prepare as a local activity"
FLOOR_IO_STEP_PREPARE = "floor + I/O · prepare in the first LLM step"
"""The floor with I/O whose run also writes a first row, as an agent run seeds its transcript:
before its first step in a local activity (`prepare_run`'s way), or in that step itself."""
PREPARE = {FLOOR_IO_LOCAL_PREPARE: "local", FLOOR_IO_STEP_PREPARE: "step"}
FLOORS = (FLOOR, FLOOR_IO, *PREPARE)
MEMORY_OFF = "memory off"
MEMORY_ON = "memory on"


@dataclass
class Scenario:
    """What a batch runs: `kind` (FLOOR, FLOOR_IO, MEMORY_OFF, MEMORY_ON) on `task_queue`."""

    kind: str
    task_queue: str
    label: str = ""
    agent_id: str = ""
    live_output: bool = True
    """Agent runs stream their LLM calls into the live output (the project default)."""

    def __post_init__(self) -> None:
        self.label = self.label or self.kind
        if not self.agent_id:
            self.agent_id = f"bench-{self.kind.replace(' ', '-')}-{uuid.uuid4().hex[:6]}"

    @property
    def memory(self) -> bool:
        return self.kind == MEMORY_ON

    @property
    def entity_id(self) -> str | None:
        return None if self.kind in FLOORS else agent_workflow_id(self.agent_id)


@dataclass
class Run:
    workflow_id: str
    latency: float
    iterations: int


async def one_run(
    client: Client,
    scenario: Scenario,
    *,
    tool_calls: int,
    delay: float = 0.0,
    task: str | None = None,
    chunks: int = 0,
) -> Run:
    """Start one run of `tool_calls` + 1 iterations and wait for its result."""
    task = task or f"Bench run {uuid.uuid4().hex}: call noop {tool_calls} times, then answer."
    started = time.perf_counter()
    if scenario.kind in FLOORS:
        workflow_id = f"bench-floor-{uuid.uuid4().hex[:12]}"
        io = scenario.kind != FLOOR
        floor = await client.start_workflow(
            "BenchFloorWorkflow",
            FloorInput(
                iterations=tool_calls + 1,
                model=model_name(tool_calls, delay, chunks) if delay or io else None,
                task=task,
                io=io,
                prepare=PREPARE.get(scenario.kind),
            ),
            id=workflow_id,
            task_queue=scenario.task_queue,
            result_type=int,
        )
        iterations = await result_of(floor)  # past 1,200 waiters the server turns some away
        return Run(workflow_id, time.perf_counter() - started, iterations)
    config = AgentConfig(
        agent_id=scenario.agent_id,
        model=model_name(tool_calls, delay, chunks),
        memory=scenario.memory,
        tools=["noop"],
        max_iterations=tool_calls + 5,
        live_output=scenario.live_output,
    )
    agent = Agent(config, Runtime(client, scenario.task_queue, offline_model=False))
    handle: WorkflowHandle[Any, AgentResult] = await agent.start(task)
    result = await result_of(handle)
    latency = time.perf_counter() - started
    if result.terminated_by != "final_answer" or result.metadata.iterations != tool_calls + 1:
        raise RuntimeError(f"bench run {handle.id} ended unexpectedly: {result!r}")
    return Run(handle.id, latency, result.metadata.iterations)


async def debrief_done(client: Client, run_workflow_id: str) -> None:
    """A run's debrief child, to its end. A run with nothing to synthesize (a trivial one)
    starts none and keeps its debrief itself; as a run's close waits for its child to be
    started, a child missing once the run has closed is never coming."""
    try:
        await result_of(client.get_workflow_handle(debrief_workflow_id(run_workflow_id)))
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise


async def wait_for_debriefs(client: Client, runs: list[Run]) -> None:
    """Every memory-on run's debrief child (where it has one), to its end."""
    await asyncio.gather(*(debrief_done(client, r.workflow_id) for r in runs))


async def entity_position(client: Client, scenario: Scenario) -> int:
    """The agent entity's last event id (0 when it does not exist yet)."""
    if scenario.entity_id is None:
        return 0
    try:
        history = await client.get_workflow_handle(scenario.entity_id).fetch_history()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return 0
        raise
    return max((e.event_id for e in history.events), default=0)


@dataclass
class Accounting:
    """What a batch of runs cost, summed over every workflow involved."""

    runs: int
    actions: Counter[str] = field(default_factory=Counter)
    actions_by_workflow: Counter[str] = field(default_factory=Counter)
    """"run", "debrief child", "agent entity" → actions."""
    events: Counter[str] = field(default_factory=Counter)
    """Event type name → count, every workflow."""
    workflows: Counter[str] = field(default_factory=Counter)
    """"run" / "debrief child" / "agent entity" → events."""
    history_bytes: int = 0
    profiles: list[HistoryProfile] = field(default_factory=list)
    activity_attempts: Counter[str] = field(default_factory=Counter)
    """Activity type → attempts beyond the first (retries), runs only."""
    wft_timeouts_by: Counter[str] = field(default_factory=Counter)
    """"<workflow> · <timeout type>" → workflow-task timeouts."""

    @property
    def total_actions(self) -> int:
        return sum(self.actions.values())

    @property
    def workflow_tasks(self) -> int:
        return self.events["WORKFLOW_TASK_COMPLETED"]

    @property
    def wft_timeouts(self) -> int:
        return self.events["WORKFLOW_TASK_TIMED_OUT"]

    def per_run(self, value: float) -> float:
        return value / self.runs if self.runs else 0.0


async def account(
    client: Client,
    scenario: Scenario,
    runs: list[Run],
    *,
    entity_from: int = 0,
    concurrency: int = 20,
) -> Accounting:
    """Read the histories of `runs`, their debrief children, and the entity's new events."""
    acc = Accounting(runs=len(runs))
    limit = asyncio.Semaphore(concurrency)

    async def read(workflow_id: str, role: str, after: int = 0) -> None:
        async with limit:
            try:
                history = await client.get_workflow_handle(workflow_id).fetch_history()
            except RPCError as err:
                if err.status == RPCStatusCode.NOT_FOUND:
                    return
                raise
        actions = history_actions(history, after)
        acc.actions.update(actions)
        acc.actions_by_workflow[role] += sum(actions.values())
        for e in history.events:
            if e.event_id > after and e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
                kind = e.workflow_task_timed_out_event_attributes.timeout_type
                acc.wft_timeouts_by[
                    f"{role} · {TimeoutType.Name(kind).removeprefix('TIMEOUT_TYPE_')}"
                ] += 1
        events = count_events(history, after)
        acc.events.update(events)
        acc.workflows[role] += sum(events.values())
        if role == "run":
            acc.history_bytes += sum(e.ByteSize() for e in history.events)
            acc.profiles.append(profile_history(history))
            for e in history.events:
                if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                    attempt = e.activity_task_started_event_attributes.attempt
                    if attempt > 1:
                        acc.activity_attempts["retries"] += attempt - 1

    jobs = [read(r.workflow_id, "run") for r in runs]
    if scenario.kind not in FLOORS:
        jobs += [read(debrief_workflow_id(r.workflow_id), "debrief child") for r in runs]
        assert scenario.entity_id is not None
        jobs.append(read(scenario.entity_id, "agent entity", entity_from))
    await asyncio.gather(*jobs)
    return acc


def time_breakdown(profiles: list[HistoryProfile]) -> dict[str, float]:
    """Where a run's time went, median over runs, seconds (server event times)."""

    def med(fn: Any) -> float:
        values = sorted(fn(p) for p in profiles)
        return values[len(values) // 2] if values else float("nan")

    def first_llm(p: HistoryProfile) -> float:
        kinds = ("llm_step", "bench_llm", "bench_llm_io")
        return next((p.first_scheduled[k] for k in kinds if k in p.first_scheduled), 0.0)

    def running(kinds: tuple[str, ...]) -> Any:
        return lambda p: sum(sum(p.activity_exec.get(k, [])) for k in kinds)

    return {
        "start → first LLM activity scheduled": med(first_llm),
        "LLM activities running": med(running(("llm_step", "bench_llm", "bench_llm_io"))),
        "tool activities running": med(running(("run_tool", "bench_tool", "bench_tool_io"))),
        "activities queued (scheduled → started)": med(
            lambda p: sum(sum(v) for v in p.activity_queue.values())
        ),
        "workflow tasks (scheduled → completed)": med(lambda p: sum(p.wft)),
        "last activity → run closed": med(lambda p: p.tail),
        "run, first → last event": med(lambda p: p.wall),
    }
