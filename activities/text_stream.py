"""One LLM call's streamed text (and thinking), written to the run's live output as it comes.

A reply's text goes out at most once per TEXT_WRITE_INTERVAL (`TextStream`): a model streaming
50 chunks a second wrote 50 transactions and NOTIFYs a second per run, which at a thousand
runs is Postgres's and the worker's whole capacity. Its first text waits FIRST_TEXT_AFTER
seconds, so a reply that ends by then goes out with the step's record. `RunEvents.streaming`
(run_events.py) opens one for a call.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from activities.reply_calls import THINKING_MAX_CHARS
from reactive_temporal.contracts.events import NewEvent
from reactive_temporal.limits import REPLY_CONTENT_MAX_CHARS
from reactive_temporal.sanitize import clean_text

if TYPE_CHECKING:
    from activities.run_events import Announcement, RunEvents

TEXT_WRITE_INTERVAL = 0.2
"""Seconds from one text write of a reply to its next: what comes meanwhile goes out
together (five updates a second reads as live to a person)."""
FIRST_TEXT_AFTER = 0.1
"""Seconds a reply's first text waits before it is written: a reply that ends sooner goes out
with the step's record, in its round trip (a short reply, or a quick model: one write and one
NOTIFY a step instead of three writes and two), and a person watching sees a longer one start
a tenth of a second later."""


LIVE_TEXT_MAX_CHARS = REPLY_CONTENT_MAX_CHARS
"""What the live output shows of one LLM call's reply: as much as the run keeps of it."""
LIVE_TEXT_CUT = "\n… [the rest of this reply is not shown live]"
LIVE_THINKING_MAX_CHARS = THINKING_MAX_CHARS
"""What it shows of the thinking an endpoint sends apart: as much as the step's record keeps."""
LIVE_THINKING_CUT = "\n… [the rest of this thinking is not shown live]"


@dataclass
class _Channel:
    """One kind of a call's deltas (its text, or its thinking sent apart): their own
    positions, their own bound."""

    limit: int
    marker: str
    thinking: bool = False
    calls_in_text: bool = False
    """Each delta says the model's calls are read from its text (`TextFold` holds them back)."""
    written: int = 0
    """Characters handed to a write so far (the next delta's position)."""
    buffer: str = ""
    cut: bool = False
    """Past `limit`: the rest is not shown."""

    def add(self, delta: str) -> None:
        """Queue a delta; past the limit, a marker says the rest is not shown, once."""
        if not delta or self.cut:
            return
        room = self.limit - self.written - len(self.buffer)
        if len(delta) > room:  # a 5 MB reply stored 9.7 MB of rows (the reply kept is 64,000)
            delta = delta[: max(room, 0)] + self.marker
            self.cut = True
        self.buffer += delta

    def take(self, step: int, attempt: int) -> list[NewEvent]:
        """The deltas not written yet, as one event (none when there are none)."""
        if not self.buffer:
            return []
        delta, self.buffer = self.buffer, ""
        position, self.written = self.written, self.written + len(delta)
        data: dict[str, Any] = {"delta": clean_text(delta, nul=True), "attempt": attempt}
        if self.thinking:
            data["thinking"] = True
        elif self.calls_in_text:
            data["calls_in_text"] = True
        return [NewEvent(type="text", step=step, position=position, data=data)]


class TextStream:
    """One LLM call's text deltas (and the thinking its endpoint sends apart: `add_thinking`),
    appended as they come without waiting on each write.

    The first delta is written FIRST_TEXT_AFTER seconds after it comes; later ones at most
    every TEXT_WRITE_INTERVAL seconds, deltas that arrive meanwhile going out together, so a
    reply costs a few writes per second however finely the model streams it. At most one
    write is in flight. `close()` writes what is left without waiting for the interval (or
    leaves it for the caller's own write).

    Thinking sent apart goes out the same way, in the same writes: a `text` event with
    `"thinking": true` in its data and positions of its own, before the text that came with
    it. The split of thinking written into the text is the reader's (`TextFold`).
    """

    def __init__(
        self,
        events: RunEvents,
        run_id: str,
        step: int,
        attempt: int,
        prelude: Announcement | None = None,
        write_interval: float = TEXT_WRITE_INTERVAL,
        first_after: float = FIRST_TEXT_AFTER,
        *,
        calls_in_text: bool | Callable[[], bool] = False,
    ) -> None:
        self.events = events
        self.write_interval = write_interval
        self.first_after = first_after
        self.prelude = prelude
        self.run_id = run_id
        self.step = step
        self.attempt = attempt
        self.thinking = _Channel(LIVE_THINKING_MAX_CHARS, LIVE_THINKING_CUT, thinking=True)
        self.text = _Channel(
            LIVE_TEXT_MAX_CHARS, LIVE_TEXT_CUT, calls_in_text=calls_in_text is True
        )
        self.calls_learned = calls_in_text if callable(calls_in_text) else None
        """Asked at each write until it says the calls are read from the text: a step can
        learn so mid-way (its server refused tools: asked again with them in the prompt)."""
        self.flushing: asyncio.Task[None] | None = None
        self.next_write_at = 0.0
        """Loop time before which the next write waits (unless the reply has ended)."""
        self.ended = asyncio.Event()
        """Set by `close()`: what is left goes out without waiting for the interval."""
        self.last: list[NewEvent] = []
        """After `close(write=False)`: the events it did not write (see `close`)."""

    def add(self, delta: str) -> None:
        """Queue a text delta; a write starts at once unless one is already in flight. Past
        LIVE_TEXT_MAX_CHARS the reply is not shown live: a marker says so, once."""
        self._queue(self.text, delta)

    def add_thinking(self, delta: str) -> None:
        """Queue a delta of thinking sent apart, as `add` does text (up to
        LIVE_THINKING_MAX_CHARS)."""
        self._queue(self.thinking, delta)

    def _queue(self, channel: _Channel, delta: str) -> None:
        first = not any(c.written or c.buffer for c in (self.thinking, self.text))
        channel.add(delta)
        if not channel.buffer:
            return
        if first:  # the reply's first text
            self.next_write_at = asyncio.get_running_loop().time() + self.first_after
        if self.flushing is None or self.flushing.done():
            self.flushing = asyncio.create_task(self._flush())

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        while self.thinking.buffer or self.text.buffer:
            pause = self.next_write_at - loop.time()
            if pause > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.ended.wait(), pause)
                if self.ended.is_set():
                    return  # the reply ended meanwhile: `close()` takes what is left
            self.next_write_at = loop.time() + self.write_interval
            text = self._take_text()
            prelude = await self.prelude.take() if self.prelude is not None else []
            await self.events.try_append(self.run_id, [*prelude, *text])

    def _take_text(self) -> list[NewEvent]:
        """What was not written yet, the thinking first, as an event each (none when there
        is none)."""
        if self.calls_learned is not None and self.text.buffer:
            self.text.calls_in_text = self.calls_learned()
            self.calls_learned = None if self.text.calls_in_text else self.calls_learned
        thinking = self.thinking.take(self.step, self.attempt)
        return [*thinking, *self.text.take(self.step, self.attempt)]

    async def close(self, *, write: bool = True) -> None:
        """Once the write in flight is done, write what is left now (not after the
        interval), the announcement too when no text took it; with `write=False`, leave
        those events in `last` instead, for the caller to write."""
        self.ended.set()
        if self.flushing is not None:
            with contextlib.suppress(Exception):
                await self.flushing
        prelude = await self.prelude.take() if self.prelude is not None else []
        self.last = [*prelude, *self._take_text()]
        if write and self.last:
            await self.events.try_append(self.run_id, self.last)
            self.last = []

    def last_of_reply(self, *, calls_only: bool = False) -> list[NewEvent]:
        """`last`; with `calls_only`, saying the step's record read the reply as calls only,
        no words (a bare JSON object is one only when it names a tool the step offered,
        which a reader cannot know: `TextFold`), on its last text delta or an empty one."""
        if not calls_only:
            return self.last
        said = {"calls_in_text": True, "calls_only": True}
        for event in reversed(self.last):
            if event.type == "text" and "thinking" not in event.data:
                event.data.update(said)
                return self.last
        data = {"delta": "", "attempt": self.attempt, **said}
        return [
            *self.last,
            NewEvent(type="text", step=self.step, position=self.text.written, data=data),
        ]

    def cancel(self) -> None:
        """The call was cancelled: stop writing."""
        if self.prelude is not None:
            self.prelude.cancel()
        if self.flushing is not None:
            self.flushing.cancel()
