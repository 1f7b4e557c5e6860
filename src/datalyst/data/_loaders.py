"""load() and load_table(): data files as pandas DataFrames."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pandas as pd

from . import _sqlite
from ._common import file_error
from ._kinds import FileKind, detect_kind
from ._readers import delimited_format, read_delimited, read_json, read_jsonl, read_parquet, read_xlsx

__all__ = ["load", "load_table", "resolve_table"]

_LISTED = 30  # table names listed in an error message


def resolve_table(path: str | os.PathLike[str], available: list[str], table: str | None) -> str:
    """Pick `table` among `available` (the first one when None); exact, then case-insensitive match."""
    if not available:
        raise file_error(path, "the file contains no tables", "check that the right file was given")
    if table is None:
        return available[0]
    if table in available:
        return table
    folded = [name for name in available if name.casefold() == table.casefold()]
    if len(folded) == 1:
        return folded[0]
    shown = ", ".join(repr(n) for n in available[:_LISTED])
    if len(available) > _LISTED:
        shown += f", ... ({len(available)} in all)"
    raise file_error(path, f"no table named {table!r}; available: {shown}", "pass one of the available names, or none")


def _single(path: str | os.PathLike[str], kind: FileKind) -> pd.DataFrame:
    if kind in (FileKind.CSV, FileKind.TSV):
        encoding, delimiter = delimited_format(path, tab=kind is FileKind.TSV)
        return read_delimited(path, encoding, delimiter)
    if kind is FileKind.JSONL:
        return read_jsonl(path)[0]
    if kind is FileKind.PARQUET:
        return read_parquet(path)
    raise AssertionError(f"not a single-table kind: {kind}")


def _load_sqlite(path: str | os.PathLike[str], table: str | None, every: bool) -> dict[str, pd.DataFrame]:
    with _sqlite.open_db(path) as con:
        rels = _sqlite.relations(con)
        if every:
            frames = {}
            for rel in rels:
                try:
                    frames[rel.name] = _sqlite.read_relation(con, rel.name)
                except (sqlite3.Error, pd.errors.DatabaseError):
                    if not rel.optional:
                        raise
                    # a broken view or an unavailable virtual table holds no data of its own
            return frames
        name = resolve_table(path, [r.name for r in rels], table)
        return {name: _sqlite.read_relation(con, name)}


def load(path: str | os.PathLike[str]) -> dict[str, pd.DataFrame]:
    """Every table of a data file, by name, read in this process (``datalyst.data.load`` says more)."""
    kind = detect_kind(path)
    stem = Path(path).stem
    if kind is FileKind.XLSX:
        return {s.name: s.frame for s in read_xlsx(path, lambda names: names)}
    if kind is FileKind.SQLITE:
        return _load_sqlite(path, None, every=True)
    if kind is FileKind.JSON:
        return read_json(path, stem)
    return {stem: _single(path, kind)}


def load_table(path: str | os.PathLike[str], table: str | None = None) -> pd.DataFrame:
    """One table of a data file, read in this process (``datalyst.data.load_table`` says more)."""
    kind = detect_kind(path)
    p = Path(path)
    if kind is FileKind.XLSX:
        return read_xlsx(path, lambda names: [resolve_table(path, names, table)])[0].frame
    if kind is FileKind.SQLITE:
        return next(iter(_load_sqlite(path, table, every=False).values()))
    if kind is FileKind.JSON:
        tables = read_json(path, p.stem)
        return tables[resolve_table(path, list(tables), table)]
    if table is not None and table == p.name:
        table = p.stem
    resolve_table(path, [p.stem], table)
    return _single(path, kind)
