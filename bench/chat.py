"""Chat: a direct-path turn versus the LLM call alone, and the session `history` query.

- turn: `await agent.chat(message, use_tools=False)` — an update-with-start on the agent's
  AgentWorkflow, whose handler makes one `chat_direct` activity (one LLM call);
- LLM call alone: right after each turn, the exact request that turn sent to the scripted
  model (as the server received it) is sent again with the `openai` client from here;
- `session.history()`: a query on the AgentWorkflow, timed on a session of a few turns;
- the same request sent to a second ScriptedLLM as shipped (no TCP_NODELAY; the bench's
  own scripted model has it set, see bench/_stack.py `zero_latency`);
- the floor, defined here: the same update-with-start call on a bare workflow whose update
  handler runs one no-op activity, and a query on it returning a short list.

The agent first does one run, so chat has a last-run context, as it would in use. Zero-latency
scripted model over HTTP, one worker, one dev server.

    .venv/bin/python -m bench.chat [--quick] [--turns T]
"""

from __future__ import annotations

import time
from datetime import timedelta

from temporalio import workflow
from temporalio.client import WithStartWorkflowOperation
from temporalio.common import WorkflowIDConflictPolicy

with workflow.unsafe.imports_passed_through():
    import openai

    from bench._stack import (
        BenchStack,
        Summary,
        log,
        machine,
        open_stack,
        parser,
        print_table,
        run,
    )
    from bench.overhead import bench_noop
    from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call


@workflow.defn(name="BenchChatFloorWorkflow")
class BenchChatFloorWorkflow:
    """The floor of a chat turn: an update that runs one no-op activity, and a query."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)

    @workflow.update
    async def turn(self, message: str) -> str:
        await workflow.execute_activity(
            "bench_noop", len(self.messages), start_to_close_timeout=timedelta(seconds=30)
        )
        self.messages += [message, "ok"]
        return "ok"

    @workflow.query
    def history(self) -> list[str]:
        return list(self.messages)


async def floor_turn(stack: BenchStack, workflow_id: str, message: str) -> str:
    start: WithStartWorkflowOperation[BenchChatFloorWorkflow, None] = WithStartWorkflowOperation(
        BenchChatFloorWorkflow.run,
        id=workflow_id,
        task_queue=stack.task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
    return await stack.client.execute_update_with_start_workflow(
        BenchChatFloorWorkflow.turn, message, start_workflow_operation=start
    )


QUESTIONS = [
    "What did you find in the last run?",
    "Summarize what you did earlier.",
    "What did the noop tool return?",
]


async def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--turns", type=int, default=None, help="chat turns (default 40; quick 12)")
    args = p.parse_args()
    turns = args.turns or (12 if args.quick else 40)
    queries = 5 * turns

    async with open_stack(workflows=[BenchChatFloorWorkflow], activities=[bench_noop]) as stack:
        model = stack.llm.script(
            stack.unique("chat"),
            [
                Reply("Checking.", [call("noop")]),
                Reply("FINAL ANSWER: The noop tool answered ok."),
                Reply("In my last run I called the noop tool once; it answered ok."),
            ],
            repeat_last=True,
        )
        agent = stack.agent(model, agent_id=stack.unique("bench-chat"), tools=["noop"])
        await agent.run("Check the system with the noop tool.")
        await agent.wait_for_debriefs(30)
        direct = openai.AsyncOpenAI(base_url=stack.llm.base_url, api_key="bench", max_retries=0)
        shipped = ScriptedLLM().start()
        shipped.script(
            model, [Reply("In my last run I called the noop tool once.")], repeat_last=True
        )
        to_shipped = openai.AsyncOpenAI(base_url=shipped.base_url, api_key="bench", max_retries=0)
        try:
            floor_id = stack.unique("bench-chat-floor")
            log("warming up")
            for q in QUESTIONS:
                await agent.chat(q, use_tools=False)
                await direct.chat.completions.create(**stack.llm.requests[model][-1])
                await to_shipped.chat.completions.create(**stack.llm.requests[model][-1])
                await floor_turn(stack, floor_id, q)

            log(f"{turns} × (chat turn, its LLM request sent directly, floor update)")
            turn_s: list[float] = []
            llm_s: list[float] = []
            floor_s: list[float] = []
            shipped_s: list[float] = []
            for i in range(turns):
                started = time.perf_counter()
                reply = await agent.chat(QUESTIONS[i % len(QUESTIONS)], use_tools=False)
                turn_s.append(time.perf_counter() - started)
                assert reply.routed_via == "direct-llm", reply
                request = stack.llm.requests[model][-1]
                started = time.perf_counter()
                await direct.chat.completions.create(**request)
                llm_s.append(time.perf_counter() - started)
                started = time.perf_counter()
                await to_shipped.chat.completions.create(**request)
                shipped_s.append(time.perf_counter() - started)
                started = time.perf_counter()
                await floor_turn(stack, floor_id, QUESTIONS[i % len(QUESTIONS)])
                floor_s.append(time.perf_counter() - started)

            log(f"{queries} `history` queries on a session of 4 turns")
            session = agent.session()
            for q in QUESTIONS + QUESTIONS[:1]:
                await session.chat(q, use_tools=False)
            floor_handle = stack.client.get_workflow_handle(floor_id)
            history_s: list[float] = []
            floor_query_s: list[float] = []
            for _ in range(queries):
                started = time.perf_counter()
                messages = await session.history()
                history_s.append(time.perf_counter() - started)
                assert len(messages) == 8, messages
                started = time.perf_counter()
                await floor_handle.query(BenchChatFloorWorkflow.history)
                floor_query_s.append(time.perf_counter() - started)
            await floor_handle.terminate("benchmark over")
        finally:
            await direct.close()
            await to_shipped.close()
            shipped.stop()

    turn, llm, hist = Summary.of(turn_s), Summary.of(llm_s), Summary.of(history_s)
    floor, floor_query = Summary.of(floor_s), Summary.of(floor_query_s)
    ratios = Summary.of([t / c for t, c in zip(turn_s, llm_s, strict=True)])
    extra = Summary.of([t - c for t, c in zip(turn_s, llm_s, strict=True)])
    to_floor = Summary.of([(t - c) / f for t, c, f in zip(turn_s, llm_s, floor_s, strict=True)])
    query_ratio = Summary.of([h / f for h, f in zip(history_s, floor_query_s, strict=True)])
    print(f"\n## chat — {turns} direct-path turns, {queries} history queries")
    print(f"_{machine()}_\n")

    def row(label: str, s: Summary) -> list[str]:
        return [
            label,
            f"{s.p50 * 1000:.1f}",
            f"{s.p95 * 1000:.1f}",
            f"{s.lo * 1000:.1f}–{s.hi * 1000:.1f}",
        ]

    print_table(
        ["", "p50 ms", "p95 ms", "min–max ms"],
        [
            row("`agent.chat(…, use_tools=False)` turn", turn),
            row("the same LLM request, sent directly (openai client)", llm),
            row(
                "the same request, to the ScriptedLLM as shipped (Nagle on)", Summary.of(shipped_s)
            ),
            row("turn − LLM call (per-turn difference)", extra),
            row("floor: update-with-start running one no-op activity", floor),
            row("`session.history()` query", hist),
            row("floor: query on the bare workflow", floor_query),
        ],
    )
    print(
        f"\nratio turn / LLM call alone: **{ratios.p50:.1f}×** (median of per-turn ratios; "
        f"p95 {ratios.p95:.1f}×); (turn − LLM call) / floor update: {to_floor.p50:.2f}×; "
        f"history query / floor query: {query_ratio.p50:.2f}×"
    )


if __name__ == "__main__":
    run(main)
