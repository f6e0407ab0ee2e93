"""Benchmarks: run each with `.venv/bin/python -m bench.<name>` (see bench/README.md)."""
