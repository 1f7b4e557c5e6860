"""SQLite databases, always opened read-only."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ._common import exc_text, file_error

_CORRUPT_HINT = "check it with `sqlite3 FILE 'PRAGMA integrity_check'`, or export the database again"
_VIEW_COUNT_STEPS = 2_000  # progress-handler calls (of 1000 VM steps) allowed for counting a view


def quote(name: str) -> str:
    """Quote an SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


@dataclass
class Column:
    """A column as declared in the schema."""

    name: str
    declared_type: str
    not_null: bool
    pk: int  # position in the primary key, 0 when not part of it


@dataclass
class ForeignKey:
    """A foreign key of a table."""

    columns: list[str]
    ref_table: str
    ref_columns: list[str | None]


@dataclass
class Relation:
    """A table or view with its schema."""

    name: str
    kind: str  # "table" or "view"
    virtual: bool = False  # a virtual table needs its module, which this SQLite may lack
    columns: list[Column] = field(default_factory=list)
    foreign_keys: list[ForeignKey] = field(default_factory=list)

    @property
    def optional(self) -> bool:
        """Views and virtual tables may fail to evaluate without the file being corrupt."""
        return self.kind == "view" or self.virtual

    @property
    def primary_key(self) -> list[str]:
        return [c.name for c in sorted((c for c in self.columns if c.pk), key=lambda c: c.pk)]


def _connect(path: str | os.PathLike[str], options: str) -> sqlite3.Connection:
    con = sqlite3.connect(Path(path).resolve().as_uri() + options, uri=True)
    try:
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except BaseException:
        con.close()
        raise
    return con


@contextmanager
def open_db(path: str | os.PathLike[str]) -> Iterator[sqlite3.Connection]:
    """A read-only connection; any sqlite or pandas database error becomes a DataFileError."""
    try:
        try:
            con = _connect(path, "?mode=ro")
        except sqlite3.OperationalError:
            # e.g. a WAL database in a read-only directory: read it as an immutable file
            con = _connect(path, "?mode=ro&immutable=1")
    except sqlite3.Error as exc:
        raise file_error(path, f"not a readable SQLite database: {exc_text(exc)}", _CORRUPT_HINT) from exc
    try:
        yield con
    except (sqlite3.Error, pd.errors.DatabaseError) as exc:
        raise file_error(path, f"reading the SQLite database failed: {exc_text(exc)}", _CORRUPT_HINT) from exc
    finally:
        con.close()


def relations(con: sqlite3.Connection) -> list[Relation]:
    """Tables (in creation order) then views, without SQLite's internal tables."""
    rows = con.execute(
        "SELECT name, type, sql FROM sqlite_master WHERE type IN ('table', 'view') "
        "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
    ).fetchall()
    found = [
        Relation(name, kind, virtual=(sql or "").lstrip().upper().startswith("CREATE VIRTUAL"))
        for name, kind, sql in rows
    ]
    found.sort(key=lambda r: r.kind != "table")
    return found


def add_schema(con: sqlite3.Connection, rel: Relation) -> Relation:
    """Fill the declared columns and foreign keys of a relation."""
    rel.columns = [
        Column(name, declared or "", bool(notnull), int(pk))
        for _cid, name, declared, notnull, _default, pk in con.execute(f"PRAGMA table_info({quote(rel.name)})")
    ]
    groups: dict[int, ForeignKey] = {}
    for fk_id, _seq, table, src, dst, *_rest in con.execute(f"PRAGMA foreign_key_list({quote(rel.name)})"):
        fk = groups.setdefault(fk_id, ForeignKey([], table, []))
        fk.columns.append(src)
        fk.ref_columns.append(dst)
    rel.foreign_keys = list(groups.values())
    return rel


def count_rows(con: sqlite3.Connection, rel: Relation) -> int | None:
    """SELECT COUNT(*); for a view, give up (None) when it takes too long."""
    sql = f"SELECT COUNT(*) FROM {quote(rel.name)}"
    if rel.kind == "table":
        return int(con.execute(sql).fetchone()[0])
    calls = 0

    def budget() -> int:
        nonlocal calls
        calls += 1
        return int(calls > _VIEW_COUNT_STEPS)

    con.set_progress_handler(budget, 1000)
    try:
        return int(con.execute(sql).fetchone()[0])
    except sqlite3.Error:
        return None
    finally:
        con.set_progress_handler(None, 0)


def read_relation(
    con: sqlite3.Connection, name: str, *, limit: int | None = None, columns: list[str] | None = None
) -> pd.DataFrame:
    """SELECT the rows (optionally the first `limit`, and only `columns`) of a table or view."""
    cols = ", ".join(quote(c) for c in columns) if columns else "*"
    sql = f"SELECT {cols} FROM {quote(name)}"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return pd.read_sql_query(sql, con)
