"""JSONL record files (benchmarks, task sets, run outputs): read with one-line errors, appended safely."""

from __future__ import annotations

import gzip
import json
import re
from array import array
from itertools import accumulate
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from datalyst.errors import DataFileError, first_problem

Record = TypeVar("Record", bound=BaseModel)
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
_BRACKET_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
"""Openers to +1 and closers to -1 (as signed bytes), so a running sum is the nesting depth."""


def nesting_depth(document: bytes) -> int:
    """How deep arrays and objects nest in a JSON ``document`` (brackets inside strings left out), in linear time
    and without parsing it: Python's JSON decoder recurses once a level, so a document nested past a few hundred
    levels must be refused before it is decoded."""
    steps = _JSON_STRING.sub(b"", document).translate(_BRACKET_STEPS, _NOT_BRACKETS)
    return max(accumulate(array("b", steps)), default=0)


def split_lines(text: str) -> list[str]:
    """The lines of JSON-lines text, cut at line feeds only: JSON keeps U+2028, U+2029 and U+0085 unescaped
    inside strings, where ``str.splitlines`` would cut a record in two. The last item follows the last line feed."""
    return text.split("\n")


def read_records(path: str | Path, *, key: str = "id") -> list[dict]:
    """Every non-blank line of ``path`` (gzipped when it ends in ``.gz``) as a JSON object that has ``key``."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        text = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode("utf-8")
    except (OSError, gzip.BadGzipFile, UnicodeDecodeError) as exc:
        raise DataFileError(f"cannot read {path}: {exc}; check the path") from exc
    records = []
    for number, line in enumerate(split_lines(text), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataFileError(f"{path} line {number} is not JSON ({exc}); fix or remove that line") from exc
        if not isinstance(record, dict) or key not in record:
            raise DataFileError(f"{path} line {number} is not an object with an {key!r}; fix or remove that line")
        records.append(record)
    return records


def read_appended(path: Path, model: type[Record], *, what: str, fix: str) -> list[Record]:
    """The lines of an append-only file as ``model`` records, in order (none when it does not exist).

    Only a torn last line (an interrupted write) is skipped; any other line that is not ``what``
    raises one DataFileError naming the file and line, ending with ``fix``.
    """
    if not path.exists():
        return []
    lines = split_lines(path.read_text(encoding="utf-8"))
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(model.model_validate_json(line))
        except ValidationError as exc:
            if number == len(lines):
                break  # a last line with no "\n" after it: the next append cuts it off (drop_torn_tail)
            raise DataFileError(f"{path} line {number} is not {what} ({first_problem(exc)}); {fix}") from None
    return records


def drop_torn_tail(path: Path) -> None:
    """Cut a last line left half-written by an interrupted run, so the next appended record starts a line."""
    if path.exists() and (data := path.read_bytes()) and not data.endswith(b"\n"):
        with path.open("rb+") as f:
            f.truncate(data.rfind(b"\n") + 1)
