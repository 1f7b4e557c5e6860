"""``datalyst describe``: the meta-information of data files, as an agent's prompt shows it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from datalyst.cli._app import app
from datalyst.data import describe


@app.command("describe")
def describe_command(
    files: Annotated[list[Path], typer.Argument(help="Data files (CSV, TSV, XLSX, JSON, JSONL, Parquet, SQLite).")],
    max_chars: Annotated[int, typer.Option(help="Longest description per file, in characters.")] = 6000,
    as_json: Annotated[bool, typer.Option("--json", help="Print the meta-information as JSON.")] = False,
) -> None:
    """Describe FILES: tables, columns, types, ranges, frequent values and first rows.

    Each file is read in a process of its own within limits, by default 60 s, 4096 MiB of memory and 1024 MiB of
    decompressed data, which DATALYST_READ_WALL_S, DATALYST_READ_MEMORY_MB and DATALYST_READ_DECOMPRESSED_MB set.
    """
    infos = [describe(path, max_chars=max_chars) for path in files]
    if as_json:
        print("[" + ",\n".join(info.model_dump_json(indent=2) for info in infos) + "]")
    else:
        print("\n\n".join(info.render() for info in infos))
