"""What context management costs an LLM step, next to what the step already does.

Every `llm_step` reads the run's transcript from Postgres; since context management it also
asks `run_context` for the previous call's token count and plan, estimates the request, and
(when it is a quarter full) records the provider's count after the call. Measured here, side
by side in one process against one Postgres, per step at several transcript lengths:

- the transcript read alone (`Store.load_transcript`: what every step did before);
- the context step (`StepContexts.prepare` + `sent`) for a request that fits its window;
- the same when it does not fit: a compaction planned and recorded (rare: once per window);
- the pure planning, without Postgres (`plan_compaction`).

    .venv/bin/python -m bench.context [--quick]
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Awaitable, Callable

from activities.llm_context import StepContexts
from activities.store import Store
from bench._stack import log, machine, open_stack, parser, print_table, run
from reactive_temporal.capabilities import capabilities_for
from reactive_temporal.context_window import plan_compaction, prompt_budget, reserved_output
from reactive_temporal.contracts.run import Message, SeqMessage, ToolCall

OBSERVATION = "Page text, revenue by region and the auditor's notes. " * 20  # about 1 KB


def transcript(turns: int) -> list[SeqMessage]:
    entries = [
        SeqMessage(seq=0, message=Message(role="system", content="You read pages.")),
        SeqMessage(seq=1, message=Message(role="user", content="Read every page.")),
    ]
    for i in range(turns):
        call = ToolCall(id=f"c{i}", name="fetch_page", arguments=f'{{"page": {i}}}')
        entries += [
            SeqMessage(seq=2 + 2 * i, message=Message(role="assistant", tool_calls=[call])),
            SeqMessage(
                seq=3 + 2 * i,
                message=Message(role="tool", content=OBSERVATION, tool_call_id=call.id),
            ),
        ]
    return entries


async def timed(step: Callable[[], Awaitable[object]], trials: int) -> float:
    samples = []
    for _ in range(trials):
        started = time.perf_counter()
        await step()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


async def main() -> None:
    args = parser(__doc__ or "").parse_args()
    trials = 20 if args.quick else 100
    sizes = (10, 50, 200) if args.quick else (10, 50, 100, 200, 400)
    print(f"\n## context — cost of context management per LLM step, {trials} trials each")
    print(f"_{machine()}_\n")
    async with open_stack() as stack:
        store: Store = stack.worker.store
        contexts = StepContexts(store)
        roomy = capabilities_for("bench", context_tokens=1_000_000)
        rows = []
        for turns in sizes:
            log(f"{turns} turns")
            entries = transcript(turns)
            run_id = f"bench-context-{uuid.uuid4().hex[:8]}"
            await store.put_messages(run_id, entries)
            seq = len(entries)

            async def read(run_id: str = run_id, seq: int = seq) -> object:
                return await store.load_transcript(run_id, before_seq=seq)

            async def fits(run_id: str = run_id, seq: int = seq, e: list = entries) -> object:
                context = await contexts.prepare(run_id, seq, e, [], roomy)
                assert contexts.sent(run_id, seq, context, 1_000) is None  # under RECORD_FROM
                return context

            small = capabilities_for("bench", context_tokens=max(4_096, turns * 150))

            async def compacts(e: list = entries, caps: object = small) -> object:
                fresh = f"bench-compact-{uuid.uuid4().hex[:8]}"  # nothing recorded yet
                return await contexts.prepare(fresh, len(e), e, [], caps)  # type: ignore[arg-type]

            budget = prompt_budget(
                small.context_tokens, reserved_output(small.context_tokens, None)
            )

            async def plans(e: list = entries, budget: int = budget) -> object:
                return plan_compaction(e, budget=budget)

            rows.append(
                [
                    len(entries),
                    f"{await timed(read, trials):.2f}",
                    f"{await timed(fits, trials):.2f}",
                    f"{await timed(compacts, max(5, trials // 5)):.2f}",
                    f"{await timed(plans, trials):.2f}",
                ]
            )
        print_table(
            [
                "transcript messages",
                "transcript read (every step), ms",
                "context step, request fits, ms",
                "context step with a compaction recorded, ms",
                "compaction planning alone, ms",
            ],
            rows,
        )


if __name__ == "__main__":
    run(main)
