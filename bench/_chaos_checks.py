"""The chaos soak's invariants, checked once the system has settled.

Each check reads the system's own records, not the soak's view of them: Temporal's
visibility and histories (every workflow on the server, so a run started twice by a start
retried across a server restart counts too), Postgres, the model's log of what it billed,
and the workers' exits and logs. Each returns PASS or FAIL with the evidence.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHistory

from bench._chaos_load import ChatRecord, Injection, RunRecord
from bench._chaos_model import TAG, usage_for
from bench._chaos_stack import WorkerSlot
from reactive_temporal.api.replay import replay
from reactive_temporal.api.replay_batch import quiet_replayer
from reactive_temporal.contracts import names
from reactive_temporal.contracts.result import AgentResult
from reactive_temporal.contracts.run import AgentRunInput
from reactive_temporal.hosting.worker_factory import WORKFLOWS

MAX_EVIDENCE = 12


@dataclass
class Check:
    name: str
    ok: bool
    summary: str
    evidence: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"- **{'PASS' if self.ok else 'FAIL'}** {self.name}: {self.summary}"]
        out += [f"    - {e}" for e in self.evidence[:MAX_EVIDENCE]]
        if len(self.evidence) > MAX_EVIDENCE:
            out.append(f"    - … and {len(self.evidence) - MAX_EVIDENCE} more")
        return out


@dataclass
class Execution:
    workflow_id: str
    run_id: str
    workflow_type: str
    status: WorkflowExecutionStatus | None
    history: WorkflowHistory
    tag: str = ""
    result: AgentResult | None = None
    close: str = ""
    """The close event's type (`COMPLETED`, `FAILED`…), empty while running."""

    @property
    def running(self) -> bool:
        return self.status == WorkflowExecutionStatus.RUNNING


CLOSE_EVENTS = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED: "COMPLETED",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED: "FAILED",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED: "TERMINATED",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED: "CANCELED",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT: "TIMED_OUT",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW: "CONTINUED_AS_NEW",
}


async def collect(client: Client) -> list[Execution]:
    """Every workflow execution on the server, with its history, run tag and result."""
    out: list[Execution] = []
    async for wf in client.list_workflows(""):
        history = await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
        execution = Execution(wf.id, wf.run_id, wf.workflow_type, wf.status, history)
        execution.close = CLOSE_EVENTS.get(history.events[-1].event_type, "")
        if wf.workflow_type == names.AGENT_RUN_WORKFLOW:
            await _read_run(client, execution)
        out.append(execution)
    return out


async def _read_run(client: Client, execution: Execution) -> None:
    events = execution.history.events
    started = events[0].workflow_execution_started_event_attributes
    [run_input] = await client.data_converter.decode(started.input.payloads, [AgentRunInput])
    found = TAG.findall(run_input.task)
    execution.tag = found[-1][0] if found else ""
    last = events[-1]
    if last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
        payloads = last.workflow_execution_completed_event_attributes.result.payloads
        [execution.result] = await client.data_converter.decode(payloads, [AgentResult])


def runs_of(executions: list[Execution]) -> list[Execution]:
    return [e for e in executions if e.workflow_type == names.AGENT_RUN_WORKFLOW]


# -- terminal states ---------------------------------------------------------------------------


async def check_terminal(client: Client, executions: list[Execution]) -> Check:
    """Every run and debrief reached a terminal state; entities may run on (they serve chat)."""
    stuck = [e for e in executions if e.running and e.workflow_type != names.AGENT_WORKFLOW]
    evidence = []
    for e in stuck:
        described = await client.get_workflow_handle(e.workflow_id, run_id=e.run_id).describe()
        raw = described.raw_description
        pending = [
            f"{a.activity_type.name} attempt {a.attempt} state {a.state}"
            + (f" last failure: {a.last_failure.message[:160]}" if a.last_failure.message else "")
            for a in raw.pending_activities
        ]
        children = [c.workflow_id for c in raw.pending_children]
        task = raw.pending_workflow_task
        evidence.append(
            f"{e.workflow_type} {e.workflow_id} ({len(e.history.events)} events): "
            f"pending activities {pending or 'none'}; children {children or 'none'}; "
            f"workflow task {'attempt ' + str(task.attempt) if task.attempt else 'none'}"
        )
    by_type = Counter((e.workflow_type, e.close or "RUNNING") for e in executions)
    summary = ", ".join(f"{t} {c}: {n}" for (t, c), n in sorted(by_type.items()))
    return Check("every run and debrief reached a terminal state", not stuck, summary, evidence)


# -- debriefs --------------------------------------------------------------------------------


async def check_debriefs(conn: psycopg.AsyncConnection[Any], executions: list[Execution]) -> Check:
    """One agent_debriefs row per ended run (all runs have memory on), none for one running."""
    runs = runs_of(executions)
    cur = await conn.execute("SELECT run_id, count(*) FROM agent_debriefs GROUP BY run_id")
    rows = dict(await cur.fetchall())
    evidence = []
    for e in runs:
        want = 0 if e.running or e.close == "CONTINUED_AS_NEW" else 1
        if e.close == "CONTINUED_AS_NEW":
            continue
        if rows.get(e.workflow_id, 0) != want:
            evidence.append(
                f"{e.workflow_id} ({e.close or 'RUNNING'}): {rows.get(e.workflow_id, 0)} rows"
            )
    known = {e.workflow_id for e in runs}
    evidence += [f"a debrief row for no run on the server: {r}" for r in rows if r not in known]
    ended = sum(1 for e in runs if not e.running)
    return Check(
        "each ended run has exactly one agent_debriefs row",
        not evidence,
        f"{ended} ended runs, {len(rows)} debrief rows",
        evidence,
    )


# -- transcripts -------------------------------------------------------------------------------


async def check_transcripts(
    conn: psycopg.AsyncConnection[Any], executions: list[Execution]
) -> Check:
    """Per run: `seq` 0..n-1 with no gap, each tool call made once and answered once."""
    ids = sorted({e.workflow_id for e in runs_of(executions)})
    cur = await conn.execute(
        "SELECT run_id, seq, role, tool_calls, tool_call_id FROM run_messages"
        " WHERE run_id = ANY(%s) ORDER BY run_id, seq",
        (ids,),
    )
    by_run: dict[str, list[tuple[int, str, Any, str | None]]] = defaultdict(list)
    for run_id, seq, role, tool_calls, tool_call_id in await cur.fetchall():
        by_run[run_id].append((seq, role, tool_calls, tool_call_id))
    evidence = []
    messages = 0
    for run_id, rows in by_run.items():
        messages += len(rows)
        seqs = [r[0] for r in rows]
        if seqs != list(range(len(seqs))):
            missing = sorted(set(range(max(seqs) + 1)) - set(seqs))
            evidence.append(f"{run_id}: seq {seqs[0]}..{seqs[-1]}, missing {missing[:10]}")
        calls = Counter(c.get("id") for r in rows if r[1] == "assistant" for c in (r[2] or []))
        answers = Counter(r[3] for r in rows if r[1] == "tool")
        twice = [c for c, n in calls.items() if n > 1] + [a for a, n in answers.items() if n > 1]
        if twice:
            evidence.append(f"{run_id}: tool call ids recorded twice {twice[:5]}")
    return Check(
        "run_messages: no gap or duplicate in seq, no tool call recorded twice",
        not evidence,
        f"{len(by_run)} transcripts, {messages} messages",
        evidence,
    )


# -- tokens -------------------------------------------------------------------------------------


@dataclass
class Billing:
    """What the model's log says it answered, by (kind, tag, key)."""

    ok: Counter[tuple[str, str, int]] = field(default_factory=Counter)
    times: dict[tuple[str, str, int], list[float]] = field(
        default_factory=lambda: defaultdict(list)
    )
    statuses: Counter[str] = field(default_factory=Counter)
    cut: Counter[str] = field(default_factory=Counter)

    @classmethod
    def read(cls, path: Path) -> Billing:
        billing = cls()
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            billing.statuses[entry["status"]] += 1
            key = (entry["kind"], entry["tag"], entry["key"])
            if entry["status"] == "ok":
                billing.ok[key] += 1
                billing.times[key].append(entry["t"])
            elif entry["status"] == "cut":
                billing.cut[entry["tag"]] += 1
        return billing

    def duplicates(self) -> dict[tuple[str, str, int], int]:
        return {k: n - 1 for k, n in self.ok.items() if n > 1}


STOPPED = ("cancelled", "timeout", "budget_exceeded")
"""Endings that stop a run with a model call in flight, whose reply may come after."""


def check_tokens(executions: list[Execution], billing: Billing) -> Check:
    """A completed run's tokens are the usage of its distinct model calls, each counted once.

    Calls billed twice (a retry that asked the model again) are counted, not failed. A run
    stopped mid-call (cancelled) may not count the reply of the call it stopped waiting for:
    billed, never received; counted as abandoned, not failed."""
    evidence = []
    compared = abandoned = 0
    per_tag = Counter(e.tag for e in runs_of(executions) if e.tag)
    for e in runs_of(executions):
        if e.result is None or not e.tag:
            continue
        if per_tag[e.tag] > 1:
            evidence.append(f"{e.tag} is the task of {per_tag[e.tag]} runs: not comparable")
            continue
        compared += 1
        keys = sorted(k for (kind, tag, k) in billing.ok if kind == "step" and tag == e.tag)
        expected = sum(sum(usage_for("step", k)) for k in keys)
        counted = e.result.metadata.tokens_used
        if counted == expected:
            continue
        if (
            e.result.terminated_by in STOPPED
            and keys
            and counted == expected - sum(usage_for("step", keys[-1]))
        ):
            abandoned += 1
            continue
        replies = sum(billing.ok[("step", e.tag, k)] for k in keys)
        evidence.append(
            f"{e.workflow_id} ({e.tag}, {e.result.terminated_by}, "
            f"{e.result.metadata.iterations} iterations): result {counted} tokens, its calls "
            f"{expected} ({replies} replies at iterations {keys}; "
            f"{billing.cut[e.tag]} streams cut)"
        )
    dups = billing.duplicates()
    by_kind: Counter[str] = Counter()
    for (kind, _, _), extra in dups.items():
        by_kind[kind] += extra
    summary = (
        f"{compared} completed runs compared, {abandoned} stopped with a billed reply they "
        f"never read; duplicate billed calls: {sum(dups.values())} "
        f"({', '.join(f'{k} {n}' for k, n in sorted(by_kind.items())) or 'none'}); "
        f"model answered {dict(billing.statuses)}"
    )
    return Check("run tokens = usage of the run's model calls", not evidence, summary, evidence)


def explain_duplicates(billing: Billing, injections: list[Injection], start: float) -> list[str]:
    """Each duplicated call with the injection that came between its first reply and the
    next (the call answered, then lost before its activity completed)."""
    lines = []
    causes: Counter[str] = Counter()
    for key, extra in sorted(billing.duplicates().items()):
        first, second = (t - start for t in billing.times[key][:2])
        between = [i.kind for i in injections if first - 1.5 <= i.at <= second]
        cause = between[0] if between else "no injection"
        causes[cause] += extra
        lines.append(
            f"{key[0]} {key[1]} iteration {key[2]}: {extra + 1} replies, at {first:.0f}s and "
            f"{second:.0f}s ({second - first:.1f}s apart; injected between: {cause})"
        )
    if causes:
        lines.insert(0, "by the injection between the replies: " + ", ".join(
            f"{k} {n}" for k, n in causes.most_common()))  # fmt: skip
    return lines


def check_callers(runs: list[RunRecord], chats: list[ChatRecord]) -> Check:
    """Every caller got its answer: each started run's `agent.result()` returned, each chat
    turn returned. The system was only ever restarting: nothing a caller asked was refused."""
    evidence = [
        f"{r.tag} {r.workflow_id}: agent.result() raised {r.error}"
        for r in runs
        if r.workflow_id is not None and r.result is None
    ]
    evidence += [f"{r.tag}: never started ({r.start_error})" for r in runs if not r.workflow_id]
    evidence += [f"{c.tag} ({c.agent}/{c.session}): raised {c.error}" for c in chats if c.error]
    retried = sum(1 for r in runs if r.workflow_id and r.start_error)
    return Check(
        "every run's and chat turn's caller got its answer",
        not evidence,
        f"{sum(1 for r in runs if r.result)} of {len(runs)} results, "
        f"{sum(1 for c in chats if c.reply)} of {len(chats)} chat replies; "
        f"{retried} starts sent again after a refusal (the soak's own retry)",
        evidence,
    )


# -- chat --------------------------------------------------------------------------------------


async def check_chat(conn: psycopg.AsyncConnection[Any], chats: list[ChatRecord]) -> Check:
    """A turn that returned has its message and its reply saved once each; one that raised
    at most once; each session's positions run 0..n-1."""
    cur = await conn.execute(
        "SELECT agent_id, session_id, position, role, content FROM chat_messages"
        " ORDER BY agent_id, session_id, position"
    )
    rows = await cur.fetchall()
    saved: Counter[tuple[str, str, str, str]] = Counter()
    positions: dict[tuple[str, str], list[int]] = defaultdict(list)
    for agent, session, position, role, content in rows:
        saved[(agent, session, role, content)] += 1
        positions[(agent, session)].append(position)
    evidence = []
    returned = [c for c in chats if c.reply is not None]
    for c in chats:
        asked = saved[(c.agent, c.session, "user", c.message)]
        if c.reply is not None:
            answered = saved[(c.agent, c.session, "assistant", c.reply.message)]
            if (asked, answered) != (1, 1):
                evidence.append(
                    f"{c.tag} ({c.agent}/{c.session}, {c.reply.routed_via}): message saved "
                    f"{asked}x, reply saved {answered}x"
                )
        elif asked > 1:
            evidence.append(f"{c.tag} (raised {c.error}): message saved {asked}x")
    for (agent, session), found in positions.items():
        if found != list(range(len(found))):
            evidence.append(f"{agent}/{session}: positions {found[:3]}…{found[-3:]} have gaps")
    failed = [c for c in chats if c.error is not None]
    reasons = Counter(re.sub(r"\d+", "N", (c.error or "")[:90]) for c in failed)
    summary = (
        f"{len(chats)} turns: {len(returned)} returned "
        f"({sum(1 for c in returned if c.tools)} by tools), {len(failed)} raised"
        + (f" ({'; '.join(f'{n}x {r}' for r, n in reasons.most_common(3))})" if failed else "")
    )
    return Check("chat turns saved exactly once in chat_messages", not evidence, summary, evidence)


# -- histories ---------------------------------------------------------------------------------


BEFORE_A_FAILURE = 10
"""Events named before a failed workflow task, in its evidence: what the task was taking."""

_ARRIVALS = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
}
"""What may reach a run while its last workflow task completes it. Temporal then refuses the
completion (UnhandledCommand), writes what arrived and hands the run a new task, which
completes it: Temporal's own protocol, not a failure of the workflow (the soak's cancels sent
as a run ends, "too late", meet it)."""


def _name(event: HistoryEvent) -> str:
    return EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")


def _task_failures(events: list[HistoryEvent]) -> tuple[list[str], list[str]]:
    """The history's failed workflow tasks, each with the events before it; and apart, the
    completions Temporal refused because a cancel request or a signal arrived meanwhile."""
    failed, refused = [], []
    for at, event in enumerate(events):
        if event.event_type != EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            continue
        attrs = event.workflow_task_failed_event_attributes
        cause = WorkflowTaskFailedCause.Name(attrs.cause)
        after = events[at + 1] if at + 1 < len(events) else None
        if (
            attrs.cause == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND
            and after is not None
            and after.event_type in _ARRIVALS
        ):
            refused.append(f"event {event.event_id}: {_name(after)} arrived")
            continue
        before = [_name(e) for e in events[max(0, at - BEFORE_A_FAILURE) : at]]
        failed.append(
            f"event {event.event_id} {cause}: {attrs.failure.message[:200]}"
            f" (after {', '.join(before)})"
        )
    return failed, refused


def check_task_failures(executions: list[Execution]) -> Check:
    evidence = []
    causes: Counter[str] = Counter()
    refused = 0
    for e in executions:
        failed, arrivals = _task_failures(list(e.history.events))
        refused += len(arrivals)
        for failure in failed:
            causes[failure.split(":", 1)[0].split(" ", 2)[-1]] += 1
            evidence.append(f"{e.workflow_type} {e.workflow_id}: {failure}")
    summary = f"{len(executions)} histories; " + (
        ", ".join(f"{c} {n}" for c, n in causes.items()) if causes else "none failed a task"
    )
    if refused:
        summary += (
            f" ({refused} completions refused by Temporal for a cancel request or signal "
            "that arrived meanwhile, then completed: UnhandledCommand)"
        )
    return Check("no WORKFLOW_TASK_FAILED in any history", not evidence, summary, evidence)


async def check_replay(client: Client, executions: list[Execution]) -> Check:
    replayer = quiet_replayer(WORKFLOWS, client.data_converter)
    evidence = []
    for e in executions:
        report = await replay(e.history, replayer)
        if not report.ok:
            evidence.append(f"{e.workflow_type} {e.workflow_id}: {report.error}")
    return Check(
        "every history replays with the current code",
        not evidence,
        f"{len(executions)} histories replayed",
        evidence,
    )


# -- workers -------------------------------------------------------------------------------------

EXPECTED_EXIT = {"kill": -9, "term": 0, "stop": 0}
ALARMS = ("Fatal Python error", "Task exception was never retrieved", "Exception in callback",
          "Segmentation fault")  # fmt: skip


def check_workers(workers: list[WorkerSlot]) -> Check:
    """Every worker exit was one we caused, with the status it should have; no fatal errors
    in the logs. Tracebacks are listed by their last line (logged retries are expected)."""
    evidence = []
    exits = 0
    for slot in workers:
        for ended in slot.exits:
            exits += 1
            want = EXPECTED_EXIT.get(ended.cause or "")
            if ended.cause is None or (want is not None and ended.code != want):
                evidence.append(
                    f"{slot.name} pid {ended.pid} exited {ended.code} "
                    f"({'on its own' if ended.cause is None else 'after ' + ended.cause})"
                )
        text = slot.log_file.read_text(errors="replace") if slot.log_file.exists() else ""
        for alarm in ALARMS:
            if alarm in text:
                evidence.append(f"{slot.name} log: {text.count(alarm)}x '{alarm}'")
    tracebacks = Counter[str]()
    for slot in workers:
        text = slot.log_file.read_text(errors="replace") if slot.log_file.exists() else ""
        for block in text.split("Traceback (most recent call last):")[1:]:
            last = next(
                (ln for ln in block.splitlines() if ln and not ln.startswith((" ", "\t"))), "?"
            )
            tracebacks[re.sub(r"\d+", "N", last)[:140]] += 1
    summary = f"{exits} exits, {sum(s.starts for s in workers)} starts; tracebacks in logs: " + (
        "; ".join(f"{n}x {t}" for t, n in tracebacks.most_common(6)) or "none"
    )
    return Check("no worker exited but by our hand", not evidence, summary, evidence)
