"""``datalyst exec``: run one cell of Python against data files in the sandbox."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.syntax import Syntax

from datalyst.cli._app import AllowUnisolated, app
from datalyst.sandbox import ExecResult, Limits, Sandbox


@app.command("exec")
def exec_command(
    files: Annotated[list[Path], typer.Argument(help="Data files to stage (read-only) in the work folder.")],
    code: Annotated[str, typer.Option("--code", "-c", help="Python to run; '-' reads it from standard input.")],
    mode: Annotated[str, typer.Option(help="session: keep one worker; replay: fresh worker per cell.")] = "session",
    timeout: Annotated[float, typer.Option(help="Wall-clock seconds the cell may run.")] = 30.0,
    memory_mb: Annotated[int, typer.Option(help="Memory limit per process, in MiB.")] = 2048,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    allow_unisolated: AllowUnisolated = False,
) -> None:
    """Run one cell against FILES in a fresh sandbox and print what it printed."""
    source = sys.stdin.read() if code == "-" else code
    limits = Limits(wall_s=timeout, cpu_s=timeout, memory_mb=memory_mb)
    sandbox = Sandbox(files=files, mode=mode, limits=limits, require_isolation=not allow_unisolated)  # type: ignore[arg-type]
    with sandbox:
        result = sandbox.run_python(source)
    if as_json:
        print(result.model_dump_json(indent=2))
    else:
        _print_result(source, result)
    raise typer.Exit(0 if result.ok else 1)


def _print_result(source: str, result: ExecResult) -> None:
    console = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    if sys.stdout.isatty():
        console.print(Syntax(source, "python", theme="ansi_dark", line_numbers=False))
        console.rule(style="dim")
    if result.stdout:
        console.out(result.stdout, end="" if result.stdout.endswith("\n") else "\n")
    if result.stderr:
        err.out(result.stderr, end="" if result.stderr.endswith("\n") else "\n")
    if result.error is not None:
        err.out(result.error.traceback or f"{result.error.ename}: {result.error.evalue}")
    for path in result.files_created:
        err.print(f"[dim]created {path}[/]")
    err.print(f"[dim]{result.duration_s:.2f} s[/]")
