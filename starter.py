"""The command line: `python starter.py --help` (the commands are in reactive_temporal/cli/)."""

from reactive_temporal.cli.app import app

if __name__ == "__main__":
    app()
