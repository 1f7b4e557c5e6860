"""The same tasks over other file formats: questions and answers unchanged, each task's data files rewritten as
JSON, TSV, XLSX, ... Runs over the converted tasks pair with runs over the originals (same task ids), so they
measure what reading a format costs the agent, DABench's CSV questions asked of JSON files, say.

Besides every file kind, two layouts analysts' files often have: ``json-nested`` (a JSON object holding the
records under the table's name, where reading the file as a list of records fails) and ``xlsx-sheets`` (the
rows spread over several sheets of a workbook, to be read and put together again)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from datalyst.data import SUFFIXES, FileKind, fits, load, write_table, write_tables
from datalyst.errors import ConfigError
from datalyst.synth._roles import split_loader
from datalyst.tasks import Task

MOST_SHEETS = 12


def sheets_of(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The rows cut into sheets that give the table back when read in order: one sheet per value of the first text
    column whose values each fill one run of rows (2 to ``MOST_SHEETS`` of them), else two halves."""
    for column in frame.columns:
        values = frame[column]
        if not pd.api.types.is_string_dtype(values) or values.isna().any():
            continue
        count = values.nunique()
        if 2 <= count <= MOST_SHEETS and (values != values.shift()).sum() == count:
            names = [_sheet_name(str(value)) for value in values.unique()]
            if len({name.lower() for name in names}) == count:
                return {name: rows for name, (_, rows) in zip(names, frame.groupby(column, sort=False), strict=True)}
    if len(frame) < 2:
        return {"data": frame}
    half = (len(frame) + 1) // 2
    return {"part 1": frame.iloc[:half], "part 2": frame.iloc[half:]}


def _sheet_name(value: str) -> str:
    """``value`` as a sheet may be named: no ``[]:*?/\\``, at most 31 characters."""
    return "".join("_" if char in "[]:*?/\\" else char for char in value).strip("'")[:31] or "blank"


class Layout(NamedTuple):
    """How a converted table is written (the file kind, and how the table becomes the file's tables), and how an
    analyst loads it back into ``df`` with pandas."""

    kind: FileKind
    loader: str
    """Python that loads the file into ``df``, with ``{file}`` and ``{table}`` (the table's name) to fill in."""
    tables: Callable[[str, pd.DataFrame], dict[str, pd.DataFrame]] | None = None
    """The file's named tables from the table's name and rows (None: the table as the kind writes one)."""


_PANDAS = "import pandas as pd\n\n"
_JSON = "import json\n\nimport pandas as pd\n\nwith open({file!r}, encoding='utf-8') as f:\n"
LAYOUTS: dict[str, Layout] = {
    "csv": Layout(FileKind.CSV, _PANDAS + "df = pd.read_csv({file!r})\n"),
    "tsv": Layout(FileKind.TSV, _PANDAS + "df = pd.read_csv({file!r}, sep='\\t')\n"),
    "xlsx": Layout(FileKind.XLSX, _PANDAS + "df = pd.read_excel({file!r})\n"),
    "json": Layout(FileKind.JSON, _JSON + "    df = pd.DataFrame(json.load(f))\n"),
    "jsonl": Layout(
        FileKind.JSONL, _PANDAS + "df = pd.read_json({file!r}, lines=True, dtype=False, convert_dates=False)\n"
    ),
    "parquet": Layout(FileKind.PARQUET, _PANDAS + "df = pd.read_parquet({file!r})\n"),
    "sqlite": Layout(
        FileKind.SQLITE,
        "import sqlite3\n\nimport pandas as pd\n\nwith sqlite3.connect({file!r}) as connection:\n"
        "    df = pd.read_sql_query('SELECT * FROM \"{table}\"', connection)\n",
    ),
    "json-nested": Layout(
        FileKind.JSON, _JSON + "    df = pd.DataFrame(json.load(f)[{table!r}])\n", lambda name, frame: {name: frame}
    ),
    "xlsx-sheets": Layout(
        FileKind.XLSX,
        _PANDAS + "df = pd.concat(pd.read_excel({file!r}, sheet_name=None).values(), ignore_index=True)\n",
        lambda name, frame: sheets_of(frame),
    ),
}
"""Every way a task's table can be rewritten, by the name ``synth convert --kinds`` takes."""
FORMATS = ("json", "tsv", "xlsx")
"""The layouts tasks are converted to by default, in turn: the kinds a user's files come in besides CSV."""


def convert_tasks(tasks: Sequence[Task], folder: str | Path, layouts: Sequence[str] = FORMATS) -> list[Task]:
    """``tasks`` with their files rewritten: task i gets ``layouts[i % len(layouts)]`` (names of ``LAYOUTS``),
    written under ``folder/<layout>/`` with the file's own stem (a file several tasks share is written once). A
    file that holds several tables (an SQLite database, a workbook of sheets), or one the layout cannot hold
    whole, stays as it is."""
    if not layouts:
        raise ConfigError("name at least one format to convert the tasks' files to")
    if unknown := [name for name in layouts if name not in LAYOUTS]:
        raise ConfigError(f"no format {unknown[0]!r}; choose among {', '.join(LAYOUTS)}")
    folder, done = Path(folder), {}
    converted = []
    for number, task in enumerate(tasks):
        layout = layouts[number % len(layouts)]
        files = [_converted(Path(path), layout, folder, done) for path in task.files]
        update: dict[str, object] = {"files": [path for path, _ in files]}
        if task.solution and len(files) == 1 and files[0][1] is not None:
            update["solution"] = _reloaded(task.solution, files[0][1])
        converted.append(task.model_copy(update=update))
    return converted


def _reloaded(solution: str, loader: str) -> str:
    """``solution`` with its loader (the statements up to the one that assigns ``df``) replaced by ``loader``."""
    parts = split_loader(solution)
    return solution if parts is None else f"{loader}{parts[1]}\n"


def _converted(
    path: Path, layout: str, folder: Path, done: dict[tuple[Path, str], tuple[str, str | None]]
) -> tuple[str, str | None]:
    """The path of ``path`` in ``layout`` (written on first use; a second file of the same name goes to a folder of
    its own) and the code that loads it into ``df``; ``path`` itself and None when it holds several tables or the
    layout cannot hold its table whole."""
    source, (kind, loader, tables_of) = path.resolve(), LAYOUTS[layout]
    if (source, layout) in done:
        return done[source, layout]
    tables = load(path)
    target = folder.resolve() / layout / f"{path.stem}{SUFFIXES[kind]}"
    if str(target) in (made for made, _ in done.values()):  # another file of this name: a folder of its own
        target = target.parent / hashlib.sha256(str(source).encode()).hexdigest()[:8] / target.name
    if len(tables) != 1 or not fits(next(iter(tables.values())), kind):
        done[source, layout] = str(source), None
    else:
        ((name, frame),) = tables.items()
        if tables_of is None:
            write_table(frame, target, kind, table=name)
        else:
            write_tables(tables_of(name, frame), target, kind)
        done[source, layout] = str(target), loader.format(file=target.name, table=name)
    return done[source, layout]
