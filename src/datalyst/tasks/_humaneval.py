"""HumanEval as tasks: complete a Python function; the problem's own ``check`` decides (see ``judge``)."""

from __future__ import annotations

from pathlib import Path

from datalyst.errors import DataFileError
from datalyst.jsonl import read_records
from datalyst.tasks._task import Task

FIELDS = ("task_id", "prompt", "canonical_solution", "test", "entry_point")


def load_humaneval(path: str | Path) -> list[Task]:
    """The problems of ``HumanEval.jsonl.gz`` (or an unpacked ``.jsonl``), in file order.

    The question is the prompt (a signature and docstring), ``check`` the test code, ``solution`` the
    canonical completion.
    """
    tasks = []
    for record in read_records(path, key="task_id"):
        if missing := [name for name in FIELDS if not isinstance(record.get(name), str)]:
            raise DataFileError(f"HumanEval problem {record['task_id']} in {path} lacks {', '.join(missing)}")
        tasks.append(Task(id=record["task_id"], question=record["prompt"], judge="humaneval", check=record["test"],
                          entry_point=record["entry_point"], solution=record["canonical_solution"],
                          category="code", source="humaneval"))  # fmt: skip
    return tasks
