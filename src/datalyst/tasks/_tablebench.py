"""TableBench as tasks: each question's inline table is written out as a CSV file the agent can read."""

from __future__ import annotations

import csv
import hashlib
import io
import itertools
import logging
import re
from pathlib import Path

from datalyst.errors import DataFileError
from datalyst.files import write_atomic
from datalyst.jsonl import read_records
from datalyst.paths import cache_dir
from datalyst.tasks._task import Task

TABLEBENCH_FORMAT = (
    "Give only the final answer, with no explanation: a number or an entity name, "
    "or a short comma-separated list of them when several are asked for."
)
HASH_CHARS = 16
_SAFE_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")

log = logging.getLogger(__name__)


def tablebench_csv(record: dict, path: Path) -> str:
    """The record's ``table`` ({columns, data}) as CSV text; a malformed table raises DataFileError."""
    table = record.get("table")
    columns = table.get("columns") if isinstance(table, dict) else None
    data = table.get("data") if isinstance(table, dict) else None
    if not isinstance(columns, list) or not isinstance(data, list):
        raise DataFileError(f"TableBench row {record['id']} in {path} has no table {{columns, data}}; fix that row")
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["" if cell is None else cell for cell in columns])
    for number, row in enumerate(data, start=1):
        if not isinstance(row, list) or len(row) != len(columns):
            raise DataFileError(
                f"TableBench row {record['id']} in {path}: table row {number} does not have "
                f"{len(columns)} cells like the header; fix that row"
            )
        writer.writerow(["" if cell is None else cell for cell in row])
    return buffer.getvalue()


def _write_if_changed(target: Path, text: str) -> None:
    """Write ``text`` to ``target`` atomically; leave an identical file alone."""
    data = text.encode("utf-8")
    try:
        if target.read_bytes() == data:
            return
    except OSError:
        pass
    write_atomic(target, data)


def _check_record(record: dict, path: Path) -> str:
    rid = str(record["id"])
    if not _SAFE_ID.fullmatch(rid):
        raise DataFileError(f"TableBench id {rid!r} in {path} cannot name a file; use letters, digits, '_', '-', '.'")
    for field in ("question", "qtype", "qsubtype"):
        if not isinstance(record.get(field), str):
            raise DataFileError(f"TableBench row {rid} in {path} has no text '{field}'; fix that row")
    if record.get("answer") is None:
        raise DataFileError(f"TableBench row {rid} in {path} has no 'answer'; fix that row")
    return rid


def _distinct_ids(ids: list[str], path: Path) -> list[str]:
    """``ids`` with each repeat renamed ``<id>-2``, ``<id>-3``… (skipping ids the file uses), in file order.

    The full TableBench test set holds one id on two different questions; both are kept, and the
    renaming depends only on the file, so it is the same on every load. It is logged once.
    """
    taken = set(ids)
    seen: set[str] = set()
    renamed: dict[str, list[str]] = {}
    distinct = []
    for rid in ids:
        new = rid
        if rid in seen:
            new = next(f"{rid}-{n}" for n in itertools.count(2) if f"{rid}-{n}" not in taken)
            taken.add(new)
            renamed.setdefault(rid, []).append(new)
        seen.add(rid)
        distinct.append(new)
    if renamed:
        listed = "; ".join(
            f"{rid} ({len(new)} more row{'s' if len(new) > 1 else ''}: {', '.join(new)})"
            for rid, new in renamed.items()
        )
        log.warning("TableBench file %s repeats ids; the later rows are kept under new ids: %s", path, listed)
    return distinct


def load_tablebench(
    path: str | Path,
    *,
    tables_dir: str | Path | None = None,
    include_visualization: bool = False,
) -> list[Task]:
    """The TableBench questions of the JSONL file ``path``, in file order.

    Each inline table is saved as ``<tables_dir>/<id>.csv`` (default: a folder of the cache named
    after a hash of the file, so an edited file gets new tables); the task's ``answer`` is the gold
    answer text. A repeated id is kept under a new one (``<id>-2``, logged once). Chart-drawing
    questions (qtype ``Visualization``) have no text answer to compare and are left out unless
    ``include_visualization`` is set.
    """
    path = Path(path)
    records = read_records(path)
    if tables_dir is None:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:HASH_CHARS]
        tables_dir = cache_dir() / "tablebench" / digest
    tables_dir = Path(tables_dir)
    chosen = []
    ids = _distinct_ids([_check_record(record, path) for record in records], path)
    for rid, record in zip(ids, records, strict=True):
        if record["qtype"] == "Visualization" and not include_visualization:
            continue
        chosen.append((rid, record, tablebench_csv(record, path)))
    try:
        tables_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataFileError(f"cannot create the TableBench tables folder {tables_dir}: {exc}; pick another") from exc
    tasks = []
    for rid, record, text in chosen:
        table = tables_dir / f"{rid}.csv"
        try:
            _write_if_changed(table, text)
        except OSError as exc:
            raise DataFileError(f"cannot write {table}: {exc}; check the tables folder") from exc
        tasks.append(
            Task(
                id=rid,
                question=record["question"],
                format=TABLEBENCH_FORMAT,
                files=[str(table)],
                answer=str(record["answer"]),
                judge="tablebench",
                category=record["qtype"],
                subcategory=record["qsubtype"],
                source="tablebench",
            )
        )
    return tasks
