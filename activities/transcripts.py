"""A run's transcript as `llm_step` reads it: only what is new since the worker's last step.

Every step sends the model the whole transcript, and reading all of it from Postgres every
time is a query and a decode that grow with the run (O(N) a step, O(N²) a run). The worker
that ran a run's previous step already holds the transcript up to that step's reply, so the
next step reads only the rows written since (the tool results, notes) and appends them.

When is the held part trustworthy? Within one workflow run (one Temporal run id), the rows
before a step are written by that run's own activities before the workflow schedules the
step, and the step's own reply is added here as it is recorded. A reset or rerun, a
continue-as-new (a new run id), a step on another worker, or an evicted entry reads the whole
transcript, as before; so does a read whose new rows are not exactly the next positions.

Each model's turn is held with what its step recorded beside it (`ThoughtEntry`): its
thinking, for the endpoints that want it back (the others' requests leave it out), and the
state the endpoint attached to it, which goes back whenever there is one.

Memory is bounded: at most MAX_RUNS runs and MAX_CHARS characters of message text (thinking
and state included) per worker, least recently used first out.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from psycopg import AsyncConnection
from temporalio import activity

from activities.store import Store
from activities.transcript_rows import ThoughtEntry, turn_entry
from reactive_temporal.contracts.run import Message, SeqMessage

MAX_RUNS = 2_000
MAX_CHARS = 40_000_000
"""About 40–80 MB of text at most, held for the runs a worker serves."""


def _size(entry: SeqMessage) -> int:
    message = entry.message
    beside = len(entry.thinking) + entry.state_chars if isinstance(entry, ThoughtEntry) else 0
    return (
        len(message.content or "") + sum(len(c.arguments) for c in message.tool_calls) + 64 + beside
    )


@dataclass
class _Held:
    messages: list[SeqMessage] = field(default_factory=list)
    chars: int = 0

    @property
    def next_seq(self) -> int:
        return self.messages[-1].seq + 1 if self.messages else 0


class Transcripts:
    """Per worker: each run's transcript so far, kept between its steps."""

    def __init__(self, store: Store, *, max_runs: int = MAX_RUNS, max_chars: int = MAX_CHARS):
        self.store = store
        self.max_runs = max_runs
        self.max_chars = max_chars
        self._held: OrderedDict[tuple[str, str], _Held] = OrderedDict()
        self._chars = 0
        self.full_reads = 0
        self.partial_reads = 0

    @staticmethod
    def _key(run_id: str) -> tuple[str, str]:
        """The run and its Temporal run id (empty outside a workflow: never held long)."""
        return run_id, activity.info().workflow_run_id or ""

    async def read(
        self, run_id: str, before_seq: int, *, conn: AsyncConnection[Any] | None = None
    ) -> list[SeqMessage]:
        """The transcript before `before_seq`, reading from Postgres only what is not held
        (on `conn` when given)."""
        async with self.store.connection(conn) as c:
            reading = await self.begin_read(run_id, before_seq, c)
            return await reading()

    async def begin_read(
        self, run_id: str, before_seq: int, conn: AsyncConnection[Any]
    ) -> Callable[[], Awaitable[list[SeqMessage]]]:
        """`read`'s query sent on `conn`; what it returns reads the answer (on a connection
        in pipeline mode, once the pipeline has ended) and, when the new rows are not the
        next positions, the whole transcript (another round trip)."""
        key = self._key(run_id)
        held = self._held.get(key)
        if held is None or held.next_seq > before_seq:
            held = None
        from_seq = held.next_seq if held is not None else 0
        reading = await self.store.begin_transcript(
            run_id, before_seq, from_seq, conn, recorded=True
        )

        async def answer() -> list[SeqMessage]:
            new = await reading()
            if held is not None:
                if [e.seq for e in new] == list(range(held.next_seq, held.next_seq + len(new))):
                    self.partial_reads += 1
                    return list(self._extend(key, held, new))
                new = await self.store.load_transcript(
                    run_id, before_seq=before_seq, conn=conn, recorded=True
                )
            self.full_reads += 1
            self._keep(key, new)
            return list(new)

        return answer

    def seed(self, run_id: str, entries: list[SeqMessage]) -> None:
        """The run's seed, as its first step wrote it: the steps after read only what is new."""
        self._keep(self._key(run_id), list(entries))

    def add(
        self,
        run_id: str,
        seq: int,
        message: Message,
        thinking: str | None = None,
        turn_state: str | None = None,
    ) -> None:
        """The step's own reply, as recorded (with the `thinking` and the `turn_state` recorded
        with it): the next step need not read it back."""
        key = self._key(run_id)
        held = self._held.get(key)
        if held is not None and held.next_seq == seq:
            self._extend(key, held, [turn_entry(seq, message, thinking, turn_state)])

    def _keep(self, key: tuple[str, str], messages: list[SeqMessage]) -> None:
        old = self._held.pop(key, None)
        if old is not None:
            self._chars -= old.chars
        held = _Held(messages, sum(_size(e) for e in messages))
        self._held[key] = held
        self._chars += held.chars
        self._evict()

    def _extend(self, key: tuple[str, str], held: _Held, new: list[SeqMessage]) -> list[SeqMessage]:
        """`new` after what `held` holds, measuring only `new`: a step of a long run does
        not walk its whole transcript again (reads hand out copies: the list is ours alone).
        Returns the run's messages."""
        if self._held.get(key) is not held:  # evicted or replaced meanwhile: keep anew
            messages = [*held.messages, *new]
            self._keep(key, messages)
            return messages
        added = sum(_size(e) for e in new)
        held.messages.extend(new)
        held.chars += added
        self._chars += added
        self._held.move_to_end(key)
        self._evict()
        return held.messages

    def _evict(self) -> None:
        while self._held and (len(self._held) > self.max_runs or self._chars > self.max_chars):
            _, evicted = self._held.popitem(last=False)
            self._chars -= evicted.chars
