"""Shared limits and the one way this package builds a DataFileError."""

from __future__ import annotations

import os
import re
from pathlib import Path

from datalyst.errors import DataFileError

# How much of a file the meta-information looks at.
STATS_ROWS = 100_000  # rows read for column statistics
SAMPLE_ROWS = 5  # rows shown as a preview
CELL_CHARS = 30  # width of a preview cell
VALUE_CHARS = 40  # width of a listed distinct value
LOW_CARDINALITY = 20  # columns with at most this many distinct values list them
MAX_NAMES = 1_000  # column names kept per table in the meta-information

_SPACES = re.compile(r"\s+")


def one_line(text: object) -> str:
    """Collapse any whitespace run (newlines included) to one space."""
    return _SPACES.sub(" ", str(text)).strip()


def file_error(path: str | os.PathLike[str], reason: str, hint: str) -> DataFileError:
    """Build a single-line DataFileError naming the file, the reason and a hint."""
    return DataFileError(f"cannot read '{os.fspath(path)}': {one_line(reason)} (hint: {one_line(hint)})")


def exc_text(exc: BaseException) -> str:
    """A short, single-line text for a third-party exception."""
    text = one_line(exc) or type(exc).__name__
    return text if len(text) <= 300 else text[:299] + "…"


def clip(text: str, width: int) -> str:
    """Cut `text` to at most `width` characters, marking the cut."""
    if len(text) <= width:
        return text
    return text[: max(width - 1, 0)] + "…"


def human_size(size: int) -> str:
    """1536 -> '1.5 KB'."""
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def check_file(path: str | os.PathLike[str]) -> Path:
    """Return `path` as a Path after checking it is an existing, non-empty, readable file."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise file_error(path, "file not found", f"check the path (relative paths start at {os.getcwd()})") from None
    except OSError as exc:
        raise file_error(path, f"cannot access the file: {exc_text(exc)}", "check the permissions") from exc
    if p.is_dir():
        raise file_error(path, "this is a directory, not a data file", "pass the path of one file inside it")
    if st.st_size == 0:
        raise file_error(
            path,
            "the file is empty (0 bytes)",
            "export the data again; a file with only a header line is accepted",
        )
    if not os.access(p, os.R_OK):
        raise file_error(path, "permission denied", "make the file readable for this user")
    return p
