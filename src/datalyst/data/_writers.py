"""Writing a table as any kind of data file datalyst reads: how synthesis makes one table into many formats."""

from __future__ import annotations

import contextlib
import io
import os
import sqlite3
from pathlib import Path

import pandas as pd

from datalyst.files import write_atomic

from ._kinds import FileKind

SUFFIXES = {
    FileKind.CSV: ".csv",
    FileKind.TSV: ".tsv",
    FileKind.XLSX: ".xlsx",
    FileKind.JSON: ".json",
    FileKind.JSONL: ".jsonl",
    FileKind.PARQUET: ".parquet",
    FileKind.SQLITE: ".sqlite",
}
"""The file name ending each kind is written with."""
XLSX_CELL_CHARS, XLSX_ROWS, XLSX_COLUMNS = 32_767, 1_048_576, 16_384


def fits(frame: pd.DataFrame, kind: FileKind) -> bool:
    """Whether ``frame`` can be written as ``kind`` whole: a workbook cuts longer cells and holds fewer rows."""
    if kind is not FileKind.XLSX:
        return True
    if len(frame) >= XLSX_ROWS or frame.shape[1] > XLSX_COLUMNS:
        return False
    texts = frame.select_dtypes(include=["object", "string"])
    return texts.empty or all(texts[column].astype(str).str.len().max() <= XLSX_CELL_CHARS for column in texts)


def write_table(frame: pd.DataFrame, path: str | os.PathLike[str], kind: FileKind, *, table: str = "data") -> Path:
    """Write ``frame`` (without its index) to ``path`` as ``kind``, atomically; ``table`` names the XLSX sheet or
    the SQLite table. JSON is a list of records, one object per row, with full float precision. Raises ValueError
    when the format cannot hold the table whole (:func:`fits`)."""
    if not fits(frame, kind):
        raise ValueError(f"the table does not fit in {kind.value.upper()} whole (a cell or the table is too long)")
    write_atomic(path, _encoded(frame, kind, table))
    return Path(path)


def _encoded(frame: pd.DataFrame, kind: FileKind, table: str) -> str | bytes:
    """The file's content (tables here are small enough to build in memory)."""
    if kind is FileKind.CSV or kind is FileKind.TSV:
        return frame.to_csv(sep="," if kind is FileKind.CSV else "\t", index=False)
    if kind is FileKind.JSON or kind is FileKind.JSONL:
        lines = kind is FileKind.JSONL
        return frame.to_json(orient="records", lines=lines, double_precision=15, date_format="iso", force_ascii=False)
    if kind is FileKind.PARQUET:
        return frame.to_parquet(index=False)
    if kind is FileKind.XLSX:
        buffer = io.BytesIO()
        frame.to_excel(buffer, sheet_name=table[:31], index=False, engine="openpyxl")
        return buffer.getvalue()
    with contextlib.closing(sqlite3.connect(":memory:")) as connection:
        frame.to_sql(table, connection, index=False)
        return connection.serialize()
