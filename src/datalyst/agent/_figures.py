"""Figures a cell saved, read back from the work folder so trajectories can show them later."""

from __future__ import annotations

import base64

from datalyst.sandbox import ExecResult, open_in_workdir

MAX_FIGURE_BYTES = 512 * 1024
MAX_FIGURES_PER_TURN = 4


def collect_figures(workdir: str, result: ExecResult) -> dict[str, str]:
    """Base64 PNGs of the figures a cell created (big or odd files are skipped; no link is followed)."""
    figures: dict[str, str] = {}
    for name in result.files_created:
        if not name.endswith(".png") or len(figures) >= MAX_FIGURES_PER_TURN:
            continue
        try:
            f = open_in_workdir(workdir, name)
        except OSError:
            continue
        with f:
            data = f.read(MAX_FIGURE_BYTES + 1)
        if len(data) <= MAX_FIGURE_BYTES and data.startswith(b"\x89PNG"):
            figures[name] = base64.b64encode(data).decode()
    return figures
