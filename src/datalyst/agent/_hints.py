"""A line under a failing cell that named a column the data files do not have: the columns it may have meant.

Small models often write a column's name from the question ("total vaccinations") rather than from the file
(``total_vaccinations``), or miss a leading space (`` RELHUM``). The error alone says only that the key is
missing; with ``AgentConfig.column_hints`` the model is also shown the closest real names.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from datalyst.sandbox import CellError

_QUOTED = re.compile(r"'([^'\n]{1,200})'")
_NOT_FOUND = re.compile(r"Column not found: ([^'\"\n]{1,200})")
_LOOSE = re.compile(r"[\W_]+")
CLOSEST = 3


def column_hint(error: CellError, columns: Iterable[str]) -> str | None:
    """For a KeyError, or a frame's AttributeError, naming something that is not one of ``columns``: a line per
    name with the closest columns. None when no column is close (the name was not meant as one)."""
    if error.ename == "KeyError":
        names = _NOT_FOUND.findall(error.evalue) or _QUOTED.findall(error.evalue)
    elif error.ename == "AttributeError" and re.match(r"'(DataFrame|Series|DataFrameGroupBy)' object", error.evalue):
        names = _QUOTED.findall(error.evalue)[-1:]
    else:
        return None
    known = list(dict.fromkeys(columns))
    lines = []
    for name in dict.fromkeys(names):
        if name not in known and (close := closest_columns(name, known)):
            lines.append(f"No column is named {name!r}; the closest columns: {', '.join(map(repr, close))}.")
    return "\n".join(lines) or None


def closest_columns(name: str, columns: list[str]) -> list[str]:
    """The columns that differ from ``name`` only in case, spaces and punctuation, else those whose name holds it
    or is held in it, else the most alike ones."""
    loose = {column: _LOOSE.sub("", column.lower()) for column in columns}
    wanted = _LOOSE.sub("", name.lower())
    if not wanted:
        return []
    for found in (
        [column for column, key in loose.items() if key == wanted],
        [column for column, key in loose.items() if len(key) >= 3 and (key in wanted or wanted in key)],
    ):
        if found:
            return found[:CLOSEST]
    alike = difflib.get_close_matches(wanted, list(loose.values()), n=CLOSEST, cutoff=0.75)
    return [column for key in alike for column, other in loose.items() if other == key][:CLOSEST]
