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
    """How a converted table is written: the file kind, and how the table becomes the file's tables."""

    kind: FileKind
    tables: Callable[[str, pd.DataFrame], dict[str, pd.DataFrame]] | None = None
    """The file's named tables from the table's name and rows (None: the table as the kind writes one)."""


LAYOUTS: dict[str, Layout] = {kind.value: Layout(kind) for kind in FileKind} | {
    "json-nested": Layout(FileKind.JSON, lambda name, frame: {name: frame}),
    "xlsx-sheets": Layout(FileKind.XLSX, lambda name, frame: sheets_of(frame)),
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
        converted.append(task.model_copy(update={"files": files}))
    return converted


def _converted(path: Path, layout: str, folder: Path, done: dict[tuple[Path, str], str]) -> str:
    """The path of ``path`` in ``layout`` (written on first use; a second file of the same name goes to a folder of
    its own), or ``path`` itself when it holds several tables or the layout cannot hold its table whole."""
    source, (kind, tables_of) = path.resolve(), LAYOUTS[layout]
    if (source, layout) in done:
        return done[source, layout]
    tables = load(path)
    target = folder.resolve() / layout / f"{path.stem}{SUFFIXES[kind]}"
    if str(target) in done.values():  # another file of this name: a folder of its own keeps the name the agent sees
        target = target.parent / hashlib.sha256(str(source).encode()).hexdigest()[:8] / target.name
    if len(tables) != 1 or not fits(next(iter(tables.values())), kind):
        target = source
    else:
        ((name, frame),) = tables.items()
        if tables_of is None:
            write_table(frame, target, kind, table=name)
        else:
            write_tables(tables_of(name, frame), target, kind)
    done[source, layout] = str(target)
    return str(target)
