"""Loading a task's data files for the model before its first turn (``AgentConfig.preload``).

A small model often fails before any analysis, reading a file that is not plain CSV the wrong way (a JSON
object of records as a list, a sheet it does not name). datalyst already reads every kind of file it
describes, so with ``preload`` the sandbox loads each file with the same reader (``datalyst.data.load_table``)
into a DataFrame, and the first message shows that code and the frames' shapes. SQLite files are left to
their helpers (``get_db_info``, ``execute_sql``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from datalyst.data import FileKind, detect_kind
from datalyst.errors import DataFileError


def preload_cell(files: Sequence[str]) -> str | None:
    """Code that loads each data file (SQLite aside) into a DataFrame and prints its shape: ``df`` for a single
    file, ``df_<name>`` for several. None when there is nothing to load."""
    names = [os.path.basename(path) for path in files if _loadable(path)]
    if not names:
        return None
    variables = ["df"] if len(names) == 1 else _frame_names(names)
    lines = ["from datalyst.data import load_table"]
    lines += [f"{variable} = load_table({name!r})" for variable, name in zip(variables, names, strict=True)]
    lines += [f'print(f"{v}: {{{v}.shape[0]}} rows x {{{v}.shape[1]}} columns")' for v in variables]
    return "\n".join(lines)


def _loadable(path: str) -> bool:
    try:
        return detect_kind(path) is not FileKind.SQLITE
    except (OSError, DataFileError):
        return False


def _frame_names(names: Sequence[str]) -> list[str]:
    """``df_<stem>``, made an identifier and unique (``df_sales``, ``df_sales_2``)."""
    chosen: list[str] = []
    for name in names:
        stem = re.sub(r"\W+", "_", os.path.splitext(name)[0]).strip("_").lower() or "file"
        base = f"df_{stem}"
        variable, n = base, 2
        while variable in chosen:
            variable, n = f"{base}_{n}", n + 1
        chosen.append(variable)
    return chosen
