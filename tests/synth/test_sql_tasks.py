"""``synth sql``: gold queries on single tables and on split databases give what pandas computes."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from datalyst.judge import execution_match, gold_rows
from datalyst.synth import FileOptions, SqlOptions, collect_files, make_sql_tasks, read_source_files
from datalyst.synth._roles import roles
from datalyst.synth._sql import SQL_TEMPLATES, Schema, _split
from datalyst.tasks import read_tasks


def shops(rows: int = 50) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    return pd.DataFrame(
        {
            "shop": [f"shop {i}" for i in range(rows)],
            "city": rng.choice(["Oslo", "Bergen", "Tromso"], rows),
            "format": rng.choice(["kiosk", "store"], rows),
            "revenue": rng.uniform(10, 500, rows).round(1),
            "staff": rng.integers(1, 40, rows),
        }
    )


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    with sqlite3.connect(folder / "shops.sqlite") as connection:
        shops().to_sql("shops", connection, index=False)
    out = folder / "files.jsonl"
    collect_files([folder], out, options=FileOptions(convert_share=0), progress=False)
    return read_source_files(out)[0]


def truth(template: str, df: pd.DataFrame, p: dict) -> set[tuple]:
    """The rows the question asks for, computed with pandas."""
    if template == "sql.count_above":
        return {(int((df[p["number"]] > p["threshold"]).sum()),)}
    if template == "sql.group_average":
        return set(df.groupby(p["category"])[p["number"]].mean().items())
    if template == "sql.filtered_count":
        chosen = (df[p["category"]] == p["value"]) & (df[p["number"]] > p["threshold"])
        return {(int(chosen.sum()),)}
    if template == "sql.top_labels":
        return {(label,) for label in df.nlargest(p["k"], p["number"])[p["label"]]}
    if template == "sql.largest_group":
        return {(df.groupby(p["category"])[p["number"]].sum().idxmax(),)}
    raise AssertionError(f"no pandas computation for {template}; add one")


def rounded(rows) -> set[tuple]:
    return {tuple(round(value, 9) if isinstance(value, float) else value for value in row) for row in rows}


@pytest.mark.parametrize("split", [False, True])
def test_every_template_matches_pandas_on_one_table_and_on_a_split_database(record, tmp_path, split):
    columns = roles(record)
    schema = _split(record, columns, tmp_path) if split else Schema(Path(record.path), record.table, columns, {})
    df = shops()
    for make in SQL_TEMPLATES:
        for seed in range(3):
            draft = make(schema, random.Random(seed))
            assert draft is not None, make.__name__
            rows = gold_rows(schema.path, draft.sql)
            assert rounded(rows) == rounded(truth(draft.template, df, draft.params)), draft.sql
            assert (" JOIN " in draft.sql) == (split and "category" in draft.params)


def test_a_split_database_declares_its_keys(record, tmp_path):
    schema = _split(record, roles(record), tmp_path)
    with sqlite3.connect(schema.path) as connection:
        tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        keys = connection.execute(f'PRAGMA foreign_key_list("{schema.table}")').fetchall()
        city = connection.execute("SELECT name FROM city ORDER BY id").fetchall()
    assert tables == {"shops", "city", "format"} and len(keys) == 2
    assert city == [("Bergen",), ("Oslo",), ("Tromso",)]


def test_sql_tasks_are_judged_by_execution(record, tmp_path):
    files = tmp_path / "files.jsonl"
    files.write_text(record.model_dump_json() + "\n")
    out = tmp_path / "sql.jsonl"
    summary = make_sql_tasks(files, out, options=SqlOptions(split_share=1.0), progress=False)
    tasks = read_tasks(out)
    assert summary.tasks == len(tasks) >= 8 and summary.by_level.keys() >= {"easy", "medium", "hard"}
    assert {task.judge for task in tasks} == {"sql"} and any("JOIN" in task.answer_sql for task in tasks)
    for task in tasks:
        assert execution_match(task.files[0], task.answer_sql, task.answer_sql).correct
        assert [list(row) for row in gold_rows(task.files[0], task.answer_sql)] == task.answer
