"""The task's data files as the agent knows them: one description per file version, shared by the first prompt,
the preloaded frames and the column hints."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

from datalyst.data import FileInfo, FileKind, describe
from datalyst.errors import DataFileError


def description(path: str) -> FileInfo:
    """``datalyst.data.describe(path)``, remembered while the file is unchanged (raises OSError, DataFileError)."""
    stat = os.stat(path)
    return _described(os.path.abspath(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=256)
def _described(path: str, mtime_ns: int, size: int) -> FileInfo:
    """A file's description, remembered per file version: many tasks and trials share a file, and describing it
    holds the GIL for tens of milliseconds (rendering it takes microseconds)."""
    return describe(path)


def file_columns(files: Sequence[str]) -> list[str]:
    """The column names of every table of ``files`` (none for a file that cannot be read)."""
    names = []
    for path in files:
        try:
            names += [name for table in description(path).tables for name in table.column_names]
        except (OSError, DataFileError):
            continue
    return names


def file_tables(files: Sequence[str]) -> list[tuple[str, list[str]]]:
    """Each file that holds tables to load into frames, by base name, with its tables' names: SQLite databases
    (left to their helpers) and files that cannot be read are left out."""
    found = []
    for path in files:
        try:
            info = description(path)
        except (OSError, DataFileError):
            continue
        if info.kind is not FileKind.SQLITE and info.tables:
            found.append((os.path.basename(path), [table.name for table in info.tables]))
    return found
