"""Writing a table as any kind of data file datalyst reads: how synthesis makes one table into many formats."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
from collections.abc import Mapping
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
    return all((texts[column].astype(str).str.len().fillna(0) <= XLSX_CELL_CHARS).all() for column in texts)


def write_table(frame: pd.DataFrame, path: str | os.PathLike[str], kind: FileKind, *, table: str = "data") -> Path:
    """Write ``frame`` (without its index) to ``path`` as ``kind``, atomically; ``table`` names the XLSX sheet or
    the SQLite table. JSON is a list of records, one object per row, with full float precision. Raises ValueError
    when the format cannot hold the table whole (:func:`fits`)."""
    if kind is not FileKind.JSON:
        return write_tables({table: frame}, path, kind)
    write_atomic(path, _records(frame))  # a list of records, where write_tables writes an object of tables
    return Path(path)


def write_tables(tables: Mapping[str, pd.DataFrame], path: str | os.PathLike[str], kind: FileKind) -> Path:
    """Write named tables (without their indexes) to one file, atomically: the sheets of a workbook, the tables of
    an SQLite database, or a JSON object holding each table's records under its name (the layout of many
    exported files); a file of any other kind holds exactly one table. Raises ValueError when the file cannot
    hold them whole."""
    if len(tables) != 1 and kind not in (FileKind.XLSX, FileKind.SQLITE, FileKind.JSON):
        raise ValueError(f"a {kind.value.upper()} file holds one table, not {len(tables)}")
    if not all(fits(frame, kind) for frame in tables.values()):
        raise ValueError(f"the table does not fit in {kind.value.upper()} whole (a cell or the table is too long)")
    write_atomic(path, _encoded(tables, kind))
    return Path(path)


def _records(frame: pd.DataFrame, *, lines: bool = False) -> str:
    return frame.to_json(orient="records", lines=lines, double_precision=15, date_format="iso", force_ascii=False)


def _encoded(tables: Mapping[str, pd.DataFrame], kind: FileKind) -> str | bytes:
    """The file's content (tables here are small enough to build in memory)."""
    if kind is FileKind.JSON:
        return "{" + ", ".join(f"{json.dumps(name)}: {_records(frame)}" for name, frame in tables.items()) + "}"
    if kind is FileKind.XLSX:
        buffer = io.BytesIO()
        with pd.ExcelWriter(buffer, engine="openpyxl") as workbook:
            for name, frame in tables.items():
                frame.to_excel(workbook, sheet_name=name[:31], index=False)
        return buffer.getvalue()
    if kind is FileKind.SQLITE:
        with contextlib.closing(sqlite3.connect(":memory:")) as connection:
            for name, frame in tables.items():
                frame.to_sql(name, connection, index=False)
            return connection.serialize()
    (frame,) = tables.values()
    if kind is FileKind.CSV or kind is FileKind.TSV:
        return frame.to_csv(sep="," if kind is FileKind.CSV else "\t", index=False)
    if kind is FileKind.JSONL:
        return _records(frame, lines=True)
    return frame.to_parquet(index=False)
