"""Fingerprints of tables, to find the same table again: in another file, another format, or a benchmark.

A table is reduced to normalised cells (names and text case-folded and stripped, numbers written with 10
significant digits, missing values empty), so a CSV and the XLSX or SQLite made from it have one
``content_hash``. Two tables that are not identical still *look alike* when their column names mostly
agree and many rows of one, over the columns both have, are rows of the other: a benchmark table
trimmed of a column or of some rows is still caught.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from numbers import Number

import pandas as pd

HEADER_AGREEMENT = 0.8
"""Jaccard similarity of two tables' column names from which their rows are compared."""
ROW_OVERLAP = 0.5
"""Share of the smaller table's rows found in the other (on the shared columns) that makes a lookalike."""


def cell(value: object) -> str:
    """One value as fingerprints compare it."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NaT:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Number):
        number = float(value)  # type: ignore[arg-type]
        return "" if math.isnan(number) else format(number, ".10g")
    return str(value).strip().casefold()


@dataclass
class Fingerprint:
    """A table's content hash, normalised column names, and rows as normalised tuples by column name."""

    content_hash: str
    columns: list[str]
    frame: pd.DataFrame = field(repr=False)
    """The normalised cells (strings), columns named by their normalised names."""

    def rows_over(self, columns: list[str]) -> set[tuple[str, ...]]:
        return set(self.frame[columns].itertuples(index=False, name=None))

    def looks_like(self, other: Fingerprint) -> bool:
        """Mostly the same columns, and many rows of the smaller table are rows of the larger one."""
        mine, theirs = set(self.columns), set(other.columns)
        if not mine or not theirs or len(mine & theirs) / len(mine | theirs) < HEADER_AGREEMENT:
            return False
        shared = sorted(mine & theirs)
        rows, other_rows = self.rows_over(shared), other.rows_over(shared)
        smaller, larger = sorted((rows, other_rows), key=len)
        return bool(smaller) and len(smaller & larger) / len(smaller) >= ROW_OVERLAP


def fingerprint(frame: pd.DataFrame) -> Fingerprint:
    """The fingerprint of a loaded table (columns with the same normalised name keep their first one)."""
    names = [cell(name) for name in frame.columns]
    keep = [index for index, name in enumerate(names) if name not in names[:index]]
    cells = pd.DataFrame(
        {names[index]: [cell(value) for value in frame.iloc[:, index].tolist()] for index in keep},
        dtype=object,
    )
    digest = hashlib.sha256()
    ordered = sorted(cells.columns)
    digest.update("\x1f".join(ordered).encode())
    for row in cells[ordered].itertuples(index=False, name=None):
        digest.update(b"\x1e" + "\x1f".join(row).encode())
    return Fingerprint(content_hash=digest.hexdigest(), columns=list(cells.columns), frame=cells)
