"""Run every benchmark, one after another, each on its own fresh stack.

    .venv/bin/python -m bench.run_all [--quick] [--only overhead chat ...]

`scale` (about 15 minutes) runs only when named with --only, or always with --quick.

Figures go to stdout (Markdown), progress to stderr; a failing script does not stop the
others, and the exit status is non-zero when any failed.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import time

from bench._stack import machine

SCRIPTS = [
    "overhead",
    "debrief_latency",
    "history_bytes",
    "throughput",
    "chat",
    "streaming",
    "cost",
    "features",
    "context",
    "stream_merge",
    "llm_transport",
    "sandbox_bytecode",
    "event_append",
    "event_statements",
    "round_trips",
    "prepare_fold",
    "scale",
]
LONG = {"scale"}


def shell(command: list[str]) -> str:
    try:
        return subprocess.run(command, capture_output=True, text=True, check=False).stdout.strip()
    except OSError as err:
        return f"({err})"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true", help="pass --quick to every script")
    p.add_argument("--only", nargs="+", choices=SCRIPTS, help="run only these scripts")
    args = p.parse_args()

    print("# reactive-temporal benchmarks\n")
    print(f"_{machine()}_\n")
    print("```")
    print(f"$ nproc\n{shell(['nproc'])}")
    print(f"$ free -h\n{shell(['free', '-h'])}")
    print(f"python {platform.python_version()} ({sys.executable})")
    print("```")
    sys.stdout.flush()
    failed = []
    default = [s for s in SCRIPTS if args.quick or s not in LONG]
    for name in args.only or default:
        command = [sys.executable, "-m", f"bench.{name}", *(["--quick"] if args.quick else [])]
        print(f"[run_all] {' '.join(command)}", file=sys.stderr, flush=True)
        started = time.monotonic()
        code = subprocess.run(command, check=False).returncode
        print(
            f"[run_all] bench.{name}: exit {code} after {time.monotonic() - started:.0f} s",
            file=sys.stderr,
            flush=True,
        )
        if code != 0:
            failed.append(name)
    if failed:
        print(f"\nFAILED: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
