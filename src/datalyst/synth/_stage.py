"""The loop every task-making stage shares: one table at a time, appended, resumable, counted.

For each table of a ``synth files`` output, in order, a stage's ``table_tasks`` makes that table's tasks
and counts the drafts it rejected by check. A table's tasks are appended together, then a line in
``<out>.progress.jsonl`` marks it done with its counts: a rerun skips done tables and first drops the
tasks of a table that was cut off halfway, so the output is the same as a run without the cut.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict
from rich.console import Console
from rich.progress import track

from datalyst.jsonl import drop_torn_tail, read_appended
from datalyst.provenance import write_manifest
from datalyst.synth._files import SourceFile, read_source_files
from datalyst.tasks import Task, read_tasks, write_tasks

_FIX = "restore the file or move the line out"
TableTasks = Callable[[SourceFile], tuple[list[Task], Counter[str]]]


class TableProgress(BaseModel):
    """A table whose tasks are all written, and what became of its drafts."""

    model_config = ConfigDict(extra="forbid")

    id: str
    """The table's ``SourceFile.id``."""
    kept: int
    rejected: dict[str, int]


class TaskSummary(BaseModel):
    """The tasks of a stage's output so far, and the drafts it rejected."""

    tasks: int
    tables: int
    tables_with_tasks: int
    by_category: dict[str, int]
    by_level: dict[str, int]
    by_format: dict[str, int]
    rejected_by_check: dict[str, int]


def run_per_table(
    files: str | Path,
    out: str | Path,
    table_tasks: TableTasks,
    *,
    checks: Sequence[str],
    settings: dict[str, object],
    progress: bool = True,
) -> TaskSummary:
    """Append to ``out`` the tasks of every table of ``files`` not done yet; the manifest beside ``out``
    records ``settings`` and the summary, which is returned (rejections listed in the order of ``checks``)."""
    out = Path(out)
    progress_path = out.with_name(out.name + ".progress.jsonl")
    out.parent.mkdir(parents=True, exist_ok=True)
    drop_torn_tail(progress_path)
    done = {entry.id: entry for entry in read_appended(progress_path, TableProgress, what="a progress line", fix=_FIX)}
    _drop_unfinished(out, done)
    records = read_source_files(files)
    settings = {"files": str(Path(files).resolve()), **settings}
    write_manifest(out, **settings)
    todo = [record for record in records if record.id not in done]
    console = Console(stderr=True)
    with out.open("a", encoding="utf-8") as sink, progress_path.open("a", encoding="utf-8") as marks:
        for record in track(todo, description="tables", console=console, disable=not progress):
            tasks, rejected = table_tasks(record)
            sink.write("".join(task.model_dump_json(exclude_defaults=True) + "\n" for task in tasks))
            sink.flush()
            entry = TableProgress(id=record.id, kept=len(tasks), rejected=dict(sorted(rejected.items())))
            marks.write(entry.model_dump_json() + "\n")
            marks.flush()
            done[record.id] = entry
    summary = _summary(read_tasks(out) if out.exists() else [], done, records, checks)
    write_manifest(out, **settings, summary=summary.model_dump())
    return summary


def _drop_unfinished(out: Path, done: dict[str, TableProgress]) -> None:
    """Remove the tasks of tables whose run was cut off (they are made again)."""
    if not out.exists():
        return
    drop_torn_tail(out)
    tasks = read_tasks(out)
    finished = [task for task in tasks if task.lineage and (task.lineage.source_hash or "")[:16] in done]
    if len(finished) != len(tasks):
        write_tasks(finished, out)


def _summary(
    tasks: list[Task], done: dict[str, TableProgress], records: list[SourceFile], checks: Sequence[str]
) -> TaskSummary:
    kinds = {record.id: record.kind.value for record in records}
    rejected: Counter[str] = Counter()
    for entry in done.values():
        rejected.update(entry.rejected)
    return TaskSummary(
        tasks=len(tasks),
        tables=len(done),
        tables_with_tasks=sum(entry.kept > 0 for entry in done.values()),
        by_category=dict(sorted(Counter(task.category or "" for task in tasks).items())),
        by_level=dict(sorted(Counter(task.level or "" for task in tasks).items())),
        by_format=dict(sorted(Counter(kinds.get(_table_id(task), "?") for task in tasks).items())),
        rejected_by_check={check: rejected[check] for check in checks if rejected[check]},
    )


def _table_id(task: Task) -> str:
    return (task.lineage.source_hash or "")[:16] if task.lineage else ""
