"""Per-iteration orchestration overhead of an agent run, versus the floor.

(a) an AgentRunWorkflow of N iterations, each one `llm_step` (a zero-latency scripted model
    that always calls the `noop` tool; `repeat_last=True`, `max_iterations=N`, memory off)
    plus one `run_tool` activity;
(b) a bare workflow defined here that runs 2·N no-op activities in sequence,

both on the same worker and dev server, interleaved trial by trial. Prints ms per iteration
(client-side wall time of a run, start to result, divided by N) and the agent/bare ratio;
then, from the runs' histories, where an iteration's time goes; then the same agent run
under bench-only patches of project behaviour (see VARIANTS), each interleaved with the
unpatched run, so their effect is measured in the same conditions.

    .venv/bin/python -m bench.overhead [--quick] [--iterations N] [--trials T] [--no-variants]

--quick: N=10, 5 trials, no variants.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    import httpx
    import openai
    import openai.resources.chat.completions.completions as openai_completions
    from openai.types.chat import completion_create_params

    import activities.llm_calls as llm_calls
    import activities.llm_context as llm_context
    import activities.tool_calls as tool_activities
    from bench._stack import (
        BenchStack,
        HistoryProfile,
        Summary,
        log,
        machine,
        open_stack,
        parser,
        print_table,
        profile_history,
        run,
    )
    from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call

TASK = "Call the noop tool, again and again."


@activity.defn(name="bench_noop")
async def bench_noop(i: int) -> int:
    return i


@workflow.defn(name="BenchBareWorkflow")
class BenchBareWorkflow:
    """The floor: `activities` no-op activities, one after another."""

    @workflow.run
    async def run(self, activities: int) -> int:
        for i in range(activities):
            await workflow.execute_activity(
                "bench_noop", i, start_to_close_timeout=timedelta(seconds=30)
            )
        return activities


@dataclass
class Sample:
    wall: float
    """Client-side: start to result, seconds."""
    cpu: float
    """CPU seconds this process and the Temporal server used meanwhile."""
    workflow_id: str


async def agent_run(
    stack: BenchStack, model: str, iterations: int, task_queue: str | None = None
) -> Sample:
    agent = stack.agent(
        model, memory=False, tools=["noop"], max_iterations=iterations, task_queue=task_queue
    )
    cpu, started = stack.cpu(), time.perf_counter()
    handle = await agent.start(TASK)
    result = await handle.result()
    sample = Sample(time.perf_counter() - started, stack.cpu() - cpu, handle.id)
    assert result.metadata.iterations == iterations, result
    assert result.terminated_by == "max_iterations", result
    return sample


async def bare_run(stack: BenchStack, iterations: int) -> Sample:
    workflow_id = stack.unique("bench-bare")
    cpu, started = stack.cpu(), time.perf_counter()
    await stack.client.execute_workflow(
        "BenchBareWorkflow",
        2 * iterations,
        id=workflow_id,
        task_queue=stack.task_queue,
        result_type=int,
    )
    return Sample(time.perf_counter() - started, stack.cpu() - cpu, workflow_id)


async def profile(stack: BenchStack, workflow_id: str) -> HistoryProfile:
    return profile_history(await stack.client.get_workflow_handle(workflow_id).fetch_history())


# -- bench-only patches of project behaviour ---------------------------------------------------


@contextlib.contextmanager
def patched(target: Any, name: str, value: Any) -> Iterator[None]:
    original = getattr(target, name)
    setattr(target, name, value)
    try:
        yield
    finally:
        setattr(target, name, original)


@contextlib.asynccontextmanager
async def _no_heartbeat() -> AsyncIterator[None]:
    yield


@contextlib.contextmanager
def no_heartbeating() -> Iterator[None]:
    """`heartbeating()` (activities/heartbeat.py) wraps every LLM call
    (activities/llm_calls.py) and run_tool in a task that beats a third of the heartbeat
    timeout in (never, in a step this short); drop it: what the task itself costs."""
    with (
        patched(llm_calls, "heartbeating", _no_heartbeat),
        patched(tool_activities, "heartbeating", _no_heartbeat),
    ):
        yield


async def _whole_transcript(
    self: Any, run_id: str, seq: int, transcript: Any, tools: Any, caps: Any, **_: Any
) -> Any:
    return llm_context.StepContext(
        view=list(transcript),
        plan=llm_context.ContextPlan(),
        budget=caps.context_tokens,
        estimated=0,
        tools_tokens=0,
        context_tokens=caps.context_tokens,
    )


async def _nothing_recorded(*args: Any, **kwargs: Any) -> None:
    return None


@contextlib.contextmanager
def no_context_management() -> Iterator[None]:
    """The LLM step sends the whole transcript: no estimate, no `run_context` read or write
    (what context management costs a step whose request fits its window)."""
    with (
        patched(llm_context.StepContexts, "prepare", _whole_transcript),
        patched(llm_context.StepContexts, "sent", _nothing_recorded),
    ):
        yield


VARIANTS: list[tuple[str, Callable[[], contextlib.AbstractContextManager[None]]]] = [
    ("no heartbeating task around the steps", no_heartbeating),
    ("no context management (whole transcript sent)", no_context_management),
]
"""What each of these costs an iteration. (The variants that skipped openai's request
transform, the per-iteration search-attribute upsert and the activity round trips of
`prepare_run` and `record_messages` measured changes that have since become the project's
behaviour, and were removed on 2026-12-03.)"""


# -- reporting ----------------------------------------------------------------------------------


def breakdown(
    agent: list[HistoryProfile], bare: list[HistoryProfile], iterations: int
) -> list[list[str]]:
    """Median over runs of (time spent in X during the run) / iterations, from server
    event times. With eager activities, "running" starts when the server hands the task
    out with the workflow task's completion, so it includes that hop to the worker."""

    def med(profiles: list[HistoryProfile], fn: Callable[[HistoryProfile], float]) -> str:
        return f"{Summary.of([fn(p) / iterations for p in profiles]).p50 * 1000:.2f}"

    def once(profiles: list[HistoryProfile], fn: Callable[[HistoryProfile], float]) -> str:
        return f"{Summary.of([fn(p) for p in profiles]).p50 * 1000:.1f}"

    def count(profiles: list[HistoryProfile]) -> str:
        return f"{Summary.of([len(p.wft) / iterations for p in profiles]).p50:.2f}"

    def exec_of(kind: str) -> Callable[[HistoryProfile], float]:
        return lambda p: sum(p.activity_exec.get(kind, []))

    def queued(p: HistoryProfile) -> float:
        return sum(sum(v) for v in p.activity_queue.values())

    return [
        ["`llm_step` running (started → completed)", med(agent, exec_of("llm_step")), "—"],
        ["`run_tool` running (started → completed)", med(agent, exec_of("run_tool")), "—"],
        ["2 × `bench_noop` running", "—", med(bare, exec_of("bench_noop"))],
        ["activities queued (scheduled → started)", med(agent, queued), med(bare, queued)],
        [
            "workflow tasks (scheduled → completed)",
            med(agent, lambda p: sum(p.wft)),
            med(bare, lambda p: sum(p.wft)),
        ],
        ["workflow tasks per iteration (count)", count(agent), count(bare)],
        [
            "server-side wall (first → last event)",
            med(agent, lambda p: p.wall),
            med(bare, lambda p: p.wall),
        ],
        [
            "once per run, ms: start → first `llm_step` / `bench_noop` scheduled",
            once(agent, lambda p: p.first_scheduled.get("llm_step", 0.0)),
            once(bare, lambda p: p.first_scheduled.get("bench_noop", 0.0)),
        ],
        [
            "once per run, ms: last activity completed → run closed",
            once(agent, lambda p: p.tail),
            once(bare, lambda p: p.tail),
        ],
    ]


async def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--iterations", type=int, default=None, help="N (default 20; quick 10)")
    p.add_argument("--trials", type=int, default=None, help="trials of each (default 15; quick 5)")
    p.add_argument(
        "--no-variants", action="store_true", help="skip the variants (the default with --quick)"
    )
    args = p.parse_args()
    n = args.iterations or (10 if args.quick else 20)
    trials = args.trials or (5 if args.quick else 15)
    variant_trials = max(3, trials // 3)

    async with open_stack(workflows=[BenchBareWorkflow], activities=[bench_noop]) as stack:
        script = [Reply("Calling noop.", [call("noop")])]
        model = stack.llm.script(stack.unique("overhead"), script, repeat_last=True)
        log("warming up")
        for _ in range(2):
            await agent_run(stack, model, n)
            await bare_run(stack, n)

        log(f"{trials} trials × (agent run, bare workflow) of {n} iterations")
        agent: list[Sample] = []
        bare: list[Sample] = []
        for trial in range(trials):
            if trial % 2 == 0:  # alternate the order so neither always runs second
                agent.append(await agent_run(stack, model, n))
                bare.append(await bare_run(stack, n))
            else:
                bare.append(await bare_run(stack, n))
                agent.append(await agent_run(stack, model, n))
        agent_profiles = [await profile(stack, s.workflow_id) for s in agent]
        bare_profiles = [await profile(stack, s.workflow_id) for s in bare]

        variant_rows: list[list[str]] = []
        if not (args.no_variants or args.quick):
            variant_rows = await measure_variants(stack, model, script, n, variant_trials)
        client_rows = await llm_client_cost(stack, model)

    def row(label: str, samples: list[Sample]) -> list[str]:
        wall = Summary.of([s.wall / n for s in samples])
        cpu = Summary.of([s.cpu / n for s in samples])
        return [
            label,
            f"{wall.p50 * 1000:.1f}",
            f"{wall.p95 * 1000:.1f}",
            f"{wall.lo * 1000:.1f}–{wall.hi * 1000:.1f}",
            f"{cpu.p50 * 1000:.1f}",
        ]

    ratio = Summary.of([a.wall / b.wall for a, b in zip(agent, bare, strict=True)])
    cpu_ratio = Summary.of([a.cpu / b.cpu for a, b in zip(agent, bare, strict=True)])
    print(f"\n## overhead — {n} iterations per run, {trials} interleaved trials")
    print(f"_{machine()}_\n")
    print_table(
        ["workflow", "ms / iteration (p50)", "p95", "min–max", "CPU ms / iteration (p50)"],
        [
            row("agent run: llm_step + noop tool", agent),
            row("bare workflow: 2 no-op activities", bare),
        ],
    )
    print(
        f"\nratio agent / bare: **{ratio.p50:.2f}×** wall time (median of per-trial ratios; "
        f"p95 {ratio.p95:.2f}×, range {ratio.lo:.2f}–{ratio.hi:.2f}×); "
        f"{cpu_ratio.p50:.2f}× CPU (this process + Temporal server)"
    )
    print("\nWhere an iteration goes (ms per iteration, median over runs; server event times):\n")
    print_table(["", "agent", "bare"], breakdown(agent_profiles, bare_profiles, n))
    if variant_rows:
        print(
            f"\nThe agent run under bench-only changes ({variant_trials} trials each, each trial "
            "interleaved with an unchanged run; Δ = median of per-trial differences, "
            "per iteration):\n"
        )
        print_table(
            [
                "agent run variant",
                "ms / iteration",
                "Δ ms / iteration",
                "CPU ms / iteration",
                "Δ CPU ms / iteration",
                "per run: start → 1st llm_step, ms",
                "per run: last activity → closed, ms",
            ],
            variant_rows,
        )
    print(
        "\nOne LLM call against the zero-latency scripted model, by transcript length "
        "(ms, p50 of 15; `llm_step` sends the whole transcript every iteration):\n"
    )
    print_table(
        [
            "transcript messages",
            "openai `chat.completions.create()`",
            "same body, plain httpx POST",
            "openai request transform alone",
        ],
        client_rows,
    )


def transcript(messages: int) -> list[dict[str, Any]]:
    """A run's transcript after (messages - 2) / 2 noop iterations, in the wire shape."""
    out: list[dict[str, Any]] = [
        {"role": "system", "content": "You are bench-agent. " * 40},
        {"role": "user", "content": TASK},
    ]
    while len(out) < messages:
        call_id = f"call_{len(out)}"
        out.append(
            {
                "role": "assistant",
                "content": "Calling noop.",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "noop", "arguments": "{}"},
                    }
                ],
            }
        )
        out.append({"role": "tool", "content": "ok", "tool_call_id": call_id})
    return out


async def llm_client_cost(stack: BenchStack, model: str) -> list[list[str]]:
    """Where an LLM call's time goes with a zero-latency model: the openai client's request
    transform (it walks every message) versus the HTTP round trip itself."""
    client = openai.AsyncOpenAI(base_url=stack.llm.base_url, api_key="bench", max_retries=0)
    http = httpx.AsyncClient(base_url=stack.llm.base_url)
    expected = completion_create_params.CompletionCreateParamsNonStreaming
    rows = []
    try:
        for size in (2, 22, 42, 102, 202):
            body = {"model": model, "messages": transcript(size)}
            create: list[float] = []
            post: list[float] = []
            transform: list[float] = []
            for _ in range(18):
                started = time.perf_counter()
                await client.chat.completions.create(**body)  # type: ignore[call-overload]
                create.append(time.perf_counter() - started)
                started = time.perf_counter()
                (await http.post("/chat/completions", json=body)).json()
                post.append(time.perf_counter() - started)
                started = time.perf_counter()
                await openai_completions.async_maybe_transform(body, expected)
                transform.append(time.perf_counter() - started)
            rows.append(
                [str(size)]
                + [f"{Summary.of(v[3:]).p50 * 1000:.2f}" for v in (create, post, transform)]
            )
    finally:
        await client.close()
        await http.aclose()
    return rows


async def fixed_costs(stack: BenchStack, samples: list[Sample]) -> list[str]:
    """Median per-run start (→ first llm_step scheduled) and wrap-up (→ closed), in ms."""
    profiles = [await profile(stack, s.workflow_id) for s in samples]
    start = Summary.of([p.first_scheduled.get("llm_step", 0.0) for p in profiles]).p50
    tail = Summary.of([p.tail for p in profiles]).p50
    return [f"{start * 1000:.1f}", f"{tail * 1000:.1f}"]


async def measure_variants(
    stack: BenchStack, model: str, script: list[Reply], n: int, trials: int
) -> list[list[str]]:
    """Each variant, each trial paired with an unchanged agent run just before it."""
    stock = ScriptedLLM().start()  # the project's ScriptedLLM as shipped (Nagle on)
    stock.script(model, script, repeat_last=True)
    rows: list[list[str]] = []
    try:
        async with (
            stack.extra_worker(llm_base_url=stock.base_url) as stock_queue,
            stack.extra_worker(disable_eager_activity_execution=True) as no_eager_queue,
        ):
            await agent_run(stack, model, n, stock_queue)  # warm both workers
            await agent_run(stack, model, n, no_eager_queue)
            cases: list[tuple[str, Callable[[], contextlib.AbstractContextManager[None]], str]]
            cases = [
                ("ScriptedLLM as shipped (Nagle on; bench default is TCP_NODELAY)",
                 contextlib.nullcontext, stock_queue),
                ("eager activity execution disabled on the worker",
                 contextlib.nullcontext, no_eager_queue),
            ]  # fmt: skip
            cases += [(name, patch, stack.task_queue) for name, patch in VARIANTS]
            unchanged: list[Sample] = []
            for name, patch, queue in cases:
                log(f"variant: {name}")
                pairs: list[tuple[Sample, Sample]] = []
                for _ in range(trials):
                    base = await agent_run(stack, model, n)
                    with patch():
                        pairs.append((base, await agent_run(stack, model, n, queue)))
                unchanged += [b for b, _ in pairs]
                changed = [v for _, v in pairs]
                rows.append(
                    [
                        name,
                        f"{Summary.of([v.wall / n for v in changed]).p50 * 1000:.1f}",
                        f"{Summary.of([(v.wall - b.wall) / n for b, v in pairs]).p50 * 1000:+.1f}",
                        f"{Summary.of([v.cpu / n for v in changed]).p50 * 1000:.1f}",
                        f"{Summary.of([(v.cpu - b.cpu) / n for b, v in pairs]).p50 * 1000:+.1f}",
                        *await fixed_costs(stack, changed),
                    ]
                )
            rows.insert(
                0,
                [
                    "unchanged (all variant trials)",
                    f"{Summary.of([b.wall / n for b in unchanged]).p50 * 1000:.1f}",
                    "—",
                    f"{Summary.of([b.cpu / n for b in unchanged]).p50 * 1000:.1f}",
                    "—",
                    *await fixed_costs(stack, unchanged),
                ],
            )
    finally:
        stock.stop()
    return rows


if __name__ == "__main__":
    run(main)
