"""`codec-server`: decrypt encrypted histories for the Web UI and the `temporal` CLI."""

from __future__ import annotations

import asyncio
import signal
from typing import Annotated
from urllib.parse import urlsplit

import typer
from rich.panel import Panel

from reactive_temporal.api.workflow_ids import shown
from reactive_temporal.cli.common import CliError, cli_settings, err, out, run_command
from reactive_temporal.cli.terminal import safe
from reactive_temporal.codec import ENV_VAR, EncryptionCodec
from reactive_temporal.embedded.codec_server import DEFAULT_ORIGIN, CodecServer

TOKEN_ENV_VAR = "REACTIVE_TEMPORAL_CODEC_TOKEN"


def origin_given(value: str) -> str:
    """A browser origin (`scheme://host[:port]`), refused as a usage error when it is not one:
    anything else matched no browser's Origin header, and was printed raw in the banner."""
    problem = None
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 — raises ValueError for a port that is not one
    except ValueError as e:
        problem = str(e)
    else:
        if parts.scheme not in ("http", "https") or not parts.hostname:
            problem = "it needs http:// or https:// and a host"
        elif parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
            problem = "an origin is scheme://host[:port], with no path, query or user"
        elif not value.isascii() or not value.isprintable():
            problem = "it holds characters no origin has"
    if problem is not None:
        raise typer.BadParameter(f"{shown(value)} is not an origin: {problem}")
    return value


def codec_server(
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Port to listen on (0: any free port).")
    ] = 8081,
    origin: Annotated[
        str,
        typer.Option(
            help="The one browser origin allowed to call it (the Web UI's).",
            callback=origin_given,
        ),
    ] = DEFAULT_ORIGIN,
    host: Annotated[
        str, typer.Option(help="Interface to listen on; it serves decrypted data, keep it local.")
    ] = "127.0.0.1",
) -> None:
    """Serve Temporal's remote codec protocol with this project's encryption keys."""

    async def main() -> int:
        settings = cli_settings()
        if not settings.encryption_keys or not settings.encryption_keys.strip():
            raise CliError(
                f"no encryption keys: set {ENV_VAR}=KEY_ID:BASE64KEY (the same value the worker "
                "uses; `python -m reactive_temporal.codec` generates one)"
            )
        if not settings.codec_token or not settings.codec_token.strip():
            raise CliError(
                f"no token: set {TOKEN_ENV_VAR} to a long random secret; every request must send "
                "it as `Authorization: Bearer <token>` (for example: export "
                f'{TOKEN_ENV_VAR}=$(python -c "import secrets; print(secrets.token_urlsafe())"))'
            )
        try:
            codec = EncryptionCodec(settings.encryption_keys)
        except ValueError as e:
            raise CliError(str(e)) from e
        try:
            server = CodecServer(
                codec,
                token=settings.codec_token.strip(),
                allowed_origin=origin,
                host=host,
                port=port,
                log=lambda line: err.print(f"[dim]{safe(line)}[/]", highlight=False),
            )
        except OSError as e:
            raise CliError(f"cannot listen on {host}:{port}: {e}") from e
        url = server.url
        out.print(
            Panel.fit(
                f"Codec server  [bold cyan]{safe(url)}[/]\n"
                f"Keys          {safe(', '.join(codec.key_ids))} (encrypting with "
                f"{safe(codec.key_id)})\n"
                f"CORS origin   {safe(origin)}\n\n"
                "temporal CLI:\n"
                "  temporal workflow show --workflow-id RUN_ID \\\n"
                f"    --codec-endpoint {safe(url)} \\\n"
                f'    --codec-auth "Bearer ${TOKEN_ENV_VAR}"\n'
                "  (or export TEMPORAL_CODEC_ENDPOINT and TEMPORAL_CODEC_AUTH)\n"
                "Web UI (its origin must be the CORS origin above):\n"
                f"  temporal server start-dev … --ui-codec-endpoint {safe(url)}\n"
                "  or Settings → Codec Server in the UI; it must send the token as\n"
                "  `Authorization: Bearer …`, which needs a UI sign-in (OIDC).\n\n"
                "Ctrl-C stops it.",
                title="reactive-temporal codec-server",
                border_style="cyan",
            ),
            highlight=False,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        server.start()
        try:
            await stop.wait()
        finally:
            server.stop()
        out.print("stopped.")
        return 0

    run_command(main)
