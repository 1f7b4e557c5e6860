"""TableBench as tasks: inline tables written out as CSV files, and the visualization filter."""

from __future__ import annotations

import csv
import hashlib
import json
import logging
from pathlib import Path

import pandas as pd
import pytest

from datalyst.errors import DataFileError
from datalyst.paths import benchmarks_dir
from datalyst.tasks import TABLEBENCH_FORMAT, Task, load_tablebench

TRICKY = {
    "columns": ["name", "note, with comma", 'say "hi"', "n"],
    "data": [
        ["Smith, John", 'He said "yes"', "line one\nline two", "1,510"],
        ["", None, "  padded  ", 7],
        ["ünïcode \u2013 dash", "'single'", ",", "-3.24"],
    ],
}

EXAMPLE_RUN = "o3-mini-2025-01-31=TableBench_DP=Example.jsonl"


def _record(rid: str, **extra) -> dict:
    record = {
        "id": rid,
        "qtype": "NumericalReasoning",
        "qsubtype": "Counting",
        "table": {"columns": ["a", "b"], "data": [["1", "2"], ["3", "4"]]},
        "question": f"question {rid}?",
        "answer": "2",
    }
    return {**record, **extra}


def _write(path, records):
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


@pytest.fixture
def bench(tmp_path):
    return _write(
        tmp_path / "tablebench.jsonl",
        [
            _record("q1", table=TRICKY, answer="Smith, John"),
            _record("q2", qtype="DataAnalysis", qsubtype="CausalAnalysis", answer="Yes, it does."),
            _record("v1", qtype="Visualization", qsubtype="ChartGeneration", answer="y_references = [[1, 3]]"),
        ],
    )


def test_tasks_carry_the_question_answer_and_kind(bench, tmp_path):
    tasks = load_tablebench(bench, tables_dir=tmp_path / "tables")
    assert [task.id for task in tasks] == ["q1", "q2"]
    first, second = tasks
    assert isinstance(first, Task)
    assert first.question == "question q1?" and first.answer == "Smith, John"
    assert (first.judge, first.source, first.format) == ("tablebench", "tablebench", TABLEBENCH_FORMAT)
    assert (first.category, first.subcategory) == ("NumericalReasoning", "Counting")
    assert (second.category, second.subcategory) == ("DataAnalysis", "CausalAnalysis")
    assert first.files == [str(tmp_path / "tables" / "q1.csv")]


def test_csv_round_trips_columns_and_cells(bench, tmp_path):
    table = load_tablebench(bench, tables_dir=tmp_path / "tables")[0].files[0]
    with open(table, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    expected = [TRICKY["columns"], *[["" if cell is None else str(cell) for cell in row] for row in TRICKY["data"]]]
    assert rows == expected
    frame = pd.read_csv(table, dtype=str, keep_default_na=False)
    assert list(frame.columns) == TRICKY["columns"]
    assert frame.values.tolist() == expected[1:]


def test_loading_twice_leaves_identical_tables_alone(bench, tmp_path):
    tables = tmp_path / "tables"
    load_tablebench(bench, tables_dir=tables)
    before = {path.name: path.stat().st_mtime_ns for path in tables.iterdir()}
    again = load_tablebench(bench, tables_dir=tables)
    assert {path.name: path.stat().st_mtime_ns for path in tables.iterdir()} == before
    assert sorted(before) == ["q1.csv", "q2.csv"]  # no temporary files left behind
    (tables / "q2.csv").write_text("stale\n")
    load_tablebench(bench, tables_dir=tables)
    assert (tables / "q2.csv").read_text() == "a,b\n1,2\n3,4\n"
    assert again == load_tablebench(bench, tables_dir=tables)


def test_default_tables_folder_is_named_after_the_file_content(bench, tmp_path, monkeypatch):
    monkeypatch.setenv("DATALYST_CACHE", str(tmp_path / "cache"))
    digest = hashlib.sha256(bench.read_bytes()).hexdigest()[:16]
    task = load_tablebench(bench)[0]
    assert task.files == [str(tmp_path / "cache" / "tablebench" / digest / "q1.csv")]
    _write(bench, [_record("q1", answer="3")])
    assert load_tablebench(bench)[0].files[0] != task.files[0]


def test_visualization_rows_are_kept_on_request(bench, tmp_path):
    tasks = load_tablebench(bench, tables_dir=tmp_path / "tables", include_visualization=True)
    assert [task.id for task in tasks] == ["q1", "q2", "v1"]
    assert tasks[2].answer == "y_references = [[1, 3]]" and tasks[2].category == "Visualization"


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ([_record("q1", table={"columns": ["a"]})], "no table"),
        ([_record("q1", table=[["a"], ["1"]])], "no table"),
        ([_record("q1", table={"columns": ["a", "b"], "data": [["1"]]})], "table row 1 does not have 2 cells"),
        ([_record("q1", table={"columns": ["a"], "data": ["1"]})], "table row 1"),
        ([_record("../escape")], "cannot name a file"),
        ([_record(".hidden")], "cannot name a file"),
        ([_record("q1", question=None)], "'question'"),
        ([_record("q1", qsubtype=3)], "'qsubtype'"),
        ([_record("q1", answer=None)], "no 'answer'"),
    ],
)
def test_bad_rows_raise(tmp_path, records, message):
    path = _write(tmp_path / "bad.jsonl", records)
    with pytest.raises(DataFileError, match=message):
        load_tablebench(path, tables_dir=tmp_path / "tables")


def test_a_repeated_id_keeps_both_rows_under_stable_ids_and_says_so_once(tmp_path, caplog):
    records = [
        _record("q1"),
        _record("q1", qsubtype="Aggregation", answer="6"),
        _record("q1-2"),  # the id a renamed row would take is already used
        _record("q1", qsubtype="Ranking", answer="b"),
    ]
    path = _write(tmp_path / "repeats.jsonl", records)
    with caplog.at_level(logging.WARNING, logger="datalyst.tasks"):
        tasks = load_tablebench(path, tables_dir=tmp_path / "tables")
    assert [(t.id, t.subcategory, t.answer) for t in tasks] == [
        ("q1", "Counting", "2"),
        ("q1-3", "Aggregation", "6"),
        ("q1-2", "Counting", "2"),
        ("q1-4", "Ranking", "b"),
    ]
    assert len({Path(t.files[0]).name for t in tasks}) == 4
    [warning] = caplog.records
    assert "q1 (2 more rows: q1-3, q1-4)" in warning.getMessage() and str(path) in warning.getMessage()
    assert [t.id for t in load_tablebench(path, tables_dir=tmp_path / "tables")] == [t.id for t in tasks]


def test_unreadable_files_raise(tmp_path):
    with pytest.raises(DataFileError, match="cannot read"):
        load_tablebench(tmp_path / "absent.jsonl", tables_dir=tmp_path / "tables")
    path = tmp_path / "broken.jsonl"
    path.write_text("{not json}\n")
    with pytest.raises(DataFileError, match="line 1 is not JSON"):
        load_tablebench(path, tables_dir=tmp_path / "tables")


def test_the_shipped_example(tmp_path):
    path = benchmarks_dir() / "tablebench-example" / "inference_results" / EXAMPLE_RUN
    if not path.is_file():
        pytest.skip(f"TableBench example not found at {path.parent.parent}; set DATALYST_BENCHMARKS")
    tasks = load_tablebench(path, tables_dir=tmp_path)
    assert len(tasks) == 51  # 54 rows less the 3 chart questions
    assert all(task.category != "Visualization" for task in tasks)
    first = tasks[0]
    assert (first.id, first.answer, first.subcategory) == ("4ee382645d542fe6e3f05e71925c5cb8", "1062", "Aggregation")
    frame = pd.read_csv(first.files[0], dtype=str, keep_default_na=False)
    assert frame.columns[0] == "-" and frame.iloc[1]["Participants"] == "1,510" and len(frame) == 8
