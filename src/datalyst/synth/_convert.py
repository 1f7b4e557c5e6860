"""The same tasks over other file formats: questions and answers unchanged, each task's data files rewritten as
JSON, TSV, XLSX, ... Runs over the converted tasks pair with runs over the originals (same task ids), so they
measure what reading a format costs the agent, DABench's CSV questions asked of JSON files, say."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from datalyst.data import SUFFIXES, FileKind, fits, load, write_table
from datalyst.errors import ConfigError
from datalyst.tasks import Task

FORMATS = (FileKind.JSON, FileKind.TSV, FileKind.XLSX)
"""The formats tasks are converted to by default, in turn: the kinds a user's files come in besides CSV."""


def convert_tasks(tasks: Sequence[Task], folder: str | Path, kinds: Sequence[FileKind] = FORMATS) -> list[Task]:
    """``tasks`` with their files rewritten: task i gets ``kinds[i % len(kinds)]``, written under ``folder/<kind>/``
    with the file's own stem (a file several tasks share is written once). A file that holds several tables (an
    SQLite database, a workbook of sheets), or one the format cannot hold whole, stays as it is."""
    if not kinds:
        raise ConfigError("name at least one format to convert the tasks' files to")
    folder, done = Path(folder), {}
    converted = []
    for number, task in enumerate(tasks):
        kind = kinds[number % len(kinds)]
        files = [_converted(Path(path), kind, folder, done) for path in task.files]
        converted.append(task.model_copy(update={"files": files}))
    return converted


def _converted(path: Path, kind: FileKind, folder: Path, done: dict[tuple[Path, FileKind], str]) -> str:
    """The path of ``path`` as ``kind`` (written on first use), or ``path`` itself when it holds several tables or
    ``kind`` cannot hold its table whole."""
    source = path.resolve()
    if (source, kind) in done:
        return done[source, kind]
    tables = load(path)
    target = folder.resolve() / kind.value / f"{path.stem}{SUFFIXES[kind]}"
    if len(tables) != 1 or not fits(next(iter(tables.values())), kind):
        target = source
    elif clash := next((other for (other, _), made in done.items() if made == str(target)), None):
        raise ConfigError(f"{path} and {clash} would both become {target}; convert them apart")
    else:
        ((name, frame),) = tables.items()
        write_table(frame, target, kind, table=name)
    done[source, kind] = str(target)
    return str(target)
