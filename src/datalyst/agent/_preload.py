"""Loading a task's data files for the model before its first turn (``AgentConfig.preload``).

A small model often fails before any analysis, reading a file that is not plain CSV the wrong way (a JSON
object of records as a list, a sheet it does not name). datalyst already reads every kind of file it
describes, so with ``preload`` the sandbox loads each table (a file, a sheet) with the same reader
(``datalyst.data.load_table``) into a DataFrame, and the first message shows that code and the frames' shapes.
SQLite files are left to their helpers (``get_db_info``, ``execute_sql``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from datalyst.agent._described import file_tables

MAX_FRAMES = 12
"""Tables loaded at most: a workbook of a hundred sheets is left to the model after the first ones."""


def preload_cell(files: Sequence[str]) -> str | None:
    """Code that loads every table of the data files (SQLite aside) into a DataFrame and prints its shape: ``df``
    for a single table; else ``df_<file>`` for a file of one table and ``df_<table>`` for each table of a workbook
    or a JSON file of several. None when there is nothing to load."""
    loads = [(name, table if len(tables) > 1 else None) for name, tables in file_tables(files) for table in tables]
    if not loads:
        return None
    loads = loads[:MAX_FRAMES]
    stems = [os.path.splitext(name)[0] if table is None else table for name, table in loads]
    variables = ["df"] if len(loads) == 1 else _frame_names(stems)
    lines = ["from datalyst.data import load_table"]
    for variable, (name, table) in zip(variables, loads, strict=True):
        lines.append(f"{variable} = load_table({name!r}" + (f", {table!r})" if table is not None else ")"))
    lines += [f'print(f"{v}: {{{v}.shape[0]}} rows x {{{v}.shape[1]}} columns")' for v in variables]
    return "\n".join(lines)


def _frame_names(stems: Sequence[str]) -> list[str]:
    """``df_<stem>``, made an identifier and unique (``df_sales``, ``df_sales_2``)."""
    chosen: list[str] = []
    for stem in stems:
        base = "df_" + (re.sub(r"\W+", "_", stem).strip("_").lower() or "table")
        variable, n = base, 2
        while variable in chosen:
            variable, n = f"{base}_{n}", n + 1
        chosen.append(variable)
    return chosen
