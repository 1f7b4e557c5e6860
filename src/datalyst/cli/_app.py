"""The root of the command tree and the one place that turns user errors into one line."""

from __future__ import annotations

import importlib
import logging
import sys
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from datalyst.errors import DatalystError

app = typer.Typer(
    name="datalyst",
    help="Data-analytic agents that answer questions about data files by running code safely.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err_console = Console(stderr=True)

AllowUnisolated = Annotated[
    bool,
    typer.Option(
        "--allow-unisolated",
        help="Run model code even where the sandbox cannot isolate it (a warning says what is not enforced).",
    ),
]


@app.callback()
def _root() -> None:
    """Data-analytic agents that answer questions about data files by running code safely."""


COMMANDS = ("_ask", "_curate", "_describe", "_eval", "_exec", "_models", "_search", "_serve", "_synth", "_train",
            "_train_value")  # fmt: skip
"""The modules whose commands register themselves on ``app`` when imported."""


def _register() -> None:
    for name in COMMANDS:
        importlib.import_module(f"datalyst.cli.{name}")


def main() -> None:
    """Console entry point: run the app, print user errors in one line, exit non-zero."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    _register()
    try:
        app()
    except DatalystError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(2)
