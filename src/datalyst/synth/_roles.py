"""What each column of a collected table can be used for in a question, read from its meta-information.

``numbers`` are measurements to aggregate and test, ``categories`` are small sets of values to group or
filter by, ``labels`` name the rows one by one (answers of "which ..." questions), and ``dates`` (dates,
times, or whole numbers that are all years) order them in time. How a table is loaded in a solution
(``load_code``) follows the file's kind.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from datalyst.data import ColumnInfo, FileKind
from datalyst.synth._files import SourceFile

MAX_CATEGORIES = 12
MIN_GROUP_ROWS = 3
ID_NAME = re.compile(r"(^|[\W_])(id|index|row|rank|no|number|code|zip|fips|year)$", re.IGNORECASE)


def as_words(name: str) -> str:
    """A column name as words: ``area_km2`` -> ``area km2``, ``TotalSales`` -> ``total sales``."""
    text = re.sub(r"[_\s.]+", " ", re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name)).strip()
    return text if text.isupper() and len(text) <= 5 else text.lower()


@dataclass(frozen=True)
class Column:
    name: str
    info: ColumnInfo

    @property
    def words(self) -> str:
        return as_words(self.name)

    @property
    def code(self) -> str:
        """The column as solution code indexes it."""
        return repr(self.name)

    @property
    def year_code(self) -> str:
        """The calendar year of each row of a date column, as solution code computes it."""
        if self.info.kind == "numeric":
            return f"df[{self.code}]"
        fmt = f", format={self.info.date_format!r}" if self.info.date_format else ""
        return f"pd.to_datetime(df[{self.code}]{fmt}, errors='coerce').dt.year"

    @property
    def values(self) -> list[str]:
        """A category's values with at least ``MIN_GROUP_ROWS`` rows each, most frequent first."""
        pairs = zip(self.info.values or [], self.info.value_counts or [], strict=False)
        return [value for value, count in pairs if count >= MIN_GROUP_ROWS]


@dataclass(frozen=True)
class Roles:
    rows: int
    numbers: tuple[Column, ...]
    categories: tuple[Column, ...]
    labels: tuple[Column, ...]
    dates: tuple[Column, ...]


def roles(record: SourceFile) -> Roles:
    """The usable columns of the record's table, by role, in the table's order."""
    table = next(t for t in record.info.tables if t.name == record.table)
    rows = table.row_count or record.rows
    numbers, categories, labels, dates = [], [], [], []
    for info in table.columns:
        column = Column(info.name, info)
        present = rows - (info.missing or 0)
        if present < rows / 2 or not info.name.strip():
            continue
        unique = info.unique or 0
        if info.kind == "numeric" and _years(info) and unique >= 2:
            dates.append(column)
        elif info.kind == "numeric" and unique >= 5 and not _identifier(info, rows):
            numbers.append(column)
        elif info.kind in ("text", "boolean") and 2 <= len(column.values) <= MAX_CATEGORIES:
            categories.append(column)
        elif info.kind == "text" and unique == rows and not info.missing:
            labels.append(column)
        elif info.kind in ("datetime", "date-text"):
            dates.append(column)
    return Roles(rows, tuple(numbers), tuple(categories), tuple(labels), tuple(dates))


def load_code(record: SourceFile) -> str:
    """Python that loads the record's table into ``df`` from the file as the agent sees it (by base name)."""
    name = Path(record.path).name
    info = record.info
    if record.kind is FileKind.XLSX:
        return f"import pandas as pd\n\ndf = pd.read_excel({name!r}, sheet_name={record.table!r})\n"
    if record.kind is FileKind.SQLITE:
        query = f'SELECT * FROM "{record.table}"'
        return (
            "import sqlite3\n\nimport pandas as pd\n\n"
            f"with sqlite3.connect({name!r}) as connection:\n"
            f"    df = pd.read_sql_query({query!r}, connection)\n"
        )
    options = ""
    if info.delimiter not in (None, ","):
        options += f", sep={info.delimiter!r}"
    if info.encoding not in (None, "utf-8", "ascii"):
        options += f", encoding={info.encoding!r}"
    return f"import pandas as pd\n\ndf = pd.read_csv({name!r}{options})\n"


def split_loader(code: str) -> tuple[str, str] | None:
    """``code`` cut after its first top-level statement that assigns ``df``: the loader (what :func:`load_code`
    writes) and the computation after it. None when no statement assigns ``df``; SyntaxError when ``code`` is not
    Python."""
    body, lines = ast.parse(code).body, code.splitlines()
    for stmt in body:
        if any(
            isinstance(node, ast.Name) and node.id == "df" and isinstance(node.ctx, ast.Store)
            for node in ast.walk(stmt)
        ):
            cut = stmt.end_lineno or 0
            return "\n".join(lines[:cut]).strip("\n"), "\n".join(lines[cut:]).strip("\n")
    return None


def _years(info: ColumnInfo) -> bool:
    """Whole numbers that all look like years (they order rows in time; their mean means little)."""
    low, high = info.min, info.max
    return isinstance(low, int) and isinstance(high, int) and 1800 <= low <= high <= 2100


def _identifier(info: ColumnInfo, rows: int) -> bool:
    """A numeric column that numbers or codes rows rather than measures them."""
    if ID_NAME.search(info.name):
        return True
    if not (isinstance(info.max, int | float) and isinstance(info.min, int | float)):
        return False
    return info.unique == rows and info.max - info.min == rows - 1
