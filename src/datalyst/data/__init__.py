"""Reading data files and describing them for an LLM.

Kinds: CSV, TSV, XLSX, JSON, JSON lines, Parquet and SQLite (``write_table`` writes each). Every failure to read a
file raises :class:`~datalyst.errors.DataFileError` with a one-line message naming
the file, the reason and a hint.
"""

from datalyst.errors import DataFileError

from ._describe import describe
from ._kinds import DATA_SUFFIXES, FileKind, detect_kind
from ._loaders import load, load_table
from ._models import SCHEMA_VERSION, ColumnInfo, FileInfo, ForeignKeyInfo, TableInfo
from ._writers import SUFFIXES, fits, write_table, write_tables

__all__ = [
    "DATA_SUFFIXES",
    "SCHEMA_VERSION",
    "SUFFIXES",
    "ColumnInfo",
    "DataFileError",
    "FileInfo",
    "FileKind",
    "ForeignKeyInfo",
    "TableInfo",
    "describe",
    "detect_kind",
    "fits",
    "load",
    "load_table",
    "write_table",
    "write_tables",
]
