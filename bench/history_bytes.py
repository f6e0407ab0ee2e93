"""Workflow history bytes per iteration at 5, 30 and 100 iterations.

The run of tests/workflow/test_history_growth.py, measured: a scripted model that calls
`calculator("123456789 * 987654321")` every turn (the same tool output every iteration),
the project's default agent settings (memory on, every tool), `max_iterations` = 5, 30,
100. Size is `len(handle.fetch_history().to_json())` in bytes, the measure of issue 14's goal,
and the protobuf size the server stores and its history size limits apply to (there the
bare workflow's events, which carry no payload at all, weigh less still, so the ratio is
higher). The marginal figure (bytes added per extra iteration between two sizes) is the one
without the fixed start and end of a run. A bare workflow of 2 no-op activities per
iteration is the floor.

    .venv/bin/python -m bench.history_bytes [--quick] [--runs R]
"""

from __future__ import annotations

from collections import defaultdict

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
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
    from bench.overhead import BenchBareWorkflow, bench_noop
    from reactive_temporal.embedded.scripted_llm import Reply, call

SIZES = (5, 30, 100)


async def agent_history(stack: BenchStack, model: str, iterations: int) -> tuple[int, int, dict]:
    agent = stack.agent(model, max_iterations=iterations)
    handle = await agent.start("Keep multiplying")
    result = await handle.result()
    assert result.metadata.iterations == iterations, result
    history = await handle.fetch_history()
    proto = sum(e.ByteSize() for e in history.events)
    return len(history.to_json().encode()), proto, profile_history(history).by_type


async def bare_history(stack: BenchStack, iterations: int) -> tuple[int, int]:
    handle = await stack.client.start_workflow(
        "BenchBareWorkflow",
        2 * iterations,
        id=stack.unique("bench-bare"),
        task_queue=stack.task_queue,
        result_type=int,
    )
    await handle.result()
    history = await handle.fetch_history()
    return len(history.to_json().encode()), sum(e.ByteSize() for e in history.events)


async def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--runs", type=int, default=None, help="runs per size (default 3; quick 1)")
    args = p.parse_args()
    runs = args.runs or (1 if args.quick else 3)

    json_bytes: dict[int, list[int]] = defaultdict(list)
    proto_bytes: dict[int, list[int]] = defaultdict(list)
    bare_json: dict[int, list[int]] = defaultdict(list)
    bare_proto: dict[int, list[int]] = defaultdict(list)
    by_type_100: dict[str, int] = {}
    async with open_stack(workflows=[BenchBareWorkflow], activities=[bench_noop]) as stack:
        model = stack.llm.script(
            stack.unique("growth"),
            [Reply("Another step.", [call("calculator", expression="123456789 * 987654321")])],
            repeat_last=True,
        )
        for r in range(runs):
            for n in SIZES:
                log(f"run {r + 1}/{runs}: {n} iterations")
                j, pb, by_type = await agent_history(stack, model, n)
                json_bytes[n].append(j)
                proto_bytes[n].append(pb)
                if n == SIZES[-1]:
                    by_type_100 = by_type
                bj, bp = await bare_history(stack, n)
                bare_json[n].append(bj)
                bare_proto[n].append(bp)

    def med(values: list[int]) -> float:
        return Summary.of([float(v) for v in values]).p50

    print(f"\n## history_bytes — median of {runs} run(s) per size")
    print(f"_{machine()}_\n")
    rows = []
    for n in SIZES:
        rows.append(
            [
                n,
                f"{med(json_bytes[n]):,.0f}",
                f"{med(json_bytes[n]) / n:,.0f}",
                f"{med(proto_bytes[n]) / n:,.0f}",
                f"{med(bare_json[n]) / n:,.0f}",
                f"{med(bare_proto[n]) / n:,.0f}",
                f"{med(json_bytes[n]) / med(bare_json[n]):.2f}×",
                f"{med(proto_bytes[n]) / med(bare_proto[n]):.2f}×",
            ]
        )
    print_table(
        [
            "iterations",
            "agent history (JSON bytes)",
            "JSON bytes / iteration",
            "proto bytes / iteration",
            "bare: JSON bytes / iteration",
            "bare: proto bytes / iteration",
            "agent / bare (JSON)",
            "agent / bare (proto)",
        ],
        rows,
    )
    lo, mid, hi = SIZES
    marginal = [
        (f"{lo} → {mid}", (med(json_bytes[mid]) - med(json_bytes[lo])) / (mid - lo),
         (med(bare_json[mid]) - med(bare_json[lo])) / (mid - lo)),
        (f"{mid} → {hi}", (med(json_bytes[hi]) - med(json_bytes[mid])) / (hi - mid),
         (med(bare_json[hi]) - med(bare_json[mid])) / (hi - mid)),
    ]  # fmt: skip
    print("\nMarginal JSON bytes per extra iteration (flat = linear growth):\n")
    print_table(
        ["between", "agent", "bare", "agent / bare"],
        [[m, f"{a:,.0f}", f"{b:,.0f}", f"{a / b:.2f}×"] for m, a, b in marginal],
    )
    print(f"\nProto bytes per iteration by event type, {hi}-iteration agent run (top 8):\n")
    top = sorted(by_type_100.items(), key=lambda kv: -kv[1])[:8]
    print_table(
        ["event type", "proto bytes / iteration", "share of the history"],
        [[t, f"{b / hi:,.0f}", f"{b / sum(by_type_100.values()):.0%}"] for t, b in top],
    )


if __name__ == "__main__":
    run(main)
