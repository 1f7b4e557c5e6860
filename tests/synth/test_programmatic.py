"""``synth templates``: verified tasks with lineage, the same bytes on every run, resumable after a cut."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from datalyst.sandbox import Sandbox
from datalyst.synth import FileOptions, collect_files, make_template_tasks
from datalyst.tasks import extract_answers, read_tasks


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    rng = np.random.default_rng(3)
    for index in range(3):
        rows = 40 + 10 * index
        pd.DataFrame(
            {
                "team": [f"team {i}" for i in range(rows)],
                "league": rng.choice(["east", "west", "central"], rows),
                "wins": rng.integers(10, 70, rows),
                "payroll": rng.uniform(50, 250, rows).round(1),
            }
        ).to_csv(folder / f"season{index}.csv", index=False)
    out = folder / "files.jsonl"
    collect_files([folder], out, options=FileOptions(convert_share=0.7, seed=1), progress=False)
    return out


def test_tasks_carry_the_answer_their_solution_prints_and_their_lineage(files, tmp_path):
    out = tmp_path / "tasks.jsonl"
    summary = make_template_tasks(files, out, progress=False)
    tasks = read_tasks(out)
    assert summary.tasks == len(tasks) >= 20 and summary.units == summary.units_with_tasks == 3
    assert set(summary.by_format) == {"csv", "sqlite", "xlsx"} and len(summary.by_category) >= 8
    assert len({task.id for task in tasks}) == len(tasks)
    task = tasks[0]
    with Sandbox(files=task.files) as box:
        printed = box.run_python(task.solution).stdout
    assert extract_answers(printed) == task.answer
    assert task.judge == "dabench" and task.source == "synth:templates" and task.format.startswith("@")
    assert task.lineage.generator and task.lineage.version == 1 and task.lineage.source_hash
    manifest = json.loads(out.with_name("tasks.jsonl.manifest.json").read_text())
    assert manifest["summary"] == summary.model_dump() and manifest["options"]["seed"] == 0


def test_runs_are_byte_identical_and_resume_after_a_cut(files, tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    make_template_tasks(files, first, progress=False)
    make_template_tasks(files, second, progress=False)
    assert first.read_bytes() == second.read_bytes()
    progress = second.with_name("b.jsonl.progress.jsonl")
    lines = progress.read_text().splitlines(keepends=True)
    progress.write_text("".join(lines[:-1]))  # the last table's tasks are written, its mark is not
    summary = make_template_tasks(files, second, progress=False)
    assert second.read_bytes() == first.read_bytes()
    assert summary.units == 3
