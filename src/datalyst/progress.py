"""The progress bars of long work, drawn on stderr so that stdout stays free for results."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


def progress_bar(*extra: str | ProgressColumn, eta: bool = False, enabled: bool = True) -> Progress:
    """A bar with the work's description, how much of it is done and the time so far; ``eta`` adds the time
    left, and ``extra`` more columns (a string is a text column, e.g. ``"{task.fields[rate]}"``)."""
    columns: list[str | ProgressColumn] = [
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
    ]  # fmt: skip
    if eta:
        columns += [TextColumn("eta"), TimeRemainingColumn()]
    columns += [TextColumn(column) if isinstance(column, str) else column for column in extra]
    return Progress(*columns, console=Console(stderr=True), disable=not enabled)
