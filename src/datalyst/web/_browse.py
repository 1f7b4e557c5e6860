"""What the Runs and Data pages read: evaluation runs with their outcomes, and tasks or trajectories files.

Everything here reads files the server was given; names come in relative to those folders and are resolved
by :func:`inside`, so no request reaches a file outside them.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from datalyst.agent import Trajectory, read_trajectories, to_html
from datalyst.curate import RunFolder
from datalyst.eval import EvalReport, compare_runs, read_config, read_outcomes, run_trajectories
from datalyst.jsonl import split_lines
from datalyst.tasks import Task, read_tasks
from datalyst.web._security import Refused, inside

MAX_DEPTH = 4
"""Folders below a served root that are searched for runs and data files."""
MAX_ROWS = 1000
"""Rows one listing returns at most (filters narrow it)."""
SKIPPED = frozenset({"trajectories", "failures", "samples", "exports", "report", "checkpoints", "__pycache__"})
TEXT = 300
"""Characters of a question or an answer shown in a listing."""


def _walk(root: Path) -> Iterator[tuple[Path, list[str]]]:
    """Folders under ``root`` (to MAX_DEPTH, hidden and bulky ones skipped) with their file names."""
    base = len(root.parts)
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED)
        if len(here.parts) - base >= MAX_DEPTH:
            dirs.clear()
        yield here, sorted(files)


# -- runs ----------------------------------------------------------------------------------------------------


def list_runs(root: Path) -> list[dict[str, Any]]:
    """Every evaluation run under ``root`` that has a report, newest first, with its headline figures."""
    runs = []
    for folder, files in _walk(root):
        if "report.json" in files and "outcomes.jsonl" in files:
            report = _report(folder / "report.json", _stamp(folder / "report.json"))
            config = report.config
            runs.append({
                "id": folder.relative_to(root).as_posix(),
                "bench": config.bench, "model": config.model, "strategy": config.strategy, "trials": config.trials,
                "n_tasks": report.n_tasks, "created_at": report.created_at.isoformat(),
                "dialects": {d.dialect: d.rates.pass_at_1.value for d in report.dialects},
            })  # fmt: skip
    return sorted(runs, key=lambda run: run["created_at"], reverse=True)


def run_folder(root: Path, run_id: str) -> Path:
    folder = inside(root, run_id)
    if not (folder / "report.json").is_file() or not (folder / "outcomes.jsonl").is_file():
        raise Refused(f"{run_id!r} is not an evaluation run with a report")
    return folder


def run_report(root: Path, run_id: str) -> dict[str, Any]:
    path = run_folder(root, run_id) / "report.json"
    return _report(path, _stamp(path)).model_dump(mode="json")


def run_rows(root: Path, run_id: str, filters: dict[str, str]) -> dict[str, Any]:
    """The run's trajectories as rows (question, verdict, answer, gold answer), filtered by ``verdict``
    (right, wrong, unanswered), ``category``, ``level`` and ``dialect``."""
    folder = run_folder(root, run_id)
    rows = _run_rows(folder, _stamp(folder / "outcomes.jsonl", folder / "report.json"))
    return _filtered(rows, filters, ("verdict", "category", "level", "dialect"))


@functools.lru_cache(maxsize=8)
def _run_rows(folder: Path, stamp: tuple[Any, ...]) -> list[dict[str, Any]]:
    """Every row of a run, remembered while its outcomes and report stay the same (``stamp``): a filter
    applied again must not read every trajectory again."""
    tasks = {task.id: task for task in read_tasks(folder / "tasks.jsonl")}
    answers = {(t.dialect, t.id): t.answer for t in _run_trajectories(folder)}
    rows = []
    for judged in read_outcomes(folder):
        task = tasks.get(judged.task_id)
        rows.append({
            "id": judged.trajectory_id, "dialect": judged.dialect, "trial": judged.trial,
            "verdict": judged.status.value,
            "score": judged.score, "detail": judged.detail, "answer": _clip(answers.get((judged.dialect,
            judged.trajectory_id))), **_task_fields(task),
        })  # fmt: skip
    return rows


def run_page(root: Path, run_id: str, dialect: str, trajectory_id: str) -> str:
    for trajectory in _run_trajectories(run_folder(root, run_id)):
        if trajectory.dialect == dialect and trajectory.id == trajectory_id:
            return to_html(trajectory)
    raise Refused(f"{run_id!r} has no {dialect} trajectory {trajectory_id!r}")


def compare(root: Path, run_a: str, run_b: str) -> dict[str, Any]:
    """``datalyst eval compare`` of two runs: B - A on their shared tasks, with paired tests."""
    comparison = compare_runs(run_folder(root, run_a), run_folder(root, run_b))
    comparison = comparison.model_copy(update={"run_a": run_a, "run_b": run_b})  # names, not the server's paths
    payload = comparison.model_dump(mode="json") | {"text": comparison.render()}
    for dialect, compared in zip(payload["dialects"], comparison.dialects, strict=True):
        for name in ("pass_at_1", "pass_at_k"):
            dialect[name]["significant"] = getattr(compared, name).is_significant
    return payload


def _run_trajectories(folder: Path) -> list[Trajectory]:
    return run_trajectories(folder, read_config(folder))


def _stamp(*paths: Path) -> tuple[tuple[int, int] | None, ...]:
    """What changes when any of ``paths`` is written: each one's modification time and size (None if absent)."""
    return tuple((stat.st_mtime_ns, stat.st_size) if (stat := _stat(path)) else None for path in paths)


def _stat(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except OSError:
        return None


@functools.lru_cache(maxsize=64)
def _report(path: Path, stamp: tuple[Any, ...]) -> EvalReport:
    return EvalReport.model_validate_json(path.read_text(encoding="utf-8"))


# -- tasks and trajectories files ----------------------------------------------------------------------------


def list_data(roots: list[Path]) -> list[dict[str, Any]]:
    """The tasks and trajectories files under the served data folders; ``root`` indexes ``roots``."""
    found = []
    for index, root in enumerate(roots):
        for folder, files in _walk(root):
            for name in files:
                if name.endswith(".jsonl") and (kind := _kind(folder / name)) is not None:
                    found.append({"root": index, "name": (folder / name).relative_to(root).as_posix(), "kind": kind})
    return found


def data_file(roots: list[Path], root: int, name: str) -> Path:
    if not 0 <= root < len(roots):
        raise Refused(f"there is no served data folder {root}")
    path = inside(roots[root], name)
    if not path.is_file() or _kind(path) is None:
        raise Refused(f"{name!r} is not a tasks or trajectories file")
    return path


def data_rows(path: Path, filters: dict[str, str]) -> dict[str, Any]:
    """A tasks file's tasks, or a trajectories file's trajectories (with the stratum curation gave each kept one
    and the reason it dropped the others), as rows filtered by category, level, stratum and drop reason."""
    run, kind = RunFolder(path.parent), _kind(path)
    rows = _data_rows(path, kind, _stamp(path, run.kept, run.dropped))
    facets = ("category", "level") if kind == "tasks" else ("category", "level", "stratum", "reason")
    return _filtered(rows, filters, facets)


@functools.lru_cache(maxsize=8)
def _data_rows(path: Path, kind: str | None, stamp: tuple[Any, ...]) -> list[dict[str, Any]]:
    """Every row of a file of ``kind``, remembered while it (and the curation files beside it) stay the same."""
    if kind == "tasks":
        return [{**_task_fields(task), "answer": _clip(task.answer)} for task in read_tasks(path)]
    strata, reasons = _curation(path.parent)
    return [{
        **_task_fields(trajectory.task), "id": trajectory.id, "answer": _clip(trajectory.answer),
        "termination": trajectory.termination.value, "turns": len(trajectory.turns),
        "stratum": strata.get(trajectory.id), "reason": reasons.get(trajectory.id),
    } for trajectory in _trajectories(path)]  # fmt: skip


def data_page(path: Path, trajectory_id: str) -> str:
    for trajectory in _trajectories(path):
        if trajectory.id == trajectory_id:
            return to_html(trajectory)
    raise Refused(f"{path.name} has no trajectory {trajectory_id!r}")


def _trajectories(path: Path) -> list[Trajectory]:
    if _kind(path) == "curated":
        return [Trajectory.model_validate(json.loads(line)["trajectory"]) for line in _lines(path)]
    return read_trajectories(path)


def _curation(folder: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Stratum by trajectory id (kept ones) and drop reason by id, when ``folder`` is a curation run."""
    run = RunFolder(folder)
    kept = [json.loads(line) for line in _lines(run.kept)]
    dropped = [json.loads(line) for line in _lines(run.dropped)]
    return ({record["id"]: record["stratum"] for record in kept},
            {record["id"]: f"{record['stage']}: {record['reason']}" for record in dropped})  # fmt: skip


def _kind(path: Path) -> str | None:
    """``tasks``, ``trajectories`` or ``curated`` (kept trajectories), from the file's first record."""
    try:
        with path.open(encoding="utf-8") as file:
            first = json.loads(file.readline() or "null")
    except (OSError, ValueError):
        return None
    if not isinstance(first, dict):
        return None
    if "turns" in first and "task" in first:
        return "trajectories"
    if "trajectory" in first and "stratum" in first:
        return "curated"
    return "tasks" if "question" in first and "id" in first else None


def _lines(path: Path) -> list[str]:
    return [line for line in split_lines(path.read_text(encoding="utf-8")) if line.strip()] if path.exists() else []


# -- rows ----------------------------------------------------------------------------------------------------


def _task_fields(task: Task | None) -> dict[str, Any]:
    if task is None:
        return {"task_id": None, "question": None, "category": None, "level": None, "gold": None}
    return {"task_id": task.id, "question": _clip(task.question), "category": task.category, "level": task.level,
            "gold": _clip(task.answer)}  # fmt: skip


def _filtered(rows: list[dict[str, Any]], filters: dict[str, str], facets: tuple[str, ...]) -> dict[str, Any]:
    """The rows whose facets match ``filters`` (at most MAX_ROWS), every facet's values, and the counts."""
    values = {facet: sorted({str(row[facet]) for row in rows if row.get(facet) is not None}) for facet in facets}
    wanted = {facet: filters[facet] for facet in facets if filters.get(facet)}
    kept = [row for row in rows if all(str(row.get(facet)) == value for facet, value in wanted.items())]
    return {"total": len(rows), "matching": len(kept), "facets": values, "rows": kept[:MAX_ROWS]}


def _clip(value: Any) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= TEXT else text[: TEXT - 1] + "…"
