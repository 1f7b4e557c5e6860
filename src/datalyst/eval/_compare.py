"""Two runs side by side: the difference per dialect on shared tasks, with a paired significance test."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict

from datalyst.errors import ConfigError
from datalyst.eval._metrics import Estimate, bootstrap, score_matrix
from datalyst.eval._report import group_order
from datalyst.eval._run import dialects_of, read_outcomes, run_tasks
from datalyst.tasks import Task

PERMUTATIONS = 10_000
SIGNIFICANCE = 0.05


class GroupBy(StrEnum):
    """How ``compare_runs`` groups tasks: by difficulty level, category or the format of the task's file."""

    LEVEL = "level"
    CATEGORY = "category"
    FORMAT = "format"


class Difference(BaseModel):
    """B - A for one metric, over tasks both runs have."""

    model_config = ConfigDict(frozen=True)

    a: float
    b: float
    delta: Estimate
    """Mean per-task difference with its paired bootstrap interval."""
    p_value: float
    """Two-sided paired sign-flip permutation test of "no difference"."""

    @property
    def is_significant(self) -> bool:
        return self.p_value < SIGNIFICANCE


class GroupComparison(BaseModel):
    """pass@1's difference on the shared tasks of one group (a level, a category, a file format)."""

    model_config = ConfigDict(frozen=True)

    n_tasks: int
    pass_at_1: Difference


class DialectComparison(BaseModel):
    model_config = ConfigDict(frozen=True)

    dialect_a: str
    dialect_b: str
    n_tasks: int
    pass_at_1: Difference
    pass_at_k: Difference
    groups: dict[str, GroupComparison] = {}
    """By ``Comparison.by`` when it is set: tasks in no group (no level, say) are left out."""


class Comparison(BaseModel):
    run_a: str
    run_b: str
    by: GroupBy | None = None
    dialects: list[DialectComparison]

    def render(self) -> str:
        lines = [f"B = {self.run_b}  vs  A = {self.run_a}  (rates in %, 95% intervals, paired tests)", ""]
        for d in self.dialects:
            name = d.dialect_a if d.dialect_a == d.dialect_b else f"{d.dialect_a} -> {d.dialect_b}"
            lines.append(f"{name} ({d.n_tasks} shared tasks)")
            for label, diff in (("pass@1", d.pass_at_1), ("pass@k", d.pass_at_k)):
                verdict = "significant" if diff.is_significant else "not significant"
                lines.append(
                    f"  {label}: A {100 * diff.a:.1f}  B {100 * diff.b:.1f}  B-A {diff.delta}  "
                    f"p={diff.p_value:.3f} ({verdict} at {SIGNIFICANCE})"
                )
            if d.groups:
                lines.append(f"  pass@1 by {self.by}:")
            for name, group in d.groups.items():
                diff = group.pass_at_1
                lines.append(
                    f"    {name} ({group.n_tasks}): A {100 * diff.a:.1f}  B {100 * diff.b:.1f}  B-A {diff.delta}  "
                    f"p={diff.p_value:.3f}"
                )
        return "\n".join(lines)


def compare_runs(
    run_a: str | Path,
    run_b: str | Path,
    *,
    dialect_a: str | None = None,
    dialect_b: str | None = None,
    by: GroupBy | None = None,
    seed: int = 0,
) -> Comparison:
    """Compare the dialects both runs share (or their only dialects, when each has one).

    ``dialect_a`` and ``dialect_b`` pick one dialect of each run instead; with the same run twice
    this compares two dialects of one run. ``by`` adds pass@1's difference in each group of tasks: by
    difficulty level, category or the format of the task's file (read from the runs' ``tasks.jsonl``).
    """
    outcomes_a, outcomes_b = read_outcomes(run_a), read_outcomes(run_b)
    dialects_a, dialects_b = dialects_of(outcomes_a), dialects_of(outcomes_b)
    for chosen, present, run in ((dialect_a, dialects_a, run_a), (dialect_b, dialects_b, run_b)):
        if chosen is not None and chosen not in present:
            raise ConfigError(f"{run} has no {chosen!r} trajectories (it has {', '.join(present) or 'none'})")
    pairs = [(d, d) for d in dialects_a if d in dialects_b]
    if dialect_a or dialect_b:
        pairs = [(dialect_a or dialects_a[0], dialect_b or dialects_b[0])]
    elif not pairs and len(dialects_a) == len(dialects_b) == 1:
        pairs = [(dialects_a[0], dialects_b[0])]
    if not pairs:
        raise ConfigError(f"{run_a} and {run_b} share no dialect ({dialects_a} vs {dialects_b}); nothing to compare")
    tasks = {task.id: task for run in (run_a, run_b) for task in run_tasks(run)} if by is not None else {}
    compared = []
    for dialect_a, dialect_b in pairs:
        ids_a, matrix_a = score_matrix([v for v in outcomes_a if v.dialect == dialect_a])
        ids_b, matrix_b = score_matrix([v for v in outcomes_b if v.dialect == dialect_b])
        shared = sorted(set(ids_a) & set(ids_b))
        if not shared:
            raise ConfigError(f"{run_a} and {run_b} share no task; compare runs of the same benchmark")
        rows_a = matrix_a[[ids_a.index(i) for i in shared]]
        rows_b = matrix_b[[ids_b.index(i) for i in shared]]
        groups = {}
        if by is not None:
            for name, indices in _groups(shared, tasks, by).items():
                a, b = rows_a[indices].mean(axis=1), rows_b[indices].mean(axis=1)
                groups[name] = GroupComparison(n_tasks=len(indices), pass_at_1=paired_difference(a, b, seed=seed))
        compared.append(
            DialectComparison(
                dialect_a=dialect_a,
                dialect_b=dialect_b,
                n_tasks=len(shared),
                pass_at_1=paired_difference(rows_a.mean(axis=1), rows_b.mean(axis=1), seed=seed),
                pass_at_k=paired_difference(rows_a.max(axis=1), rows_b.max(axis=1), seed=seed),
                groups=groups,
            )
        )
    return Comparison(run_a=str(run_a), run_b=str(run_b), by=by, dialects=compared)


def _groups(task_ids: list[str], tasks: dict[str, Task], by: GroupBy) -> dict[str, list[int]]:
    """The positions in ``task_ids`` of each group's tasks, groups in report order (levels easiest first)."""
    attribute = {GroupBy.LEVEL: "level", GroupBy.CATEGORY: "category", GroupBy.FORMAT: "file_format"}[by]
    members: dict[str, list[int]] = {}
    for index, task_id in enumerate(task_ids):
        if task_id in tasks and (name := getattr(tasks[task_id], attribute)) is not None:
            members.setdefault(name, []).append(index)
    return {name: members[name] for name in sorted(members, key=group_order)}


def paired_difference(a: np.ndarray, b: np.ndarray, *, seed: int = 0) -> Difference:
    """The mean of ``b - a`` per task, its bootstrap interval, and a sign-flip permutation p-value."""
    diffs = b - a
    observed = abs(diffs.mean())
    signs = np.random.default_rng(seed).choice((-1.0, 1.0), size=(PERMUTATIONS, diffs.size))
    extreme = np.count_nonzero(np.abs((signs * diffs).mean(axis=1)) >= observed - 1e-12)
    return Difference(
        a=float(a.mean()),
        b=float(b.mean()),
        delta=bootstrap(diffs, seed=seed),
        p_value=(extreme + 1) / (PERMUTATIONS + 1),
    )
