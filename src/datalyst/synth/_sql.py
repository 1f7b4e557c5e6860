"""``synth sql``: questions answered by one SQLite query, judged by execution accuracy.

Two kinds of database are asked about. A collected SQLite table gets single-table questions (counting,
grouping, ranking, filtering). Every table with a category column can also be *split* into a small
database with keys: each of up to two category columns becomes a table of its own (``id``, ``name``)
that the main table refers to by ``<column>_id``, so answering by value of that category needs a join.
Gold queries run read-only (``judge.gold_rows``, the rules answers run under); a question is kept
when its result is not empty, not zero, not larger than ``MAX_RESULT_ROWS`` rows, and, for a top-k
question, not cut through a tie.
"""

from __future__ import annotations

import hashlib
import random
import re
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from datalyst.data import DataFileError, FileKind, load_table
from datalyst.judge import gold_rows
from datalyst.synth._files import SourceFile, read_source_files
from datalyst.synth._roles import Column, Roles, roles
from datalyst.synth._stage import Made, TaskSummary, run_units
from datalyst.synth._templates import threshold_near_mean
from datalyst.tasks import SQL_ANSWER_FORMAT, Lineage, Task

GENERATOR_VERSION = 1
SOURCE = "synth:sql"
MAX_RESULT_ROWS = 20
CHECKS = ("empty_result", "zero_result", "too_many_rows", "tie_at_cut", "query_failed")


class SqlOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    seed: int = 0
    """Seed of the templates' choices and of which tables are split."""
    drafts_per_template: int = Field(2, ge=1)
    """Drafts each template makes per database."""
    split_share: float = Field(0.5, ge=0, le=1)
    """Share of the tables with a category column also split into a database with keys (chosen by seed)."""


@dataclass(frozen=True)
class Schema:
    """The database a question is asked of: its main table, and the category tables split out of it."""

    path: Path
    table: str
    roles: Roles
    splits: dict[str, str]
    """Category column -> the table its values moved to (empty for a single table)."""

    def category(self, column: Column) -> tuple[str, str]:
        """How a query names a category's value (an expression), and the joins it needs."""
        if column.name not in self.splits:
            return f"t.{_quote(column.name)}", ""
        other = _quote(self.splits[column.name])
        key = _quote(f"{column.name}_id")
        return f"{other}.name", f" JOIN {other} ON {other}.id = t.{key}"


@dataclass(frozen=True)
class SqlDraft:
    template: str
    category: str
    level: str
    question: str
    select: str
    body: str
    """``FROM ...`` up to and with ``GROUP BY``."""
    order: str | None = None
    """For a top-k query: what it orders by (descending)."""
    cut: int | None = None
    """For a top-k query: k; its k-th and (k+1)-th rows must not tie on ``order``."""
    params: dict[str, object] = field(default_factory=dict, compare=False)
    """The template's choices (for tests)."""

    @property
    def sql(self) -> str:
        ranked = f" ORDER BY {self.order} DESC LIMIT {self.cut}" if self.order else ""
        return f"SELECT {self.select} {self.body}{ranked}"


def _count_above(schema: Schema, rng: random.Random) -> SqlDraft | None:
    numbers = [c for c in schema.roles.numbers if threshold_near_mean(c) is not None]
    if not numbers:
        return None
    number = rng.choice(numbers)
    threshold = threshold_near_mean(number)
    body = f"FROM {_quote(schema.table)} AS t WHERE t.{_quote(number.name)} > {threshold}"
    question = f"How many rows have {number.words} greater than {threshold}?"
    params = {"number": number.name, "threshold": threshold}
    return SqlDraft("sql.count_above", "Counting", "easy", question, "COUNT(*)", body, params=params)


def _group_average(schema: Schema, rng: random.Random) -> SqlDraft | None:
    if not schema.roles.numbers or not schema.roles.categories:
        return None
    number, category = rng.choice(schema.roles.numbers), rng.choice(schema.roles.categories)
    name, join = schema.category(category)
    body = f"FROM {_quote(schema.table)} AS t{join} GROUP BY {name}"
    question = (
        f"For each {category.words}, what is the average {number.words}? Give both, one row per {category.words}."
    )
    select = f"{name}, AVG(t.{_quote(number.name)})"
    params = {"number": number.name, "category": category.name}
    level = "medium" if join else "easy"
    return SqlDraft("sql.group_average", "Aggregation", level, question, select, body, params=params)


def _filtered_count(schema: Schema, rng: random.Random) -> SqlDraft | None:
    numbers = [c for c in schema.roles.numbers if threshold_near_mean(c) is not None]
    categories = [c for c in schema.roles.categories if c.values]
    if not numbers or not categories:
        return None
    number, category = rng.choice(numbers), rng.choice(categories)
    value, threshold = rng.choice(category.values[:4]), threshold_near_mean(number)
    name, join = schema.category(category)
    body = (
        f"FROM {_quote(schema.table)} AS t{join} "
        f"WHERE {name} = {_literal(value)} AND t.{_quote(number.name)} > {threshold}"
    )
    question = f"How many rows with {category.words} {value} have {number.words} above {threshold}?"
    params = {"number": number.name, "category": category.name, "value": value, "threshold": threshold}
    level = "medium" if join else "easy"
    return SqlDraft("sql.filtered_count", "Counting", level, question, "COUNT(*)", body, params=params)


def _top_labels(schema: Schema, rng: random.Random) -> SqlDraft | None:
    if not schema.roles.numbers or not schema.roles.labels:
        return None
    number, label = rng.choice(schema.roles.numbers), rng.choice(schema.roles.labels)
    k = rng.choice([3, 5])
    body = f"FROM {_quote(schema.table)} AS t WHERE t.{_quote(number.name)} IS NOT NULL"
    question = f"Which {k} {label.words} values have the largest {number.words}?"
    order = f"t.{_quote(number.name)}"
    params = {"number": number.name, "label": label.name, "k": k}
    return SqlDraft("sql.top_labels", "Ranking", "easy", question, f"t.{_quote(label.name)}", body, order, k, params)


def _largest_group(schema: Schema, rng: random.Random) -> SqlDraft | None:
    if not schema.roles.numbers or not schema.roles.categories:
        return None
    number, category = rng.choice(schema.roles.numbers), rng.choice(schema.roles.categories)
    name, join = schema.category(category)
    body = f"FROM {_quote(schema.table)} AS t{join} GROUP BY {name}"
    question = f"Which {category.words} has the largest total {number.words}?"
    order = f"SUM(t.{_quote(number.name)})"
    params = {"number": number.name, "category": category.name}
    level = "hard" if join else "medium"
    return SqlDraft("sql.largest_group", "Ranking", level, question, name, body, order, 1, params)


SQL_TEMPLATES = (_count_above, _group_average, _filtered_count, _top_labels, _largest_group)


def make_sql_tasks(
    files: str | Path,
    out: str | Path,
    *,
    options: SqlOptions | None = None,
    split_dir: str | Path | None = None,
    progress: bool = True,
) -> TaskSummary:
    """Append to ``out`` the SQL tasks of every table in ``files`` not done yet; split databases go to
    ``split_dir`` (``<out>.databases/``)."""
    options = options or SqlOptions()
    out = Path(out)
    folder = (Path(split_dir) if split_dir is not None else out.with_name(out.name + ".databases")).resolve()
    settings = {"stage": "sql", "files": str(Path(files).resolve()), "options": options.model_dump(),
                "version": GENERATOR_VERSION}  # fmt: skip
    tasks = partial(_table_tasks, options=options, folder=folder)
    return run_units(read_source_files(files), out, tasks, checks=CHECKS, settings=settings, progress=progress)


def _table_tasks(record: SourceFile, *, options: SqlOptions, folder: Path) -> Made:
    columns = roles(record)
    schemas = []
    if record.kind is FileKind.SQLITE:
        schemas.append(Schema(Path(record.path), record.table, columns, {}))
    if columns.categories and _draw(options.seed, record.id, "split") < options.split_share:
        schemas.append(_split(record, columns, folder))
    tasks: list[Task] = []
    rejected: Counter[str] = Counter()
    seen: set[str] = set()
    for schema in schemas:
        for make in SQL_TEMPLATES:
            for attempt in range(options.drafts_per_template):
                rng = random.Random(f"{options.seed}:{record.id}:{schema.path.name}:{make.__name__}:{attempt}")
                draft = make(schema, rng)
                if draft is None or draft.sql in seen:
                    continue
                seen.add(draft.sql)
                rows, reason = _run(schema.path, draft)
                if reason is not None:
                    rejected[reason] += 1
                    continue
                tasks.append(_task(record, schema, draft, rows, options.seed))
    return tasks, rejected


def _run(database: Path, draft: SqlDraft) -> tuple[list[tuple], str | None]:
    """The gold query's rows, or why the question is not kept."""
    try:
        rows = gold_rows(database, draft.sql)
        if draft.order and draft.cut:
            scores = gold_rows(database, f"SELECT {draft.order} {draft.body} ORDER BY 1 DESC LIMIT {draft.cut + 1}")
            if len(scores) > draft.cut and scores[draft.cut - 1] == scores[draft.cut]:
                return rows, "tie_at_cut"
    except DataFileError:
        return [], "query_failed"
    if not rows:
        return rows, "empty_result"
    if len(rows) > MAX_RESULT_ROWS:
        return rows, "too_many_rows"
    if len(rows) == 1 and len(rows[0]) == 1 and rows[0][0] in (0, None):
        return rows, "zero_result"
    return rows, None


def _task(record: SourceFile, schema: Schema, draft: SqlDraft, rows: list[tuple], seed: int) -> Task:
    digest = hashlib.sha256(f"{schema.path.name}\n{draft.sql}".encode()).hexdigest()[:8]
    return Task(
        id=f"{record.id[:8]}-sql-{digest}",
        question=draft.question,
        format=SQL_ANSWER_FORMAT,
        files=[str(schema.path)],
        answer=[list(row) for row in rows],
        answer_sql=draft.sql,
        judge="sql",
        category=draft.category,
        level=draft.level,
        source=SOURCE,
        lineage=Lineage(
            generator=draft.template, version=GENERATOR_VERSION, seed=seed, source_hash=record.content_hash
        ),
    )


def _split(record: SourceFile, columns: Roles, folder: Path) -> Schema:
    """The record's table as a database whose (up to two) category columns are tables of their own."""
    name = _identifier(record.table, "data")
    split = {column.name: _identifier(column.name, "category") for column in columns.categories[:2]}
    split = {column: table if table != name else f"{table}_values" for column, table in split.items()}
    target = folder / f"{name}-{record.id[:8]}-db.sqlite"
    if not target.exists():
        folder.mkdir(parents=True, exist_ok=True)
        partial_path = target.with_name(f".{target.name}.partial")
        partial_path.unlink(missing_ok=True)
        _write_split(load_table(record.path, record.table), name, split, partial_path)
        partial_path.replace(target)
    return Schema(target, name, columns, split)


def _write_split(frame: pd.DataFrame, name: str, split: dict[str, str], path: Path) -> None:
    connection = sqlite3.connect(path)
    try:
        keys = []
        for column, table in split.items():
            values = sorted(frame[column].dropna().astype(str).unique())
            ids = {value: index for index, value in enumerate(values, start=1)}
            connection.execute(f"CREATE TABLE {_quote(table)} (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
            connection.executemany(f"INSERT INTO {_quote(table)} VALUES (?, ?)", [(i, v) for v, i in ids.items()])
            frame = frame.assign(**{f"{column}_id": frame[column].astype(str).map(ids)}).drop(columns=[column])
            keys.append(f"FOREIGN KEY ({_quote(f'{column}_id')}) REFERENCES {_quote(table)}(id)")
        definitions = [f"{_quote(column)} {_sql_type(frame[column])}" for column in frame.columns]
        connection.execute(f"CREATE TABLE {_quote(name)} (row_id INTEGER PRIMARY KEY, {', '.join(definitions + keys)})")
        rows = [
            (index, *(None if pd.isna(value) else value for value in row))
            for index, row in enumerate(frame.astype(object).itertuples(index=False, name=None), start=1)
        ]
        placeholders = ", ".join("?" for _ in range(len(frame.columns) + 1))
        connection.executemany(f"INSERT INTO {_quote(name)} VALUES ({placeholders})", rows)
        connection.commit()
    finally:
        connection.close()


def _sql_type(series: pd.Series) -> str:
    if pd.api.types.is_integer_dtype(series):
        return "INTEGER"
    if pd.api.types.is_numeric_dtype(series):
        return "REAL"
    return "TEXT"


def _identifier(text: str, fallback: str) -> str:
    return re.sub(r"\W+", "_", text).strip("_").lower() or fallback


def _draw(seed: int, table: str, purpose: str) -> float:
    return int(hashlib.sha256(f"{seed}:{table}:{purpose}".encode()).hexdigest()[:12], 16) / 16**12


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"
