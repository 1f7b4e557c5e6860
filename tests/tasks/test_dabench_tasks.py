"""DABench as tasks, task JSONL files and seeded stratified subsets."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from datalyst.errors import ConfigError, DataFileError
from datalyst.paths import dabench_dir
from datalyst.tasks import Task, load_dabench, read_tasks, split_tasks, stratified_subset, write_tasks


@pytest.fixture(scope="module")
def dabench(dabench_tables) -> list[Task]:
    return load_dabench()


def test_every_question_becomes_a_task_with_its_label_and_table(dabench):
    assert len(dabench) == 257
    first = dabench[0]
    assert first.id == "0" and first.judge == "dabench" and first.source == "dabench"
    assert first.answer == {"mean_fare": "34.65"}
    assert first.files[0].endswith("tables/test_ave.csv")
    assert first.format.startswith("@mean_fare[") and first.level == "easy"
    assert first.concepts == ["Summary Statistics"] and first.category == "Summary Statistics"


def test_a_label_with_a_repeated_name_keeps_the_later_value(dabench):
    labels = [json.loads(line) for line in (dabench_dir() / "labels.jsonl").read_text().splitlines()]
    repeated = next(r for r in labels if len({n for n, _ in r["common_answers"]}) < len(r["common_answers"]))
    task = next(t for t in dabench if t.id == str(repeated["id"]))
    name = Counter(n for n, _ in repeated["common_answers"]).most_common(1)[0][0]
    assert task.answer[name] == [v for n, v in repeated["common_answers"] if n == name][-1]


def test_a_missing_table_is_one_clear_error(tmp_path):
    (tmp_path / "tables").mkdir()
    (tmp_path / "questions.jsonl").write_text(json.dumps({"id": 1, "question": "?", "file_name": "gone.csv"}) + "\n")
    (tmp_path / "labels.jsonl").write_text(json.dumps({"id": 1, "common_answers": [["x", "1"]]}) + "\n")
    with pytest.raises(DataFileError, match=r"gone\.csv"):
        load_dabench(tmp_path)


def test_subsets_are_seeded_stratified_and_in_original_order(dabench):
    subset = stratified_subset(dabench, 60, seed=0)
    assert len(subset) == 60
    assert Counter(t.level for t in subset) == {"hard": 21, "medium": 20, "easy": 19}  # 88/87/82 of 257
    assert [t.id for t in subset] == [t.id for t in stratified_subset(dabench, 60, seed=0)]
    assert [t.id for t in subset] != [t.id for t in stratified_subset(dabench, 60, seed=1)]
    order = [t.id for t in dabench]
    assert [order.index(t.id) for t in subset] == sorted(order.index(t.id) for t in subset)
    assert stratified_subset(dabench, 500) == dabench


def test_the_dev_split_is_the_seed_0_subset_and_the_test_split_the_rest(dabench):
    dev, test = split_tasks(dabench, "dabench", "dev"), split_tasks(dabench, "dabench", "test")
    assert [t.id for t in dev] == [t.id for t in stratified_subset(dabench, 60, seed=0)]
    assert len(test) == 197 and not {t.id for t in dev} & {t.id for t in test}
    order = [t.id for t in dabench]
    assert sorted([*dev, *test], key=lambda t: order.index(t.id)) == dabench


def test_a_benchmark_without_a_split_is_refused():
    with pytest.raises(ConfigError, match="tablebench has no dev/test split; splits exist for dabench"):
        split_tasks([Task(id="1", question="?")], "tablebench", "test")


def test_strata_shares_follow_largest_remainders():
    tasks = [Task(id=str(i), question="?", category="a" if i < 5 else "b" if i < 8 else "c") for i in range(10)]
    picked = stratified_subset(tasks, 5, seed=3, by="category")
    assert Counter(t.category for t in picked) == {"a": 3, "b": 1, "c": 1}  # quotas 2.5, 1.5, 1.0


def test_task_files_round_trip_with_paths_relative_to_the_file(tmp_path):
    tasks = [
        Task(id="a", question="Total?", files=["data/sales.csv"], answer=12.5, judge="rule", level="easy"),
        Task(id="b", question="Names?", answer={"x": "1"}, judge="dabench", concepts=["c"]),
    ]
    path = tmp_path / "set" / "tasks.jsonl"
    write_tasks(tasks, path)
    again = read_tasks(path)
    assert again[0].files == [str(path.parent / "data/sales.csv")]
    assert again[0].answer == 12.5 and again[1].answer == {"x": "1"} and again[1].concepts == ["c"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": 1, "question": "?", "judge": "magic"}', "judge"),
        ('{"id": 1}', "question"),
        ('{"id": 1, "question": "?", "colour": "red"}', "colour"),
        ("not json", "not JSON"),
    ],
)
def test_a_bad_task_line_names_the_record_and_field(tmp_path, line, message):
    path = tmp_path / "tasks.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(DataFileError, match=message):
        read_tasks(path)


def test_repeated_task_ids_are_refused(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"id": 1, "question": "?"}\n{"id": "1", "question": "again"}\n')
    with pytest.raises(DataFileError, match="repeats task ids"):
        read_tasks(path)
