"""What the credential scan costs per kilobyte of a run's memory, this tree against a revision.

The scan (`reactive_temporal/secrets_scan.py`) reads what a run's memory takes in and gives
out: its first step's notes (lessons, earlier runs), the debrief it stores. Its cost is in how
much text it reads, so it is timed here on text, not on runs: the README's first 4 kB (prose,
commands and code, with the words a label rule looks for), a debrief's markdown of ordinary
prose, and a text with keys in it. Both versions are loaded in this one process (the
revision's scan modules from `git show`, under another package name) and timed in alternation,
so both see the same machine.

    .venv/bin/python -m bench.secrets_scan --before REV [--rounds R]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import timeit
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from bench._revision import ROOT, module_at

SCAN_MODULES = (
    "secrets_scan",
    "secret_rules",
    "secret_formats",
    "secret_labels",
    "secret_commands",
    "secret_pem",
    "secret_prose",
    "secret_markup",
    "secret_web",
    "secret_wrap",
)


def scan_at(revision: str, into: Path) -> ModuleType:
    """The revision's `secrets_scan`, importable as `before_scan.secrets_scan` (the modules
    it has; older revisions had fewer)."""
    return module_at(revision, into, "before_scan", SCAN_MODULES)


def texts() -> dict[str, str]:
    readme = (ROOT / "README.md").read_text()[:4_000]
    prose = (
        "The run read the quarterly report and compared revenue across regions. Europe grew "
        "4% while the Americas were flat; the model checked both figures against the "
        "filings and noted one discrepancy in the footnotes. "
    ) * 20
    keys = (
        "config read: OPENAI_API_KEY=sk-proj-"
        + "a1B2c3D4" * 9
        + "T3BlbkFJ"
        + "x9Y8z7W6" * 9
        + "\nPassword: hunter2\ncurl -u admin:s3cret https://api.example.com\n"
    ) * 8
    return {"README, 4 kB": readme, "prose, 4 kB": prose[:4_000], "keys, 4 kB": keys[:4_000]}


def per_call(redact: Callable[[str], str], text: str, number: int) -> float:
    return min(timeit.repeat(lambda: redact(text), number=number, repeat=3)) / number


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the git revision to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from reactive_temporal import secrets_scan as now

    with tempfile.TemporaryDirectory() as scratch:
        before = scan_at(args.before, Path(scratch))
        print(f"## secrets_scan: {args.before} (before) against this tree (now)\n")
        print("| text | before us/call | now us/call | now / before |")
        print("|---|---|---|---|")
        for label, text in texts().items():
            assert before.redact(text) == now.redact(text) or label == "keys, 4 kB"
            pairs = [
                (per_call(before.redact, text, 50), per_call(now.redact, text, 50))
                for _ in range(args.rounds)
            ]
            b = statistics.median(p[0] for p in pairs) * 1e6
            n = statistics.median(p[1] for p in pairs) * 1e6
            print(f"| {label} | {b:,.0f} | {n:,.0f} | {n / b:.2f}× |")


if __name__ == "__main__":
    main()
