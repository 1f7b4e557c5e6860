"""Judging SQL answers: BIRD execution accuracy, and result tables compared column by column.

Execution accuracy (``execution_match``), as BIRD defines it:

* the predicted and the gold query both run on the task's SQLite file;
* the answer is right when the two results hold the same *set* of rows: row order and
  repeated rows do not matter, column order and column count do, column names do not;
* values are compared exactly as SQLite hands them back (``1 == 1.0``, ``NULL == NULL``,
  no float tolerance).

The predicted query is written by a model and runs on the host, so it is treated as
hostile: the file is opened read-only and immutable, an authorizer lets through nothing
but reading (no ATTACH, PRAGMA, writes, schema changes or ``load_extension``), only one
statement is accepted, each query has a wall-clock limit, and the rows fetched and the
size of their values are capped, row by row, so a query cannot fill the host's memory.

Result tables (``csv_match``), for DataMind-style answers where the query's result is saved
as a CSV file. The DataMind paper only says "exact match"; the precise rule used here is:
the row counts must agree and every gold column must equal, once both are sorted, some
predicted column (names and order of columns ignored; numbers within an absolute
tolerance, text exact after stripping spaces).
"""

from __future__ import annotations

import math
import re
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict

from datalyst.errors import DataFileError

MAX_ROWS = 1_000_000
"""Rows fetched from one query before it is given up as too large."""
MAX_VALUE_BYTES = 10_000_000
"""Longest text or blob a query may build (SQLite's length limit)."""
MAX_RESULT_BYTES = 100_000_000
"""Size of all the values one query returns (text and blobs by length, anything else 8 bytes) before it is
given up as too large."""
PROGRESS_STEPS = 1_000
"""SQLite virtual-machine steps between two looks at the clock."""

_READ_ACTIONS = frozenset(
    {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
)
_DENIED_FUNCTIONS = frozenset({"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"})
_ACTION_NAMES = {
    sqlite3.SQLITE_ATTACH: "ATTACH",
    sqlite3.SQLITE_DETACH: "DETACH",
    sqlite3.SQLITE_PRAGMA: "PRAGMA",
    sqlite3.SQLITE_TRANSACTION: "a transaction",
    sqlite3.SQLITE_SAVEPOINT: "a savepoint",
}
_SQL_FENCE = re.compile(r"```[ \t]*(?:sql|sqlite|sqlite3)[ \t]*\n(.*?)```", re.IGNORECASE | re.DOTALL)
_ANY_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)

Table = str | Path | pd.DataFrame


class SqlVerdict(BaseModel):
    """How a predicted query fared against the gold query."""

    model_config = ConfigDict(frozen=True)

    correct: bool
    error: str | None = None
    """Why the predicted query gave no result, on one line starting with ``timeout``,
    ``refused``, ``invalid`` or ``too large``; None when it ran."""
    n_predicted_rows: int | None = None
    """Rows the predicted query returned (repeats included); None when it failed."""
    n_gold_rows: int


class _QueryFailed(Exception):
    """A query gave no result; the message is the one-line reason."""


def extract_sql(answer: str) -> str:
    """The query in an agent's answer: the last ```sql block, else the last ``` block, else the whole text.

    Surrounding spaces and trailing semicolons are dropped; an answer without SQL gives ``""``.
    """
    blocks = _SQL_FENCE.findall(answer) or _ANY_FENCE.findall(answer)
    return (blocks[-1] if blocks else answer).strip().rstrip(";").strip()


def _authorizer(refusals: list[str]) -> Callable[..., int]:
    def authorize(action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None) -> int:
        if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _DENIED_FUNCTIONS:
            refusals.append(f"the function {arg2}()")
        elif action in _READ_ACTIONS:
            return sqlite3.SQLITE_OK
        else:
            refusals.append(_ACTION_NAMES.get(action, "writing to the database or its schema"))
        return sqlite3.SQLITE_DENY

    return authorize


def _connect(database: Path) -> sqlite3.Connection:
    uri = database.resolve().as_uri() + "?mode=ro&immutable=1"
    connection = sqlite3.connect(uri, uri=True, isolation_level=None)
    connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    return connection


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _run(database: Path, sql: str, timeout_s: float) -> list[tuple]:
    """Every row of ``sql`` on ``database``, under the read-only rules; raises _QueryFailed."""
    if not sql.strip():
        raise _QueryFailed("invalid: the query is empty")
    refusals: list[str] = []
    connection = _connect(database)
    try:
        connection.set_authorizer(_authorizer(refusals))
        deadline = time.monotonic() + timeout_s
        connection.set_progress_handler(lambda: time.monotonic() > deadline, PROGRESS_STEPS)
        try:
            cursor = connection.execute(sql)
            if cursor.description is None:
                raise _QueryFailed("invalid: the text holds no query")
            rows: list[tuple] = []
            size = 0
            for row in cursor:
                rows.append(row)
                size += sum(len(value) if isinstance(value, str | bytes) else 8 for value in row)
                if size > MAX_RESULT_BYTES:
                    raise _QueryFailed(f"too large: the query's values came to more than {MAX_RESULT_BYTES:,} bytes")
                if len(rows) > MAX_ROWS:
                    raise _QueryFailed(f"too large: the query returned more than {MAX_ROWS:,} rows")
            return rows
        except sqlite3.ProgrammingError as exc:
            if "one statement" in str(exc):
                raise _QueryFailed("refused: only one SQL statement is accepted") from exc
            raise _QueryFailed(f"invalid: {_one_line(exc)}") from exc
        except sqlite3.Error as exc:
            if refusals:
                raise _QueryFailed(f"refused: {refusals[0]} is not allowed (only reading queries run)") from exc
            if "interrupted" in str(exc):
                raise _QueryFailed(f"timeout: the query ran longer than {timeout_s:g} s") from exc
            raise _QueryFailed(f"invalid: {_one_line(exc)}") from exc
    finally:
        connection.close()


def gold_rows(database: str | Path, sql: str, *, timeout_s: float = 30.0) -> list[tuple]:
    """The rows a reference query returns on ``database``, run under the same read-only rules as answers.

    A missing database or a query that gives no result is a fault of the data: DataFileError.
    """
    database = Path(database)
    if not database.is_file():
        raise DataFileError(f"SQLite database {database} is missing; check the task's files")
    try:
        return _run(database, sql, timeout_s)
    except _QueryFailed as exc:
        raise DataFileError(f"the gold query on {database} gives no result ({exc}); fix the query") from exc


def execution_match(
    database: str | Path,
    predicted_sql: str,
    gold_sql: str,
    *,
    compare: Literal["rows", "columns"] = "rows",
    timeout_s: float = 30.0,
) -> SqlVerdict:
    """Run both queries on ``database`` and compare their results.

    ``compare="rows"`` is BIRD EX: the results must be equal as sets of rows. ``"columns"``
    compares the two result tables as DataMind compares result CSV files (:func:`csv_match`).

    A predicted query that fails, is refused, runs out of time or returns too many rows
    is wrong, with the reason in ``error``. A gold query that does any of these, or a
    missing database, is a fault of the data and raises DataFileError.
    """
    gold = gold_rows(database, gold_sql, timeout_s=timeout_s)
    try:
        predicted = _run(Path(database), predicted_sql, timeout_s)
    except _QueryFailed as exc:
        return SqlVerdict(correct=False, error=str(exc), n_gold_rows=len(gold))
    if compare == "columns":
        correct = csv_match(pd.DataFrame(predicted), pd.DataFrame(gold))
    else:
        correct = set(predicted) == set(gold)
    return SqlVerdict(correct=correct, n_predicted_rows=len(predicted), n_gold_rows=len(gold))


def _read_table(table: Table) -> pd.DataFrame:
    if isinstance(table, pd.DataFrame):
        return table
    return pd.read_csv(table)


def _as_numbers(values: pd.Series) -> pd.Series | None:
    """The column as floats when every present cell is a number, else None."""
    if values.dtype.kind in "biuf":
        return values.astype(float)
    if values.dtype.kind != "O":
        return None
    numbers = pd.to_numeric(values, errors="coerce")
    return numbers.astype(float) if numbers.notna().sum() == values.notna().sum() else None


def _sorted_column(values: pd.Series) -> tuple[bool, list]:
    """(is numeric, sorted values); numbers keep NaN for missing cells (sorted last), text uses ``""``."""
    numbers = _as_numbers(values)
    if numbers is not None:
        return True, sorted(numbers, key=lambda v: (math.isnan(v), 0.0 if math.isnan(v) else v))
    return False, sorted("" if pd.isna(v) else str(v).strip() for v in values)


def _same_column(gold: tuple[bool, list], predicted: tuple[bool, list], tolerance: float) -> bool:
    (gold_numeric, gold_values), (predicted_numeric, predicted_values) = gold, predicted
    if gold_numeric != predicted_numeric:
        return False
    if not gold_numeric:
        return gold_values == predicted_values
    for g, p in zip(gold_values, predicted_values, strict=True):
        if math.isnan(g) or math.isnan(p):
            if not (math.isnan(g) and math.isnan(p)):
                return False
        elif abs(g - p) > tolerance:
            return False
    return True


def csv_match(predicted: Table, gold: Table, *, tolerance: float = 1e-2) -> bool:
    """Whether the ``predicted`` result table answers like ``gold`` (paths to CSV files or DataFrames).

    Row counts must agree, and each gold column must equal some predicted column after
    both are sorted: numbers within ``tolerance`` (absolute), text exactly once stripped,
    missing cells only against missing cells. Column names and extra predicted columns
    are ignored. An unreadable predicted file is a wrong answer; an unreadable gold file
    raises DataFileError.
    """
    try:
        gold_frame = _read_table(gold)
    except (OSError, ValueError) as exc:
        raise DataFileError(f"gold result table {gold} cannot be read ({_one_line(exc)}); fix the file") from exc
    try:
        predicted_frame = _read_table(predicted)
    except (OSError, ValueError):
        return False
    if len(gold_frame) != len(predicted_frame):
        return False
    candidates = [_sorted_column(predicted_frame.iloc[:, i]) for i in range(predicted_frame.shape[1])]
    for i in range(gold_frame.shape[1]):
        wanted = _sorted_column(gold_frame.iloc[:, i])
        if not any(_same_column(wanted, candidate, tolerance) for candidate in candidates):
            return False
    return True
