"""describe(): bounded meta-information about a data file."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pandas as pd

from . import _sqlite
from ._common import MAX_NAMES, STATS_ROWS, check_file, exc_text
from ._kinds import FileKind, detect_kind
from ._models import ColumnInfo, FileInfo, ForeignKeyInfo, TableInfo
from ._readers import (
    delimited_format,
    read_delimited,
    read_json,
    read_jsonl,
    read_parquet_head,
    read_xlsx,
)
from ._stats import column_info, sample_rows
from ._text import count_lines

__all__ = ["describe"]

MAX_DETAILED_TABLES = 30  # tables and sheets beyond this get their schema and row count (or name) only
MAX_TABLES = 500  # tables and sheets beyond this are counted, not listed


def _table(
    name: str,
    frame: pd.DataFrame,
    *,
    max_columns: int,
    row_count: int | None,
    exact: bool = True,
    all_names: list[str] | None = None,
    kind: str = "table",
    declared: dict[str, tuple[str, bool]] | None = None,
) -> TableInfo:
    """Statistics of (at most `max_columns` columns of) `frame` as a TableInfo."""
    names = [str(c) for c in (all_names if all_names is not None else frame.columns)]
    shown = frame.iloc[:, :max_columns]
    columns = []
    for i in range(shown.shape[1]):
        col_name = str(shown.columns[i])
        extra = {}
        if declared and col_name in declared:
            extra = {"declared_type": declared[col_name][0], "not_null": declared[col_name][1]}
        columns.append(column_info(shown.iloc[:, i], col_name, **extra))
    return TableInfo(
        name=name,
        kind=kind,
        row_count=row_count,
        row_count_exact=exact,
        column_count=len(names),
        column_names=names[:MAX_NAMES],
        columns=columns,
        omitted_columns=len(names) - len(columns),
        stats_rows=len(frame),
        sample_rows=sample_rows(shown),
    )


def _describe_delimited(info: FileInfo, path: str | os.PathLike[str], max_columns: int) -> None:
    encoding, delimiter = delimited_format(path, tab=info.kind is FileKind.TSV)
    info.encoding, info.delimiter = encoding, delimiter
    names = [str(c) for c in read_delimited(path, encoding, delimiter, nrows=0).columns]
    usecols = list(range(max_columns)) if len(names) > max_columns else None
    frame = read_delimited(path, encoding, delimiter, nrows=STATS_ROWS, usecols=usecols)
    if len(frame) < STATS_ROWS:
        rows, exact = len(frame), True
    else:
        rows, exact = max(count_lines(path, encoding) - 1, len(frame)), False
        info.notes.append(
            "The row count comes from counting lines and is approximate (quoted newlines or blank lines can skew it)."
        )
    info.tables.append(
        _table(Path(path).stem, frame, max_columns=max_columns, row_count=rows, exact=exact, all_names=names)
    )


def _describe_xlsx(info: FileInfo, path: str | os.PathLike[str], max_columns: int) -> None:
    every: list[str] = []

    def pick(names: list[str]) -> list[str]:
        every.extend(names)
        return names[:MAX_DETAILED_TABLES]

    for sheet in read_xlsx(path, pick, nrows=STATS_ROWS, max_columns=max_columns):
        frame = sheet.frame
        rows, exact = len(frame), True
        if len(frame) >= STATS_ROWS and sheet.max_row:
            rows, exact = max(sheet.max_row - 1, len(frame)), False
        names = sheet.header or [str(c) for c in frame.columns]
        info.tables.append(
            _table(
                sheet.name,
                frame,
                max_columns=max_columns,
                row_count=rows,
                exact=exact,
                all_names=names,
                kind="sheet",
            )
        )
    info.tables += [TableInfo(name=name, kind="sheet") for name in every[MAX_DETAILED_TABLES:MAX_TABLES]]
    _note_unread(info, len(every), "sheets")


def _note_unread(info: FileInfo, count: int, what: str) -> None:
    """Say which of ``count`` tables or sheets were read only in part (past the detailed ones) or not at all."""
    if count > MAX_DETAILED_TABLES:
        info.notes.append(f"Only the first {MAX_DETAILED_TABLES} {what} have statistics and sample rows.")
    if count > MAX_TABLES:
        info.notes.append(f"Only the first {MAX_TABLES} of the {count} {what} are listed.")


def _schema_only(rel: _sqlite.Relation, rows: int | None, max_columns: int) -> TableInfo:
    names = [c.name for c in rel.columns]
    return TableInfo(
        name=rel.name,
        kind=rel.kind,
        row_count=rows,
        column_count=len(names),
        column_names=names[:MAX_NAMES],
        columns=[
            ColumnInfo(name=c.name, dtype="", kind="other", declared_type=c.declared_type, not_null=c.not_null)
            for c in rel.columns[:max_columns]
        ],
        omitted_columns=max(len(names) - max_columns, 0),
    )


def _sqlite_table(con: sqlite3.Connection, rel: _sqlite.Relation, detailed: bool, max_columns: int) -> TableInfo:
    _sqlite.add_schema(con, rel)
    rows = _sqlite.count_rows(con, rel)
    if detailed:
        names = [c.name for c in rel.columns]
        frame = _sqlite.read_relation(con, rel.name, limit=STATS_ROWS, columns=names[:max_columns])
        declared = {c.name: (c.declared_type, c.not_null) for c in rel.columns}
        table = _table(
            rel.name,
            frame,
            max_columns=max_columns,
            row_count=rows,
            all_names=names,
            kind=rel.kind,
            declared=declared,
        )
    else:
        table = _schema_only(rel, rows, max_columns)
    table.row_count_exact = rows is not None
    table.primary_key = rel.primary_key
    table.foreign_keys = [
        ForeignKeyInfo(columns=fk.columns, ref_table=fk.ref_table, ref_columns=fk.ref_columns)
        for fk in rel.foreign_keys
    ]
    return table


def _describe_sqlite(info: FileInfo, path: str | os.PathLike[str], max_columns: int) -> None:
    with _sqlite.open_db(path) as con:
        rels = _sqlite.relations(con)
        for index, rel in enumerate(rels[:MAX_TABLES]):
            try:
                info.tables.append(_sqlite_table(con, rel, index < MAX_DETAILED_TABLES, max_columns))
            except (sqlite3.Error, pd.errors.DatabaseError) as exc:
                if not rel.optional:
                    raise
                note = f"The {rel.kind} could not be evaluated: {exc_text(exc)}"
                info.tables.append(TableInfo(name=rel.name, kind=rel.kind, notes=[note]))
        _note_unread(info, len(rels), "tables")


def describe(path: str | os.PathLike[str], *, max_columns: int = 40, max_chars: int = 6000) -> FileInfo:
    """Meta-information about a data file, read in this process (``datalyst.data.describe`` says what it holds)."""
    kind = detect_kind(path)
    p = check_file(path)
    info = FileInfo(path=os.fspath(path), name=p.name, kind=kind, size_bytes=p.stat().st_size, max_chars=max_chars)
    if kind in (FileKind.CSV, FileKind.TSV):
        _describe_delimited(info, path, max_columns)
    elif kind is FileKind.XLSX:
        _describe_xlsx(info, path, max_columns)
    elif kind is FileKind.SQLITE:
        _describe_sqlite(info, path, max_columns)
    elif kind is FileKind.PARQUET:
        frame, rows, names = read_parquet_head(path, STATS_ROWS, max_columns)
        info.tables.append(_table(p.stem, frame, max_columns=max_columns, row_count=rows, all_names=names))
    elif kind is FileKind.JSONL:
        frame, rows = read_jsonl(path, max_rows=STATS_ROWS)
        info.tables.append(_table(p.stem, frame, max_columns=max_columns, row_count=rows))
    else:
        for name, frame in read_json(path, p.stem).items():
            head = frame.head(STATS_ROWS)
            info.tables.append(_table(name, head, max_columns=max_columns, row_count=len(frame)))
    return info
