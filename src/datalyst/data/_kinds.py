"""File kinds and how to recognise them from the name and the first bytes."""

from __future__ import annotations

import os
from enum import StrEnum

from ._common import check_file, exc_text, file_error

__all__ = ["DATA_SUFFIXES", "FileKind", "detect_kind"]


class FileKind(StrEnum):
    """The kinds of data file datalyst reads."""

    CSV = "csv"
    TSV = "tsv"
    XLSX = "xlsx"
    JSON = "json"
    JSONL = "jsonl"
    PARQUET = "parquet"
    SQLITE = "sqlite"


_EXTENSIONS: dict[str, FileKind] = {
    ".csv": FileKind.CSV,
    ".txt": FileKind.CSV,
    ".tsv": FileKind.TSV,
    ".tab": FileKind.TSV,
    ".xlsx": FileKind.XLSX,
    ".xlsm": FileKind.XLSX,
    ".json": FileKind.JSON,
    ".jsonl": FileKind.JSONL,
    ".ndjson": FileKind.JSONL,
    ".parquet": FileKind.PARQUET,
    ".pq": FileKind.PARQUET,
    ".sqlite": FileKind.SQLITE,
    ".sqlite3": FileKind.SQLITE,
    ".db": FileKind.SQLITE,
    ".db3": FileKind.SQLITE,
}

DATA_SUFFIXES = frozenset(_EXTENSIONS)
"""File name suffixes (lower case, with the dot) of the kinds datalyst reads."""

SQLITE_MAGIC = b"SQLite format 3\x00"
ZIP_MAGIC = b"PK\x03\x04"
PARQUET_MAGIC = b"PAR1"
OLE2_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # legacy .xls, or an encrypted .xlsx

_BINARY_KINDS = {
    FileKind.SQLITE: "a SQLite database (no 'SQLite format 3' header)",
    FileKind.XLSX: "an XLSX workbook (no zip signature)",
    FileKind.PARQUET: "a Parquet file (no 'PAR1' signature)",
}


def _sniff_magic(head: bytes) -> FileKind | None:
    if head.startswith(SQLITE_MAGIC):
        return FileKind.SQLITE
    if head.startswith(ZIP_MAGIC):
        return FileKind.XLSX
    if head.startswith(PARQUET_MAGIC):
        return FileKind.PARQUET
    return None


def detect_kind(path: str | os.PathLike[str]) -> FileKind:
    """Tell the kind of a data file from its first bytes, else from its extension.

    A file whose signature names a binary kind (SQLite, XLSX, Parquet) is of that kind
    whatever its name; otherwise the extension decides. Raises DataFileError for a
    missing or empty file, an unknown extension, or a binary extension without the
    matching signature.
    """
    p = check_file(path)
    try:
        with open(p, "rb") as fh:
            head = fh.read(16)
    except OSError as exc:
        raise file_error(path, f"cannot open the file: {exc_text(exc)}", "check the permissions") from exc
    by_magic = _sniff_magic(head)
    if by_magic is not None:
        return by_magic
    ext = p.suffix.lower()
    if head.startswith(OLE2_MAGIC):
        raise file_error(
            path,
            "this is a legacy Excel (.xls) or password-protected workbook, which is not supported",
            "open it in a spreadsheet program and save it as .xlsx without a password",
        )
    by_ext = _EXTENSIONS.get(ext)
    if by_ext is None:
        supported = ", ".join(sorted(_EXTENSIONS))
        shown = f"'{ext}'" if ext else "none"
        raise file_error(
            path,
            f"unknown file type (extension {shown})",
            f"use one of {supported}, or convert the file to CSV",
        )
    if by_ext in _BINARY_KINDS:
        raise file_error(
            path,
            f"the extension says {ext} but the content is not {_BINARY_KINDS[by_ext]}",
            "the file is corrupt or misnamed; export it again or rename it to its real type",
        )
    return by_ext
