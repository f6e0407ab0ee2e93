"""A chaos soak: a mixed workload under mixed failures, then the product's invariants.

    python -m bench.chaos [--quick] [--seed S] [--keep]

Starts its own stack (bench/_chaos_stack.py: a Temporal dev server on a SQLite file,
Postgres behind a proxy that can cut connections, a flaky scripted model, two `worker.py`
processes), drives runs and chat turns at a steady rate (bench/_chaos_load.py) while it
kills, stops and restarts the parts at seeded random times, lets the system settle
(bounded), then checks (bench/_chaos_checks.py): every run and debrief ended; one debrief
row per ended run; transcripts without gaps or doubles; each run's tokens equal the usage
of its model calls (calls billed twice counted, with the injection that caused them);
every chat turn that returned saved once; every caller got its answer (no run's result
wait, no chat turn raised); no workflow task failed; every history replays; no worker died
but by our hand.

Progress goes to stderr; the report (Markdown) to stdout. The seed is printed first: the
same seed gives the same plan (workload and injection times), though not the same
interleaving, which the machine decides. Exit status 1 when an invariant fails.

Default ~5 minutes (200 s of load, 12 injections), `--quick` ~2 minutes (70 s, 6).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
from collections import Counter
from typing import Any

import psycopg
from temporalio.runtime import Runtime, TelemetryConfig

from bench import _chaos_checks as checks
from bench._chaos_load import CHAT_AGENTS, Load, Plan
from bench._chaos_stack import ChaosStack, log, open_chaos_stack
from reactive_temporal.contracts import names


async def supervise(stack: ChaosStack) -> None:
    """Start again a worker that exited on its own (its exit stays recorded as a crash)."""
    while True:
        await asyncio.sleep(3)
        for slot in stack.workers:
            if slot.process is not None and slot.process.poll() is not None and not slot.cause:
                log(f"{slot.name} exited on its own ({slot.process.returncode}): starting it")
                slot.reap()
                await slot.start()


async def settle(stack: ChaosStack, load: Load, seconds: float) -> float:
    """Wait (at most `seconds`) for every run the soak started and every workflow on the
    server but the agents' entities to end; returns how long it took."""
    began = time.monotonic()
    pending = [t for t in load.tasks if not t.done()]
    if pending:
        await asyncio.wait(pending, timeout=seconds)
    while time.monotonic() - began < seconds:
        try:
            running = [
                wf.id
                async for wf in stack.client.list_workflows("ExecutionStatus = 'Running'")
                if wf.workflow_type != names.AGENT_WORKFLOW
            ]
        except Exception as err:
            log(f"settle: {err}")
            running = ["?"]
        if not running:
            break
        log(f"settling: {len(running)} workflows still running")
        await asyncio.sleep(5)
    return time.monotonic() - began


def outcomes(load: Load) -> list[str]:
    """How the soak's own runs ended, by what was asked of them."""
    table: Counter[tuple[str, str]] = Counter()
    odd = []
    for r in load.runs:
        kind = (
            "cancelled by the API" if r.cancel_after is not None
            else "approval" if r.approval
            else "required tool" if r.options.get("q")
            else "plain"
        )  # fmt: skip
        ending: str
        if r.result is not None:
            ending = r.result.terminated_by
        elif r.workflow_id is None:
            ending = "never started"
        else:
            ending = f"no result ({(r.error or '')[:60]})"
        table[(kind, ending)] += 1
        expected = r.result is not None and (
            r.result.success
            or r.result.terminated_by == "llm_error"  # a storm outlasted its attempts
            or (r.cancel_after is not None and r.result.terminated_by == "cancelled")
        )
        if not expected:
            detail = r.result.error if r.result is not None else r.error or r.start_error
            odd.append(f"{r.tag} {r.workflow_id} ({kind}): {ending}: {(detail or '')[:200]}")
    lines = ["| runs asked | ended | count |", "|---|---|---|"]
    lines += [f"| {k} | {e} | {n} |" for (k, e), n in sorted(table.items())]
    if odd:
        lines += ["", "Runs that ended otherwise than success, llm_error or (asked) cancelled:"]
        lines += [f"- {line}" for line in odd]
    return lines


async def soak(args: argparse.Namespace) -> int:
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    load_seconds = 70.0 if args.quick else 200.0
    plan = Plan.make(seed, load_seconds, rounds=1 if args.quick else 2)
    print(f"# Chaos soak, seed {seed}{' (--quick)' if args.quick else ''}\n", flush=True)
    log(f"seed {seed}: {load_seconds:.0f}s of load, {len(plan.injections)} injections at "
        + ", ".join(f"{i.at:.0f}s {i.kind}" for i in plan.injections))  # fmt: skip
    async with open_chaos_stack(seed, keep=args.keep) as stack:
        load = Load(stack, plan, random.Random(seed))
        background = [
            asyncio.create_task(load.approve_forever()),
            asyncio.create_task(load.report_progress()),
            asyncio.create_task(supervise(stack)),
        ]
        driving = [
            asyncio.create_task(load.launch_runs()),
            asyncio.create_task(load.inject_all()),
            asyncio.create_task(load.chat_forever(CHAT_AGENTS[0], "chaos-s0", 0.5)),
            asyncio.create_task(load.chat_forever(CHAT_AGENTS[1], "chaos-s1", 1.5)),
            asyncio.create_task(load.chat_forever(CHAT_AGENTS[0], None, 2.5)),
        ]
        await asyncio.gather(*driving)
        log(f"load over at {load.elapsed():.0f}s; settling")
        await stack.keep_workers_up()
        settled = await settle(stack, load, 75.0 if args.quick else 120.0)
        for task in background:
            task.cancel()
        log(f"settled in {settled:.0f}s; checking")
        executions = await checks.collect(stack.client)
        async with await psycopg.AsyncConnection.connect(stack.direct_url) as conn:
            results = [
                await checks.check_terminal(stack.client, executions),
                await checks.check_debriefs(conn, executions),
                await checks.check_transcripts(conn, executions),
            ]
            billing = checks.Billing.read(stack.model_log)
            results.append(checks.check_tokens(executions, billing))
            results.append(await checks.check_chat(conn, load.chats))
        results.append(checks.check_callers(load.runs, load.chats))
        results.append(checks.check_task_failures(executions))
        results.append(await checks.check_replay(stack.client, executions))
        for slot in stack.workers:
            await slot.end("stop")
        results.append(checks.check_workers(stack.workers))
        report(load, plan, settled, results, billing)
        if args.keep:
            print(f"\nStack directory kept: {stack.tmp}")
    return 0 if all(r.ok for r in results) else 1


def _cancelled(outcome: str | None) -> str:
    """What a cancel request did, in a word or two."""
    if outcome is None or outcome == "sent":
        return outcome or "not sent"
    return "too late (run ended)" if "is not running" in outcome else outcome[:80]


def report(
    load: Load, plan: Plan, settled: float, results: list[checks.Check], billing: Any
) -> None:
    chats = load.chats
    out = [
        f"{len(load.runs)} runs started over {plan.load_seconds:.0f}s "
        f"({sum(1 for r in load.runs if r.options.get('q'))} with a required tool, "
        f"{sum(1 for r in load.runs if r.approval)} with approvals ({load.approvals} approved), "
        f"{sum(1 for r in load.runs if r.cancel_after is not None)} cancelled by the API: "
        f"{dict(Counter(_cancelled(r.cancel) for r in load.runs if r.cancel_after))}); "
        f"{len(chats)} chat turns ({sum(1 for c in chats if c.tools)} by tools); "
        f"settled in {settled:.0f}s.",
        "",
        "Injections:",
        "",
    ]
    out += [
        f"- {i.at:5.0f}s {i.kind}: {i.detail or ''}{' ERROR ' + i.error if i.error else ''}"
        for i in plan.injections
    ]
    out += ["", *outcomes(load), "", "Invariants:", ""]
    for result in results:
        out += result.lines()
    duplicates = checks.explain_duplicates(billing, plan.injections, load.started_wall)
    if duplicates:
        out += ["", "Duplicate billed model calls (the same call answered twice):", ""]
        out += [f"- {line}" for line in duplicates[:40]]
    failed = [r.name for r in results if not r.ok]
    out += ["", f"**{len(results) - len(failed)}/{len(results)} invariants hold**"
            + (f"; failed: {', '.join(failed)}" if failed else "")]  # fmt: skip
    print("\n".join(out), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="~2 minutes: 70 s of load, 6 injections")
    p.add_argument("--seed", type=int, help="the plan's seed (default: a random one, printed)")
    p.add_argument("--keep", action="store_true", help="keep the stack's directory (logs)")
    args = p.parse_args()
    # the Temporal core's retry warnings (a server restart is on the plan) would go to stdout
    Runtime.set_default(Runtime(telemetry=TelemetryConfig(logging=None)))
    code = asyncio.run(soak(args))
    sys.stdout.flush()
    os._exit(code)  # a Temporal client can abort at interpreter exit (DESIGN: pitfalls)


if __name__ == "__main__":
    main()
