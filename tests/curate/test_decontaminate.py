"""Decontamination against benchmark questions and tables, with the real DABench data where it helps."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from datalyst.curate._decontaminate import BENCHMARK_QUESTION, BENCHMARK_TABLE, Decontaminator, question_text
from datalyst.synth import benchmark_fingerprints
from datalyst.tasks import Task, load_dabench

# DABench question 5 with its constraints, reworded by hand: six words changed, the sense and layout kept.
REWORDED = Task(
    id="copy",
    question='Generate a new feature named "FamilySize" by adding the "SibSp" and "Parch" columns. Then, compute '
    'the Pearson correlation coefficient (r) between the "FamilySize" and "Fare" columns.',
    constraints="Create a new column 'FamilySize' that is the sum of 'SibSp' and 'Parch' for every row.\n"
    "Compute the Pearson correlation coefficient between 'FamilySize' and 'Fare'\n"
    "Do not perform any other data cleaning or preprocessing steps before calculating the correlation.",
)
SYNTHESIZED = [
    Task(
        id="outliers",
        question="How many values of fatalities 85 99 lie more than 3 standard deviations from their mean?",
        constraints="Use the sample standard deviation (ddof=1) and leave out missing values.",
    ),
    Task(
        id="ranking",
        question="Which three airlines had the most incidents between 2000 and 2014, most first?",
        constraints="Rank by the incidents 00 14 column; ties keep the order of the file.",
    ),
]


@pytest.fixture(scope="module")
def dabench(dabench_tables) -> list[Task]:
    return load_dabench(dabench_tables.parent)


@pytest.fixture(scope="module")
def questions(dabench) -> Decontaminator:
    return Decontaminator([(f"dabench:{task.id}", question_text(task)) for task in dabench])


@pytest.fixture(scope="module")
def titanic(dabench) -> Task:
    return next(task for task in dabench if task.id == "0")


def test_it_is_a_check_with_stable_reasons():
    assert Decontaminator.name == "decontamination"
    assert Decontaminator.reasons == (BENCHMARK_QUESTION, BENCHMARK_TABLE)


def test_a_lightly_reworded_benchmark_question_is_dropped(questions, answered):
    verdict = questions.check(answered(REWORDED, 0, "0.16"))
    assert verdict.reason == BENCHMARK_QUESTION
    assert "dabench:5" in verdict.detail


def test_a_benchmark_question_word_for_word_is_dropped(questions, dabench, answered):
    copied = dabench[-1].model_copy(update={"id": "copied", "files": []})
    assert questions.check(answered(copied, 0, "1")).reason == BENCHMARK_QUESTION


@pytest.mark.parametrize("task", SYNTHESIZED, ids=lambda task: task.id)
def test_an_unrelated_synthesized_question_is_kept(questions, task, answered):
    assert questions.check(answered(task, 0, "1")).kept


def test_a_task_on_a_benchmark_table_is_dropped(titanic, tmp_path, answered):
    copy = shutil.copy(titanic.files[0], tmp_path / "passengers.csv")
    checker = Decontaminator(tables=benchmark_fingerprints([titanic]))
    verdict = checker.check(answered(SYNTHESIZED[0].model_copy(update={"files": [str(copy)]}), 0, "1"))
    assert verdict.reason == BENCHMARK_TABLE
    assert "test_ave.csv" in verdict.detail


def test_a_benchmark_table_in_another_format_and_trimmed_is_dropped(titanic, tmp_path, answered):
    trimmed = pd.read_csv(titanic.files[0]).drop(columns=["AgeBand"]).head(600)
    trimmed.to_excel(tmp_path / "passengers.xlsx", index=False)
    checker = Decontaminator(tables=benchmark_fingerprints([titanic]))
    task = SYNTHESIZED[0].model_copy(update={"files": [str(tmp_path / "passengers.xlsx")]})
    assert checker.check(answered(task, 0, "1")).reason == BENCHMARK_TABLE


def test_a_task_on_another_table_is_kept(titanic, tmp_path, answered):
    pd.DataFrame({"airline": ["A", "B", "C"], "incidents_00_14": [1, 4, 2]}).to_csv(tmp_path / "air.csv", index=False)
    checker = Decontaminator(tables=benchmark_fingerprints([titanic]))
    task = SYNTHESIZED[1].model_copy(update={"files": [str(tmp_path / "air.csv")]})
    assert checker.check(answered(task, 0, "A")).kept


def _mini_benchmarks(root: Path) -> None:
    """A DABench of one question and a TableBench of one row, in the layout of the shared folder."""
    (root / "dabench" / "tables").mkdir(parents=True)
    pd.DataFrame({"city": ["Oslo", "Rome", "Lima"], "rain_mm": [760, 800, 15]}).to_csv(
        root / "dabench" / "tables" / "rain.csv", index=False
    )
    question = {"id": 1, "question": "Which city gets the least rain?", "file_name": "rain.csv", "level": "easy"}
    (root / "dabench" / "questions.jsonl").write_text(json.dumps(question) + "\n")
    (root / "dabench" / "labels.jsonl").write_text(json.dumps({"id": 1, "common_answers": [["city", "Lima"]]}) + "\n")
    row = {
        "id": "tb1",
        "qtype": "NumericalReasoning",
        "qsubtype": "Aggregation",
        "table": {"columns": ["team", "goals"], "data": [["Reds", 41], ["Blues", 37], ["Greens", 12]]},
        "question": "What is the total number of goals scored by all the teams in the league?",
        "answer": "90",
    }
    (root / "tablebench-example" / "inference_results").mkdir(parents=True)
    (root / "tablebench-example" / "inference_results" / "rows.jsonl").write_text(json.dumps(row) + "\n")


def test_from_benchmarks_reads_dabench_and_tablebench(tmp_path, monkeypatch, answered):
    monkeypatch.setenv("DATALYST_CACHE", str(tmp_path / "cache"))
    _mini_benchmarks(tmp_path / "benchmarks")
    checker = Decontaminator.from_benchmarks(tmp_path / "benchmarks")
    asked = Task(id="goals", question="What is the total number of goals scored by all teams in the league?")
    verdict = checker.check(answered(asked, 0, "90"))
    assert (verdict.reason, "tablebench:tb1" in verdict.detail) == (BENCHMARK_QUESTION, True)
    on_table = SYNTHESIZED[0].model_copy(update={"files": [str(tmp_path / "benchmarks/dabench/tables/rain.csv")]})
    assert checker.check(answered(on_table, 0, "1")).reason == BENCHMARK_TABLE
    assert checker.check(answered(SYNTHESIZED[1], 0, "A")).kept


def test_from_benchmarks_skips_what_is_absent(tmp_path, answered):
    checker = Decontaminator.from_benchmarks(tmp_path)
    assert checker.check(answered(REWORDED, 0, "0.16")).kept


def test_it_says_how_much_it_compares_against():
    assert Decontaminator([("a", "How many rows?"), ("b", "What is the mean?")]).size == (2, 0)
