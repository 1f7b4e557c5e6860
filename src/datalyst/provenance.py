"""Where results come from: the source revision recorded in manifests and reports."""

from __future__ import annotations

import subprocess
from pathlib import Path

DIRTY = "-dirty"


def git_revision() -> str | None:
    """The git commit of the datalyst source in use, ending in ``-dirty`` when tracked files differ from it
    (None for an installed copy outside a checkout)."""
    revision = _git("rev-parse", "HEAD")
    if not revision:
        return None
    return revision + (DIRTY if _git("status", "--porcelain", "--untracked-files=no") else "")


def short_revision(revision: str) -> str:
    """The first ten characters of the commit, keeping the ``-dirty`` mark."""
    return revision[:10] + (DIRTY if revision.endswith(DIRTY) else "")


def _git(*arguments: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *arguments],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()
