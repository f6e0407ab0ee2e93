"""`python -m reactive_temporal.cli`: the command line, as `python starter.py` runs it (the
form `worker --processes N` starts its workers with, wherever the package is installed)."""

from reactive_temporal.cli.app import app
from reactive_temporal.cli.terminal import run_app

if __name__ == "__main__":
    run_app(app)
