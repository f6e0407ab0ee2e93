"""`codec-server`: decrypt encrypted histories for the Web UI and the `temporal` CLI."""

from __future__ import annotations

import asyncio
import signal
from typing import Annotated

import typer
from rich.panel import Panel

from reactive_temporal.cli.common import CliError, cli_settings, err, out, run_command
from reactive_temporal.cli.terminal import safe
from reactive_temporal.codec import ENV_VAR, EncryptionCodec
from reactive_temporal.embedded.codec_server import DEFAULT_ORIGIN, CodecServer

TOKEN_ENV_VAR = "REACTIVE_TEMPORAL_CODEC_TOKEN"


def codec_server(
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8081,
    origin: Annotated[
        str, typer.Option(help="The one browser origin allowed to call it (the Web UI's).")
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
