"""The loop every task-making stage shares: one unit (a table, a generated dataset) at a time, resumable.

For each unit, in order, a stage's ``make`` function returns the unit's tasks and counts the drafts it rejected by
check (or a coroutine of them, run in the stage's one event loop). A unit's tasks are appended together, then a line in
``<out>.progress.jsonl`` marks it done with how many it kept: a rerun skips done units and first cuts the output back
to the tasks of done units (those of a unit cut off halfway come after them), so it ends as a run without the cut.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict
from rich.console import Console
from rich.progress import track

from datalyst.jsonl import drop_torn_tail, read_appended
from datalyst.provenance import write_manifest
from datalyst.tasks import Task, read_tasks, write_tasks

_FIX = "restore the file or move the line out"


class Unit(Protocol):
    @property
    def id(self) -> str: ...


U = TypeVar("U", bound=Unit)
Made = tuple[list[Task], Counter[str]]


class UnitProgress(BaseModel):
    """A unit whose tasks are all written, and what became of its drafts."""

    model_config = ConfigDict(extra="forbid")

    id: str
    kept: int
    rejected: dict[str, int]


class TaskSummary(BaseModel):
    """The tasks of a stage's output so far, and the drafts it rejected."""

    tasks: int
    units: int
    """Tables (or generated datasets) done."""
    units_with_tasks: int
    by_category: dict[str, int]
    by_level: dict[str, int]
    by_format: dict[str, int]
    rejected_by_check: dict[str, int]


def run_units(
    units: Sequence[U],
    out: str | Path,
    make: Callable[[U], Made | Coroutine[Any, Any, Made]],
    *,
    checks: Sequence[str],
    settings: dict[str, object],
    progress: bool = True,
) -> TaskSummary:
    """Append to ``out`` the tasks of every unit not done yet; the manifest beside ``out`` records ``settings``
    and the summary, which is returned (rejections listed in the order of ``checks``)."""
    out = Path(out)
    progress_path = out.with_name(out.name + ".progress.jsonl")
    out.parent.mkdir(parents=True, exist_ok=True)
    drop_torn_tail(progress_path)
    done = {entry.id: entry for entry in read_appended(progress_path, UnitProgress, what="a progress line", fix=_FIX)}
    _drop_unfinished(out, sum(entry.kept for entry in done.values()))
    write_manifest(out, **settings)
    todo = [unit for unit in units if unit.id not in done]
    console = Console(stderr=True)
    runner = asyncio.Runner()  # one event loop for every coroutine the stage's units make
    with runner, out.open("a", encoding="utf-8") as sink, progress_path.open("a", encoding="utf-8") as marks:
        for unit in track(todo, description="units", console=console, disable=not progress):
            made = make(unit)
            tasks, rejected = runner.run(made) if asyncio.iscoroutine(made) else made
            sink.write("".join(task.model_dump_json(exclude_defaults=True) + "\n" for task in tasks))
            sink.flush()
            entry = UnitProgress(id=unit.id, kept=len(tasks), rejected=dict(sorted(rejected.items())))
            marks.write(entry.model_dump_json() + "\n")
            marks.flush()
            done[unit.id] = entry
    summary = _summary(read_tasks(out) if out.exists() else [], done, checks)
    write_manifest(out, **settings, summary=summary.model_dump())
    return summary


def _drop_unfinished(out: Path, kept: int) -> None:
    """Cut the output back to the ``kept`` tasks of done units (the rest belong to a unit cut off halfway)."""
    if not out.exists():
        return
    drop_torn_tail(out)
    tasks = read_tasks(out)
    if len(tasks) != kept:
        write_tasks(tasks[:kept], out)


def _summary(tasks: list[Task], done: dict[str, UnitProgress], checks: Sequence[str]) -> TaskSummary:
    rejected: Counter[str] = Counter()
    for entry in done.values():
        rejected.update(entry.rejected)
    return TaskSummary(
        tasks=len(tasks),
        units=len(done),
        units_with_tasks=sum(entry.kept > 0 for entry in done.values()),
        by_category=dict(sorted(Counter(task.category or "no category" for task in tasks).items())),
        by_level=dict(sorted(Counter(task.level or "no level" for task in tasks).items())),
        by_format=dict(sorted(Counter(Path(task.files[0]).suffix.lstrip(".") for task in tasks if task.files).items())),
        rejected_by_check={check: rejected[check] for check in checks if rejected[check]},
    )
