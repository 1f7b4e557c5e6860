"""``datalyst serve``: the local web app, on loopback unless told otherwise, behind a one-time token."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from datalyst.cli._app import AllowUnisolated, app
from datalyst.cli._ask import ASK_MODEL
from datalyst.errors import ConfigError
from datalyst.llm import is_cached, list_models, own_dialect, resolve_spec

MODEL_HELP = (
    "Model spec the Ask page offers (repeatable; the first is the default). [default: embedded:medium (ask's), then "
    "every other embedded model fetched]"
)


@app.command("serve")
def serve_command(
    host: Annotated[str, typer.Option(help="Address to listen on; other than loopback, others can reach it.")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0 picks a free one).")] = 8765,
    runs: Annotated[
        Path | None, typer.Option(help="Folder of evaluation runs for the Runs page. [default: ./runs, if there]")
    ] = None,
    data: Annotated[
        list[Path] | None, typer.Option(help="Folder of tasks and trajectories files for the Data page (repeatable).")
    ] = None,
    files: Annotated[Path | None, typer.Option(help="Folder of data files offered on the Ask page.")] = None,
    model: Annotated[list[str] | None, typer.Option(help=MODEL_HELP)] = None,
    max_turns: Annotated[int, typer.Option(min=1, help="Turns the agent may take per question.")] = 10,
    max_upload_mb: Annotated[float, typer.Option(min=0.001, help="Largest uploaded file, in MB.")] = 50.0,
    allow_unisolated: AllowUnisolated = False,
) -> None:
    """Serve the web app: ask about files and watch the agent work, browse evaluation runs, tasks and trajectories."""
    import uvicorn

    from datalyst.web import ServeConfig, create_app, is_loopback, listen, new_token

    if runs is None and Path("runs").is_dir():
        runs = Path("runs")
    for folder in (runs, files, *(data or [])):
        if folder is not None and not folder.is_dir():
            raise ConfigError(f"{folder} is not a folder")
    specs = model or _default_models()
    config = ServeConfig(
        token=new_token(),
        loopback=is_loopback(host),
        models=specs,
        dialects={spec: dialect for spec in specs if (dialect := own_dialect(resolve_spec(spec)))},
        runs=runs.resolve() if runs else None,
        data=[folder.resolve() for folder in (data or ([runs] if runs else []))],
        files=files.resolve() if files else None,
        max_turns=max_turns,
        upload_bytes=int(max_upload_mb * 2**20),
        require_isolation=not allow_unisolated,
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
