"""Task sets as JSONL files: one :class:`Task` per line."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pydantic import ValidationError

from datalyst.errors import DataFileError, first_problem
from datalyst.files import write_atomic
from datalyst.jsonl import read_records
from datalyst.tasks._task import Task


def read_tasks(path: str | Path) -> list[Task]:
    """Tasks from a JSONL file; relative data file paths are taken relative to the file's folder."""
    path = Path(path)
    tasks = []
    for number, record in enumerate(read_records(path), start=1):
        record = {**record, "id": str(record["id"])}
        try:
            task = Task.model_validate(record)
        except ValidationError as exc:
            raise DataFileError(f"{path} record {number}: {first_problem(exc)}") from exc
        task.files = [str(f if Path(f).is_absolute() else path.parent / f) for f in task.files]
        tasks.append(task)
    ids = [task.id for task in tasks]
    if len(set(ids)) != len(ids):
        repeated = sorted({i for i in ids if ids.count(i) > 1})[:5]
        raise DataFileError(f"{path} repeats task ids {repeated}; every id must be unique")
    return tasks


def write_tasks(tasks: Iterable[Task], path: str | Path) -> None:
    """Write ``tasks`` as JSONL (replacing ``path`` atomically)."""
    write_atomic(path, "".join(task.model_dump_json(exclude_defaults=True) + "\n" for task in tasks))
