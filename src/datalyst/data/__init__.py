"""Reading data files and describing them for an LLM.

Kinds: CSV, TSV, XLSX, JSON, JSON lines, Parquet and SQLite (``write_table`` writes each). A file is untrusted
input: it is read in a process of its own within :class:`ReadLimits` of time, memory and decompressed size.
Every failure to read a file, a limit hit included, raises :class:`~datalyst.errors.DataFileError` with a
one-line message naming the file, the reason and a hint.
"""

from datalyst.errors import DataFileError

from ._budget import ReadLimits
from ._kinds import DATA_SUFFIXES, FileKind, detect_kind
from ._models import SCHEMA_VERSION, ColumnInfo, FileInfo, ForeignKeyInfo, TableInfo
from ._reader import adescribe, describe, load, load_table, read_here, start_reader
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
    "ReadLimits",
    "TableInfo",
    "adescribe",
    "describe",
    "detect_kind",
    "fits",
    "load",
    "load_table",
    "read_here",
    "start_reader",
    "write_table",
    "write_tables",
]
