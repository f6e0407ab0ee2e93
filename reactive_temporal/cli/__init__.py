"""The command-line interface behind starter.py."""
