"""Run a reactive-temporal worker: every workflow and activity, built-in and user tools.

    python worker.py                          # against `starter.py dev`, or TEMPORAL_ADDRESS
    python worker.py --tools my_pkg.my_tools  # also load the @tool functions of a module
    python worker.py --mcp "fs=npx -y @modelcontextprotocol/server-filesystem /tmp"
    python worker.py --mcp github=https://mcp.example.com/mcp   # streamable HTTP
    python worker.py --mcp "gh=npx -y @modelcontextprotocol/server-github" --mcp-env GITHUB_TOKEN

Several workers may serve one task queue; Temporal spreads runs across them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys

from pydantic import ValidationError
from pydantic_settings import SettingsError

from reactive_temporal.config import load_settings, settings_error_message
from reactive_temporal.embedded.scripted_llm import ScriptedLLM
from reactive_temporal.embedded.stack import StackError, connect, read_published_stack
from reactive_temporal.errors import describe_validation_error
from reactive_temporal.hosting.worker_factory import create_worker
from reactive_temporal.mcp_tools import McpToolbox


async def main(tool_modules: list[str], mcp_specs: list[str], mcp_env: list[str]) -> int:
    try:
        settings = load_settings()
    except ValidationError as err:
        print(f"error: invalid configuration: {describe_validation_error(err)}", file=sys.stderr)
        return 2
    except SettingsError as err:
        print(f"error: invalid configuration: {settings_error_message(err)}", file=sys.stderr)
        return 2
    published = read_published_stack(settings.data_dir.resolve())
    address = settings.temporal_address or (published.temporal_address if published else None)
    database_url = settings.database_url or (published.database_url if published else None)
    if address is None or database_url is None:
        missing = "TEMPORAL_ADDRESS" if address is None else "DATABASE_URL"
        print(
            f"error: no {missing} and no `python starter.py dev` running here: set {missing}, "
            "or start the dev stack first",
            file=sys.stderr,
        )
        return 2
    task_queue = settings.temporal_task_queue
    if published is not None and settings.temporal_address is None:
        task_queue = published.task_queue
    llm_base_url = settings.openai_base_url
    offline: ScriptedLLM | None = None
    if settings.uses_offline_model:
        if published is not None and published.llm_base_url:
            llm_base_url = published.llm_base_url
        else:
            offline = ScriptedLLM().start()
            llm_base_url = offline.base_url
        print(
            "note: no OPENAI_BASE_URL or OPENAI_API_KEY: "
            "serving runs with the offline scripted model"
        )
    async with contextlib.AsyncExitStack() as resources:
        if offline is not None:
            resources.callback(offline.stop)
        try:
            client = await connect(
                address,
                settings.temporal_namespace,
                settings.encryption_keys,
                encryption_required=settings.encryption_required,
            )
            toolbox = await resources.enter_async_context(McpToolbox(mcp_specs, env=mcp_env))
            agent_worker = await create_worker(
                client,
                settings,
                database_url=database_url,
                llm_base_url=llm_base_url,
                tool_modules=tool_modules,
                extra_tools=toolbox.tools,
                task_queue=task_queue,
            )
        except (StackError, ValueError, RuntimeError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        print(
            f"worker on {address}, task queue {task_queue!r}, "
            f"tools: {', '.join(agent_worker.registry.names)}",
            flush=True,
        )
        run = asyncio.create_task(agent_worker.worker.run())
        waiting = asyncio.create_task(stop.wait())
        await asyncio.wait({run, waiting}, return_when=asyncio.FIRST_COMPLETED)
        await agent_worker.worker.shutdown()
        await agent_worker.close()
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--tools",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE and register its @tool functions (repeatable)",
    )
    parser.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="SPEC",
        help='an MCP server: NAME=URL or "NAME=COMMAND ARGS" (repeatable); tools are NAME/tool',
    )
    parser.add_argument(
        "--mcp-env",
        action="append",
        default=[],
        metavar="NAME",
        help="pass environment variable NAME to stdio MCP servers (repeatable); they get only "
        "PATH, HOME, LANG and these",
    )
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    code = asyncio.run(main(args.tools, args.mcp, args.mcp_env))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
