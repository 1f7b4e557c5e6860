"""``datalyst serve``: the local web app, on loopback unless told otherwise, behind a one-time token."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from datalyst.cli._app import AllowUnisolated, app
from datalyst.cli._ask import ASK_MODEL
from datalyst.cli._options import config_command
from datalyst.cli._shared import absolute
from datalyst.errors import ConfigError
from datalyst.llm import is_cached, list_models, own_dialect, resolve_spec
from datalyst.web import ServeConfig, create_app, is_loopback, listen


def _folder(path: str | None) -> str | None:
    if path and not Path(path).is_dir():
        raise ConfigError(f"{path} is not a folder")
    return absolute(path)


@config_command(
    app, "serve", ServeConfig,
    convert={"models": lambda specs: specs or _default_models(), "files": _folder,
             "runs": lambda path: _folder(path) or (absolute("runs") if Path("runs").is_dir() else None),
             "data": lambda paths: paths and [_folder(path) for path in paths]},
)  # fmt: skip
def serve_command(
    config: ServeConfig,
    host: Annotated[str, typer.Option(help="Address to listen on; other than loopback, others can reach it.")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0 picks a free one).")] = 8765,
    allow_unisolated: AllowUnisolated = False,
) -> None:
    """Serve the web app: ask about files and watch the agent work, browse evaluation runs, tasks and trajectories."""
    import uvicorn

    config = config.model_copy(
        update={
            "loopback": is_loopback(host),
            "dialects": {spec: dialect for spec in config.models if (dialect := own_dialect(resolve_spec(spec)))},
            "data": config.data or ([config.runs] if config.runs else []),
            "require_isolation": not allow_unisolated,
        }
    )
    listener = listen(host, port)
    bound = listener.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    console = Console(highlight=False, soft_wrap=True)
    console.print(f"datalyst is serving at [bold]http://{shown}:{bound}/?token={config.token}[/]")
    if not config.loopback:
        console.print(
            f"[yellow]warning:[/] listening on {host}, so other machines can reach this server; every request "
            "needs the token in the link above, and traffic is not encrypted"
        )
    console.print("[dim]Ctrl-C stops it.[/]")
    server = uvicorn.Server(uvicorn.Config(create_app(config), log_level="warning", timeout_graceful_shutdown=5))
    server.run(sockets=[listener])


def _default_models() -> list[str]:
    """``ask``'s default model, then every other embedded model whose weights are here."""
    specs = [str(resolve_spec(None, default=ASK_MODEL))]
    specs += [f"embedded:{m.name}" for m in list_models() if is_cached(m.name) and f"embedded:{m.name}" not in specs]
    return specs
