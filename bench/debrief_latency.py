"""The debrief is off the critical path: `agent.run()` latency with memory on vs off when
the synthesis LLM call takes 2 s.

The run: a zero-latency scripted model calls `noop` once, then answers `FINAL ANSWER:`
with a 200-character answer (over the 100-character trivial threshold, so the debrief is
synthesized). The debrief model (`AgentConfig(debrief_model=...)`) is a second scripted
model whose reply (valid synthesis JSON) takes `delay=2` s. Memory-on and memory-off runs
of the same agent alternate on the same worker and server. For memory-on runs it also
times `await result.debrief_rich()` (run start → rich debrief in hand) before the next
trial, so no debrief overlaps a timed run.

    .venv/bin/python -m bench.debrief_latency [--quick] [--trials T] [--delay SECONDS]
"""

from __future__ import annotations

import json
import time
from typing import Any

from bench._stack import (
    BenchStack,
    Summary,
    log,
    machine,
    open_stack,
    parser,
    print_table,
    profile_history,
    run,
)
from reactive_temporal.embedded.scripted_llm import Reply, Step, call

TASK = "Check the system with the noop tool and report on it."
ANSWER = (
    "The system check completed: the noop tool answered 'ok' on the first call, so the "
    "service is reachable and responding. Nothing needed fixing; no errors were seen. "
    "Recommendation: keep the current setup."
)
assert len(ANSWER) > 150


def agent_model(request: dict[str, Any]) -> Step:
    """Stateless: a noop call first, then the long final answer."""
    if any(m.get("role") == "tool" for m in request.get("messages", [])):
        return Reply(f"FINAL ANSWER: {ANSWER}")
    return Reply("Checking.", [call("noop")])


SYNTHESIS = json.dumps(
    {
        "summary": "The agent checked the system with the noop tool and reported it healthy.",
        "key_findings": ["noop answered ok"],
        "errors_encountered": [],
        "lessons_learned": ["A single noop call is enough to check reachability."],
        "caveats": "",
    }
)


async def one_run(stack: BenchStack, model: str, debrief_model: str, memory: bool) -> dict:
    agent = stack.agent(
        model, agent_id="bench-debrief", memory=memory, debrief_model=debrief_model, tools=["noop"]
    )
    started = time.perf_counter()
    result = await agent.run(TASK)
    run_s = time.perf_counter() - started
    assert result.terminated_by == "final_answer" and result.output == ANSWER, result
    out: dict[str, Any] = {"run": run_s, "run_id": result.run_id}
    if memory:
        rich = await result.debrief_rich()
        out["rich"] = time.perf_counter() - started
        assert rich is not None and rich.synthesized, rich
    return out


async def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--trials", type=int, default=None, help="trials of each (default 10; quick 4)")
    p.add_argument("--delay", type=float, default=2.0, help="synthesis call latency, seconds")
    args = p.parse_args()
    trials = args.trials or (4 if args.quick else 10)

    on: list[dict[str, Any]] = []
    off: list[dict[str, Any]] = []
    tails_on: list[float] = []
    tails_off: list[float] = []
    async with open_stack() as stack:
        model = stack.llm.script(stack.unique("debrief-run"), agent_model)
        debrief_model = stack.llm.script(
            stack.unique("debrief-synth"),
            [Reply(SYNTHESIS, delay=args.delay)],
            repeat_last=True,
        )
        log("warming up")
        for memory in (True, False):
            await one_run(stack, model, debrief_model, memory)
        log(f"{trials} trials × (memory on, memory off)")
        for trial in range(trials):
            order = (True, False) if trial % 2 == 0 else (False, True)
            for memory in order:
                (on if memory else off).append(await one_run(stack, model, debrief_model, memory))
        for runs, tails in ((on, tails_on), (off, tails_off)):
            for r in runs:
                history = await stack.client.get_workflow_handle(r["run_id"]).fetch_history()
                tails.append(profile_history(history).tail)

    s_on = Summary.of([r["run"] for r in on])
    s_off = Summary.of([r["run"] for r in off])
    rich = Summary.of([r["rich"] for r in on])
    ratios = Summary.of([a["run"] / b["run"] for a, b in zip(on, off, strict=True)])
    print(f"\n## debrief_latency — synthesis call {args.delay:g} s, {trials} trials each, "
          "alternating")  # fmt: skip
    print(f"_{machine()}_\n")
    print_table(
        ["", "p50 ms", "p95 ms", "min–max ms"],
        [
            ["`agent.run()` · memory off", f"{s_off.p50 * 1000:.0f}", f"{s_off.p95 * 1000:.0f}",
             f"{s_off.lo * 1000:.0f}–{s_off.hi * 1000:.0f}"],
            ["`agent.run()` · memory on (debrief synthesized)", f"{s_on.p50 * 1000:.0f}",
             f"{s_on.p95 * 1000:.0f}", f"{s_on.lo * 1000:.0f}–{s_on.hi * 1000:.0f}"],
            ["memory on: run start → `debrief_rich()` returned", f"{rich.p50 * 1000:.0f}",
             f"{rich.p95 * 1000:.0f}", f"{rich.lo * 1000:.0f}–{rich.hi * 1000:.0f}"],
        ],
    )  # fmt: skip
    print(
        f"\nratio memory on / off: **{ratios.p50:.2f}×** (median of per-trial ratios; range "
        f"{ratios.lo:.2f}–{ratios.hi:.2f}×); memory on costs "
        f"{(s_on.p50 - s_off.p50) * 1000:+.0f} ms at p50, against a {args.delay:g} s synthesis."
    )
    print(
        f"Rich debrief ready {(rich.p50 - s_on.p50) * 1000:.0f} ms after the run returned "
        f"(p50; the synthesis call alone is {args.delay * 1000:.0f} ms)."
    )
    t_on, t_off = Summary.of(tails_on), Summary.of(tails_off)
    print(
        f"Server-side wrap-up (last activity completed → run closed), p50: memory on "
        f"{t_on.p50 * 1000:.1f} ms, off {t_off.p50 * 1000:.1f} ms (on: the deterministic "
        "debrief, starting the child and waiting for it to be started)."
    )


if __name__ == "__main__":
    run(main)
