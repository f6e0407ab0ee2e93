"""What the live output's fold (`TextFold.take`) costs per reply, this tree against a revision.

Every reader of a run's live output (`watch`, `run`'s live output, chat: `api/watching.py`)
folds each step's stored text deltas with a `TextFold`. Timed here on replies, not on runs:
a bare JSON call whose one argument is long (a file written whole) and prose, each of 30 kB,
200 kB and 600 kB (TEXT_CALLS_MAX_CHARS, past which text is not read for calls), streamed in
15–20 character deltas, for a model whose calls are read from its text (`calls_in_text`) and
one whose are not. Both versions are loaded in this one process (the revision's fold modules
from `git show`, under another package name) and timed in turn, so both see the same machine.
Before the fold kept how far it read, its cost grew with the square of the reply's length.

    .venv/bin/python -m bench.live_fold --before REV [--sizes 30000,200000,600000]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from bench._revision import module_at
from reactive_temporal import live_output

FOLD_MODULES = ("live_output", "bare_calls", "thinking", "harmony", "text_calls")


def fold_at(revision: str, into: Path) -> ModuleType:
    """The revision's `live_output`, importable as `before_fold.live_output` (its fold's
    modules from the revision, the rest of the package this tree's)."""
    return module_at(revision, into, "before_fold", FOLD_MODULES, every=True)


def call_reply(size: int) -> str:
    """A bare call writing a file of `size` characters (escapes in it, as JSON has them)."""
    body = ("lorem ipsum dolor sit amet, \\n \\\\ \\u00e9 " * (size // 40 + 1))[:size]
    return '{"name": "write_file", "parameters": {"path": "a.txt", "content": "' + body + '"}}'


def prose_reply(size: int) -> str:
    line = "The quick brown fox jumps over the lazy dog; see [1], where a < b holds.\n"
    return (line * (size // len(line) + 1))[:size]


def seconds(fold_type: Any, text: str, *, calls_in_text: bool) -> float:
    """CPU seconds to fold `text` streamed in 15–20 character deltas, then settle it."""
    rng, deltas, at = random.Random(1), [], 0
    while at < len(text):
        end = at + rng.randint(15, 20)
        deltas.append((at, text[at:end]))
        at = end
    start = time.process_time()
    fold = fold_type()
    for position, delta in deltas:
        fold.take(1, 1, position, delta, calls_in_text=calls_in_text)
    fold.settle()
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the revision to compare with")
    parser.add_argument("--sizes", default="30000,200000,600000")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as into:
        before = fold_at(args.before, Path(into))
        print(f"### `TextFold`: CPU seconds per reply, {args.before} → this tree\n")
        print("| reply | calls_in_text | before s | now s | × |")
        print("|---|---|---:|---:|---:|")
        for size in (int(s) for s in args.sizes.split(",")):
            for kind, text in (("call", call_reply(size)), ("prose", prose_reply(size))):
                for calls_in_text in (True, False):
                    was = seconds(before.TextFold, text, calls_in_text=calls_in_text)
                    now = seconds(live_output.TextFold, text, calls_in_text=calls_in_text)
                    print(
                        f"| {kind} {size // 1000} kB | {calls_in_text} | {was:.2f} | {now:.3f}"
                        f" | {was / max(now, 1e-9):.0f} |",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
