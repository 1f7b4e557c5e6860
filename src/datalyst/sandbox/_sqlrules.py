"""Which database a query means and where its result may be written (shared by host and worker)."""

from __future__ import annotations

import os


def pick_database(names: list[str], db: str | None) -> tuple[str | None, str]:
    """The database a query runs on, or None and why none fits."""
    if db is None and len(names) == 1:
        return names[0], ""
    if db is not None and os.path.basename(db) in names:
        return os.path.basename(db), ""
    why = f"no database named {db!r}" if db else "several databases are staged; name one with db="
    return None, f"{why} (available: {', '.join(names) or 'none'})"


def output_path_problem(workdir: str, output_path: str, data_files: list[str]) -> str | None:
    """Why ``output_path`` may not receive a result (it must be a new file inside the work folder)."""
    target = os.path.realpath(os.path.join(workdir, output_path))
    if not target.startswith(workdir.rstrip(os.sep) + os.sep) or target in data_files:
        return f"output_path {output_path!r} must be a new file inside the work folder"
    return None
