"""Figures a cell saved, read back from the work folder so trajectories can show them later."""

from __future__ import annotations

import base64
import os
import stat

from datalyst.sandbox import ExecResult

MAX_FIGURE_BYTES = 512 * 1024
MAX_FIGURES_PER_TURN = 4


def collect_figures(workdir: str, result: ExecResult) -> dict[str, str]:
    """Base64 PNGs of the figures a cell created (big or odd files are skipped; links are not followed)."""
    figures: dict[str, str] = {}
    for name in result.files_created:
        if not name.endswith(".png") or len(figures) >= MAX_FIGURES_PER_TURN:
            continue
        try:
            fd = os.open(os.path.join(workdir, name), os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FIGURE_BYTES:
                continue
            data = f.read(MAX_FIGURE_BYTES + 1)
        if data.startswith(b"\x89PNG"):
            figures[name] = base64.b64encode(data).decode()
    return figures
