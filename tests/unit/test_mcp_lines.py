"""How `mcp_stdio` cuts a stdio server's output into messages: whole lines, in linear time,
none longer than the cap (the SDK's reader had no cap and joined the pending line again with
every chunk)."""

from __future__ import annotations

import time

import pytest

from reactive_temporal.mcp_stdio import LineSplitter, MessageTooLong
from reactive_temporal.mcp_tools import McpToolbox


def test_lines_are_cut_at_newlines_across_and_within_chunks():
    lines = LineSplitter(100)
    assert lines.feed(b'{"a"') == [] and lines.pending == 4
    assert lines.feed(b': 1}\n{}\n{"b"') == [b'{"a": 1}', b"{}"]
    assert lines.pending == 4
    assert lines.feed(b": 2}\n") == [b'{"b": 2}'] and lines.pending == 0
    assert lines.feed(b"\n\n") == [b"", b""]


def test_a_line_of_exactly_the_cap_passes_and_one_byte_more_does_not():
    assert LineSplitter(8).feed(b"12345678\n") == [b"12345678"]
    lines = LineSplitter(8)
    assert lines.feed(b"1234") == []
    with pytest.raises(MessageTooLong, match="a line longer than 8 bytes"):
        lines.feed(b"56789\n")


def test_a_line_over_the_cap_fails_before_it_ends():
    """An endless line is refused as soon as it passes the cap, not held until a newline."""
    lines = LineSplitter(1000)
    with pytest.raises(MessageTooLong):
        for _ in range(100):
            lines.feed(b"x" * 100)
    assert lines.pending <= 1000


def test_a_long_line_in_small_chunks_costs_linear_time():
    """16 MiB in 4 KiB chunks: joining the pending line again with each chunk copies ~32 GB
    (many seconds); appending copies 16 MiB (milliseconds)."""
    lines = LineSplitter(32 * 1024 * 1024)
    chunk = b"x" * 4096
    started = time.perf_counter()
    for _ in range(4096):
        lines.feed(chunk)
    [line] = lines.feed(b"\n")
    assert len(line) == 16 * 1024 * 1024
    assert time.perf_counter() - started < 2


@pytest.mark.parametrize("cap", [0, -1])
def test_the_toolbox_refuses_a_cap_that_is_not_positive(cap: int):
    with pytest.raises(ValueError, match=f"max_message_bytes must be positive, not {cap}"):
        McpToolbox([], max_message_bytes=cap)
