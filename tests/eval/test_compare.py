"""Two runs compared on their shared tasks, overall and group by group (level, category, file format)."""

from __future__ import annotations

from pathlib import Path

import pytest

from datalyst.agent import Status
from datalyst.errors import ConfigError
from datalyst.eval import EvalOutcome, GroupBy, compare_runs
from datalyst.tasks import Task, write_tasks

TASKS = [
    Task(id="1", question="q", files=["a.csv"], level="hard"),
    Task(id="2", question="q", files=["b.json"], level="easy"),
    Task(id="3", question="q", files=["c.JSON"], level="easy"),
    Task(id="4", question="q", level=None),
]


def write_run(folder: Path, scores: dict[str, float], *, tasks: bool = True) -> Path:
    folder.mkdir()
    rows = [
        EvalOutcome(trajectory_id=f"{task}#0", task_id=task, dialect="jupiter", trial=0, score=score,
                status=Status.RIGHT if score == 1.0 else Status.WRONG).model_dump_json()
        for task, score in scores.items()
    ]  # fmt: skip
    (folder / "outcomes.jsonl").write_text("\n".join(rows) + "\n")
    if tasks:
        write_tasks(TASKS, folder / "tasks.jsonl")
    return folder


def test_each_group_is_compared_on_its_own_tasks(tmp_path):
    a = write_run(tmp_path / "a", {"1": 0, "2": 1, "3": 0, "4": 0})
    b = write_run(tmp_path / "b", {"1": 1, "2": 1, "3": 1, "4": 0})
    (by_level,) = compare_runs(a, b, by=GroupBy.LEVEL).dialects
    assert by_level.pass_at_1.delta.value == pytest.approx(0.5)
    assert list(by_level.groups) == ["easy", "hard"]  # easiest first; task 4 has no level
    easy, hard = by_level.groups["easy"], by_level.groups["hard"]
    assert (easy.n_tasks, easy.pass_at_1.a, easy.pass_at_1.b) == (2, 0.5, 1.0)
    assert (hard.n_tasks, hard.pass_at_1.a, hard.pass_at_1.b) == (1, 0.0, 1.0)
    comparison = compare_runs(a, b, by=GroupBy.FORMAT)
    (by_format,) = comparison.dialects
    assert {name: g.n_tasks for name, g in by_format.groups.items()} == {"csv": 1, "json": 2, "none": 1}
    assert "pass@1 by format:" in comparison.render() and "json (2): A 50.0  B 100.0" in comparison.render()
    assert compare_runs(a, b).dialects[0].groups == {}


def test_grouping_needs_the_runs_tasks(tmp_path):
    a = write_run(tmp_path / "a", {"1": 0}, tasks=False)
    b = write_run(tmp_path / "b", {"1": 1})
    with pytest.raises(ConfigError, match=r"no config\.json"):  # neither its tasks nor the settings that chose them
        compare_runs(a, b, by=GroupBy.LEVEL)
