"""JSONL record files (benchmarks, task sets, run outputs): read with one-line errors, appended safely."""

from __future__ import annotations

import json
from pathlib import Path

from datalyst.errors import DataFileError


def read_records(path: str | Path) -> list[dict]:
    """Every non-blank line of ``path`` as a JSON object that has an ``id``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DataFileError(f"cannot read {path}: {exc}; check the path") from exc
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataFileError(f"{path} line {number} is not JSON ({exc}); fix or remove that line") from exc
        if not isinstance(record, dict) or "id" not in record:
            raise DataFileError(f"{path} line {number} is not an object with an 'id'; fix or remove that line")
        records.append(record)
    return records


def drop_torn_tail(path: Path) -> None:
    """Cut a last line left half-written by an interrupted run, so the next appended record starts a line."""
    if path.exists() and (data := path.read_bytes()) and not data.endswith(b"\n"):
        with path.open("rb+") as f:
            f.truncate(data.rfind(b"\n") + 1)
