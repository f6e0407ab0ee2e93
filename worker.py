"""Run a reactive-temporal worker: every workflow and activity, built-in and user tools.

    python worker.py                          # against `starter.py dev`, or TEMPORAL_ADDRESS
    python worker.py --tools my_pkg.my_tools  # also load the @tool functions of a module
    python worker.py --mcp "fs=npx -y @modelcontextprotocol/server-filesystem /tmp"
    python worker.py --mcp github=https://mcp.example.com/mcp   # streamable HTTP
    python worker.py --mcp docs=https://mcp.example.com/mcp \
                     --mcp-header 'docs=Authorization: Bearer ${DOCS_TOKEN}'  # a hosted one
    python worker.py --mcp docs=https://mcp.example.com/mcp \
                     --mcp-header 'docs=Authorization: Bearer ${file:/run/secrets/docs}'  # rotated
    python worker.py --mcp "gh=npx -y @modelcontextprotocol/server-github" --mcp-env GITHUB_TOKEN
    python worker.py --processes 4            # four worker processes here: one per core

Several workers may serve one task queue; Temporal spreads runs across them. This is
`python starter.py worker` (reactive_temporal/cli/serve_commands.py), under its own name.
"""

from reactive_temporal.cli.app import worker_app
from reactive_temporal.cli.terminal import run_app

if __name__ == "__main__":
    run_app(worker_app)
