"""The command line: `python starter.py --help` (the commands are in reactive_temporal/cli/)."""

from reactive_temporal.cli.app import app
from reactive_temporal.cli.terminal import run_app

if __name__ == "__main__":
    run_app(app)
