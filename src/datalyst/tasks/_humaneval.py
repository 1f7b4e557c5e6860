"""HumanEval as tasks: complete a Python function; the problem's own ``check`` decides (see ``judge``)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from datalyst.errors import DataFileError
from datalyst.tasks._task import Task

FIELDS = ("task_id", "prompt", "canonical_solution", "test", "entry_point")


def load_humaneval(path: str | Path) -> list[Task]:
    """The problems of ``HumanEval.jsonl.gz`` (or an unpacked ``.jsonl``), in file order.

    The question is the prompt (a signature and docstring), ``check`` the test code, ``solution`` the
    canonical completion.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
        text = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode("utf-8")
    except (OSError, gzip.BadGzipFile, UnicodeDecodeError) as exc:
        raise DataFileError(f"cannot read HumanEval from {path}: {exc}; check the path") from exc
    tasks = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataFileError(f"{path} line {number} is not JSON ({exc})") from exc
        if not isinstance(record, dict) or (missing := [f for f in FIELDS if not isinstance(record.get(f), str)]):
            raise DataFileError(f"{path} line {number} lacks HumanEval's fields: {', '.join(missing or FIELDS)}")
        tasks.append(Task(id=record["task_id"], question=record["prompt"], judge="humaneval", check=record["test"],
                          entry_point=record["entry_point"], solution=record["canonical_solution"],
                          category="code", source="humaneval"))  # fmt: skip
    return tasks
