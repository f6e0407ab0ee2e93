"""The chaos soak's workload and its injections, both from one seeded plan.

Runs: each a tagged task (`⟦R-0007 t3 q1 e1⟧`, read by bench/_chaos_model.py) of 1 to 3
calculator calls, 30% with a long answer (so a DebriefWorkflow synthesizes it), a quarter
with `required_tools=["current_time"]` (half of those try to finish before calling it), some
with their calculator calls waiting for approval (an
approver approves them within a second or so), some cancelled by the API after a second or
two. Starts are paced at a steady rate, and now and then eight start at once (a batch).
Chat: a session on each of two agents (and the default session of one), a turn every few
seconds, a third of them down the tool path.

Injections, at seeded times in the load's window, at least one of each kind: a worker
SIGKILLed (started again a few seconds later), a worker SIGTERMed (started again once it has
drained), Postgres stopped and started, every Postgres connection cut, the Temporal server
killed and started again, the model answering 503 for a few seconds.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any

from temporalio.client import WorkflowHandle

from bench._chaos_stack import ChaosStack, log
from reactive_temporal.api.agents import Agent
from reactive_temporal.contracts.entity import ChatReply
from reactive_temporal.contracts.result import AgentResult
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.hosting.runtime import Runtime

RUN_AGENTS = ["chaos-a0", "chaos-a1", "chaos-a2", "chaos-a3"]
CHAT_AGENTS = ["chaos-a0", "chaos-a1"]
"""Chat goes to agents that also run, so runs' signals reach an entity mid-turn."""
MODEL = "chaos-model"
INJECTIONS = ["worker_kill", "worker_term", "pg_restart", "pg_cut", "temporal_restart",
              "model_storm"]  # fmt: skip


def described(err: Exception) -> str:
    """The error's type, its gRPC status when it has one, and its message."""
    status = getattr(err, "status", None)
    named = f" ({status.name})" if status is not None and hasattr(status, "name") else ""
    return f"{type(err).__name__}{named}: {str(err)[:300]}"


@dataclass
class RunRecord:
    tag: str
    agent: str
    task: str
    options: dict[str, int]
    approval: bool
    cancel_after: float | None
    workflow_id: str | None = None
    start_error: str | None = None
    result: AgentResult | None = None
    error: str | None = None
    cancel: str | None = None
    """What the cancel request did: `sent`, or why not."""
    ended_at: float | None = None


@dataclass
class ChatRecord:
    tag: str
    agent: str
    session: str
    message: str
    tools: bool
    reply: ChatReply | None = None
    error: str | None = None
    seconds: float = 0.0


@dataclass
class Injection:
    at: float
    kind: str
    detail: str = ""
    done_at: float | None = None
    error: str | None = None


@dataclass
class Plan:
    seed: int
    load_seconds: float
    run_every: float
    chat_every: float
    injections: list[Injection]

    @classmethod
    def make(cls, seed: int, load_seconds: float, rounds: int) -> Plan:
        """`rounds` of each injection kind, at random times in the load's window (after a
        warm-up, at least 8 s apart, the last well before the load stops)."""
        rng = random.Random(seed)
        kinds = [k for _ in range(rounds) for k in INJECTIONS]
        rng.shuffle(kinds)
        window = (0.1 * load_seconds, 0.85 * load_seconds)
        while True:
            times = sorted(rng.uniform(*window) for _ in kinds)
            if all(b - a >= 8 for a, b in zip(times, times[1:], strict=False)):
                break
        return cls(
            seed=seed,
            load_seconds=load_seconds,
            run_every=1.2,
            chat_every=4.0,
            injections=[Injection(t, k) for t, k in zip(times, kinds, strict=True)],
        )


@dataclass
class Load:
    stack: ChaosStack
    plan: Plan
    rng: random.Random
    runs: list[RunRecord] = field(default_factory=list)
    chats: list[ChatRecord] = field(default_factory=list)
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    started_wall: float = field(default_factory=time.time)
    """When the load began, by the clock the model's log uses."""
    approvals: int = 0
    burst: int = 0
    """Runs still to start at once."""

    def agent(self, name: str, *, approval: bool = False) -> Agent:
        config = AgentConfig(
            agent_id=name, model=MODEL, approve_tools=["calculator"] if approval else []
        )
        runtime = Runtime(self.stack.client, self.stack.task_queue, offline_model=False)
        return Agent(config, runtime)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    # -- runs --------------------------------------------------------------------------------

    async def launch_runs(self) -> None:
        number = 0
        while self.elapsed() < self.plan.load_seconds:
            number += 1
            options = {"t": self.rng.randint(1, 3)}
            if self.rng.random() < 0.3:
                options["l"] = 1
            if self.rng.random() < 0.25:
                options["q"] = 1
                if self.rng.random() < 0.5:
                    options["e"] = 1
            tag = f"R-{number:04d}"
            text = " ".join(f"{k}{v}" for k, v in options.items())
            record = RunRecord(
                tag=tag,
                agent=self.rng.choice(RUN_AGENTS),
                task=f"⟦{tag} {text}⟧ Work out a few products, then answer.",
                options=options,
                approval=self.rng.random() < 0.08,
                cancel_after=self.rng.uniform(0.5, 3.0) if self.rng.random() < 0.1 else None,
            )
            self.runs.append(record)
            self.tasks.append(asyncio.create_task(self.one_run(record)))
            if self.rng.random() < 0.04:
                self.burst = 8  # a batch job: the next runs start together
            if self.burst:
                self.burst -= 1
                continue
            await asyncio.sleep(self.plan.run_every * self.rng.uniform(0.6, 1.4))

    async def one_run(self, record: RunRecord) -> None:
        agent = self.agent(record.agent, approval=record.approval)
        required = ["current_time"] if record.options.get("q") else None
        handle: WorkflowHandle[Any, AgentResult] | None = None
        deadline = time.monotonic() + 90
        while handle is None:  # a start refused while Temporal is down is tried again
            try:
                handle = await agent.start(record.task, required_tools=required)
            except Exception as err:
                record.start_error = f"{type(err).__name__}: {err}"
                if time.monotonic() > deadline:
                    return
                await asyncio.sleep(2)
        record.workflow_id = handle.id
        if record.cancel_after is not None:
            self.tasks.append(asyncio.create_task(self.cancel_later(agent, record)))
        try:
            record.result = await agent.result(handle)
        except Exception as err:
            record.error = described(err)
        record.ended_at = self.elapsed()

    async def cancel_later(self, agent: Agent, record: RunRecord) -> None:
        assert record.cancel_after is not None and record.workflow_id is not None
        await asyncio.sleep(record.cancel_after)
        try:
            await agent.cancel(record.workflow_id, reason="chaos soak cancels it")
            record.cancel = "sent"
        except Exception as err:
            record.cancel = f"{type(err).__name__}: {str(err)[:120]}"

    async def approve_forever(self) -> None:
        """Approve every waiting call of the chaos agents, about once a second."""
        while True:
            await asyncio.sleep(1)
            try:
                for name in RUN_AGENTS:
                    agent = self.agent(name)
                    seen = {p.run_id for p in await agent.approvals()}
                    for run_id in seen:
                        try:
                            await agent.approve(run_id, by="chaos")
                            self.approvals += 1
                        except ValueError:
                            pass  # decided already, or the run ended
            except Exception as err:  # the server may be down: try again next second
                log(f"approver: {type(err).__name__}: {str(err)[:100]}")

    # -- chat ------------------------------------------------------------------------------

    async def chat_forever(self, name: str, session_id: str | None, offset: float) -> None:
        agent = self.agent(name)
        session = agent.session(session_id) if session_id else None
        await asyncio.sleep(offset)
        while self.elapsed() < self.plan.load_seconds:
            number = len(self.chats) + 1
            tools = self.rng.random() < 0.33
            tag = f"C-{number:04d}"
            message = (
                f"⟦{tag} t1⟧ Please compute something for me with your tools."
                if tools
                else f"⟦{tag}⟧ What did you do in your last run?"
            )
            record = ChatRecord(tag, name, session_id or "default", message, tools)
            self.chats.append(record)
            began = time.monotonic()
            try:
                if session is not None:
                    record.reply = await session.chat(message, use_tools=tools)
                else:
                    record.reply = await agent.chat(message, use_tools=tools)
            except Exception as err:
                record.error = described(err)
            record.seconds = time.monotonic() - began
            await asyncio.sleep(self.plan.chat_every * self.rng.uniform(0.6, 1.4))

    # -- injections ------------------------------------------------------------------------

    async def inject_all(self) -> None:
        for injection in self.plan.injections:
            await asyncio.sleep(max(0.0, injection.at - self.elapsed()))
            log(f"inject {injection.kind} at {self.elapsed():.0f}s")
            try:
                injection.detail = await self.inject(injection.kind)
            except Exception as err:
                injection.error = f"{type(err).__name__}: {err}"
                log(f"injection {injection.kind} failed: {injection.error}")
            injection.done_at = self.elapsed()
            log(f"  {injection.kind}: {injection.detail} (done at {injection.done_at:.0f}s)")

    async def inject(self, kind: str) -> str:
        stack = self.stack
        if kind in ("worker_kill", "worker_term"):
            slot = self.rng.choice(stack.workers)
            pid = slot.pid
            began = time.monotonic()
            await slot.end("kill" if kind == "worker_kill" else "term")
            stopped = time.monotonic() - began
            down = self.rng.uniform(2, 5) if kind == "worker_kill" else 0.0
            await asyncio.sleep(down)
            await slot.start()
            return f"{slot.name} pid {pid}: exited in {stopped:.1f}s, back after {down:.1f}s"
        if kind == "pg_restart":
            down = self.rng.uniform(2, 5)
            await stack.restart_postgres(down)
            return f"Postgres down {down:.1f}s"
        if kind == "pg_cut":
            return f"{stack.proxy.cut()} connections cut"
        if kind == "temporal_restart":
            down = self.rng.uniform(2, 5)
            await stack.restart_temporal(down)
            return f"Temporal down {down:.1f}s"
        if kind == "model_storm":
            seconds = self.rng.uniform(3, 8)
            await stack.model.ask(f"storm {seconds:.1f}")
            return f"model answers 503 for {seconds:.1f}s"
        raise ValueError(kind)

    # -- progress ----------------------------------------------------------------------------

    async def report_progress(self, every: float = 10.0) -> None:
        while True:
            await asyncio.sleep(every)
            ended = [r for r in self.runs if r.ended_at is not None]
            ok = sum(1 for r in ended if r.result is not None and r.result.success)
            replied = sum(1 for c in self.chats if c.reply is not None)
            failed = sum(1 for c in self.chats if c.error is not None)
            injected = sum(1 for i in self.plan.injections if i.done_at is not None)
            log(
                f"{self.elapsed():5.0f}s  runs {len(self.runs)} started, {len(ended)} ended "
                f"({ok} succeeded)  chat {replied} replied, {failed} failed  "
                f"injections {injected}/{len(self.plan.injections)}  approvals {self.approvals}"
            )
