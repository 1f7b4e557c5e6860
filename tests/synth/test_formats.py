"""The same tasks over other file formats: each file rewritten, read back the same, questions and answers kept."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from datalyst.data import FileKind, load, load_table
from datalyst.sandbox import Sandbox
from datalyst.synth import LAYOUTS, convert_tasks, sheets_of
from datalyst.tasks import Task, read_tasks


@pytest.fixture
def table(tmp_path):
    frame = pd.DataFrame(
        {
            "city": ["Oslo", "Lima", None],
            "rate": [0.1234567890123, 2.5, None],
            "n": [3, 4, 5],
            "day": ["2020-01-02"] * 3,
        }
    )
    path = tmp_path / "source" / "cities.csv"
    path.parent.mkdir()
    frame.to_csv(path, index=False)
    return path


@pytest.mark.parametrize("kind", [k.value for k in FileKind if k is not FileKind.CSV] + ["json-nested"])
def test_every_format_reads_back_as_the_table_it_was_written_from(tmp_path, table, kind):
    task = Task(id="7", question="Mean rate?", files=[str(table)], answer={"mean": "1.31"}, judge="dabench")
    (converted,) = convert_tasks([task], tmp_path / "out", [kind])
    (path,) = converted.files
    suffix = kind.removesuffix("-nested")
    assert path.endswith(f"/{kind}/cities.{suffix}") and converted.model_copy(update={"files": task.files}) == task
    pd.testing.assert_frame_equal(load_table(path), load_table(table), check_dtype=False)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_converted_solution_loads_its_new_file_with_pandas_and_prints_the_same_answer(tmp_path, table, layout):
    solution = (
        "import pandas as pd\n\ndf = pd.read_csv('cities.csv')\n"
        "rates = df['rate'].dropna()\n"
        "print(f\"@mean[{rates.mean():.4f}] @rows[{len(df)}] @named[{df['city'].notna().sum()}]\")\n"
    )
    task = Task(id="7", question="Mean rate?", files=[str(table)], solution=solution)
    (converted,) = convert_tasks([task], tmp_path / "out", [layout])
    assert converted.solution.endswith(solution.partition("\n\ndf = pd.read_csv('cities.csv')\n")[2])
    assert "read_csv('cities.csv')" not in converted.solution or layout == "csv"
    with Sandbox(files=converted.files) as box:
        result = box.run_python(converted.solution)
    assert result.ok, result.render()
    assert result.stdout.strip() == "@mean[1.3117] @rows[3] @named[2]"


def test_nested_json_holds_the_records_under_the_tables_name(tmp_path, table):
    task = Task(id="7", question="?", files=[str(table)])
    (path,) = convert_tasks([task], tmp_path / "out", ["json-nested"])[0].files
    nested = json.loads(Path(path).read_text())
    first = {"city": "Oslo", "rate": 0.1234567890123, "n": 3, "day": "2020-01-02"}
    assert list(nested) == ["cities"] and nested["cities"][0] == first


def test_sheets_read_in_order_give_the_table_back(tmp_path):
    grouped = pd.DataFrame({"n": range(6), "region": ["East"] * 2 + ["West/North"] * 3 + ["South"]})
    mixed = grouped.assign(region=["East", "West", "East", "West", "East", "West"])  # no runs: halves
    for frame, names in ((grouped, ["East", "West_North", "South"]), (mixed, ["part 1", "part 2"])):
        source = tmp_path / "sales.csv"
        frame.to_csv(source, index=False)
        out = tmp_path / f"out-{names[0]}"
        (path,) = convert_tasks([Task(id="1", question="?", files=[str(source)])], out, ["xlsx-sheets"])[0].files
        sheets = load(path)
        assert list(sheets) == names
        pd.testing.assert_frame_equal(pd.concat(sheets.values(), ignore_index=True), frame, check_dtype=False)
    assert list(sheets_of(grouped.head(1))) == ["data"]


def test_formats_go_round_robin_and_a_shared_file_is_written_once(tmp_path, table, examples_dir):
    tasks = [Task(id=str(i), question="?", files=[str(table)]) for i in range(4)]
    tasks.append(Task(id="db", question="?", files=[str(examples_dir / "shop.sqlite")]))
    converted = convert_tasks(tasks, tmp_path / "out")
    assert [t.files[0].rsplit(".", 1)[1] for t in converted] == ["json", "tsv", "xlsx", "json", "sqlite"]
    assert converted[0].files == converted[3].files and converted[4].files == tasks[4].files  # several tables: kept


def test_a_table_a_workbook_would_cut_keeps_its_file(tmp_path):
    long = tmp_path / "notes.csv"
    pd.DataFrame({"note": ["x" * 40_000, "short"]}).to_csv(long, index=False)
    task = Task(id="1", question="?", files=[str(long)])
    assert convert_tasks([task], tmp_path / "out", ["xlsx"])[0].files == [str(long)]
    (as_json,) = convert_tasks([task], tmp_path / "out", ["json"])[0].files
    assert load_table(as_json)["note"].str.len().tolist() == [40_000, 5]


def test_a_sheet_whose_text_column_is_all_missing_is_written(tmp_path):
    source = tmp_path / "people.csv"
    pd.DataFrame({"n": [1, 2, 3, 4], "note": ["x", "y", None, None]}).to_csv(source, index=False)  # halves
    task = Task(id="1", question="?", files=[str(source)])
    (path,) = convert_tasks([task], tmp_path / "out", ["xlsx-sheets"])[0].files
    assert path.endswith(".xlsx") and [len(sheet) for sheet in load(path).values()] == [2, 2]


def test_two_files_of_one_name_keep_it_in_folders_apart(tmp_path, table):
    other = tmp_path / "elsewhere" / "cities.csv"
    other.parent.mkdir()
    other.write_text("a,b\n1,2\n")
    tasks = [Task(id=str(i), question="?", files=[str(path)]) for i, path in enumerate((table, other, table))]
    first, second, again = (Path(t.files[0]) for t in convert_tasks(tasks, tmp_path / "out", ["json"]))
    assert first.name == second.name == "cities.json" and first != second and again == first
    assert list(load_table(second)) == ["a", "b"] and list(load_table(first)) == list(load_table(table))


def test_the_command_writes_tasks_that_read_back(datalyst, tmp_path, table):
    source = tmp_path / "tasks.jsonl"
    source.write_text(Task(id="1", question="?", files=[str(table)]).model_dump_json() + "\n")
    done = datalyst("synth", "convert", str(source), "--out", str(tmp_path / "json.jsonl"), "--kinds", "json")
    assert done.returncode == 0, done.stderr
    (task,) = read_tasks(tmp_path / "json.jsonl")
    assert task.files[0].endswith("json.files/json/cities.json") and "{'json': 1}" in done.stderr
    refused = datalyst("synth", "convert", str(source), "--out", str(tmp_path / "x.jsonl"), "--kinds", "pdf")
    assert refused.returncode == 2 and "choose among" in refused.stderr
