"""Where datalyst keeps files of its own (the one place that reads the path environment variables)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$DATALYST_CACHE``, else ``$XDG_CACHE_HOME/datalyst``, else ``~/.cache/datalyst``."""
    if override := os.environ.get("DATALYST_CACHE"):
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "datalyst"


def benchmarks_dir() -> Path:
    """``$DATALYST_BENCHMARKS``, else the ``shared/benchmarks`` folder beside a source checkout."""
    if override := os.environ.get("DATALYST_BENCHMARKS"):
        return Path(override)
    return Path(__file__).resolve().parents[3] / "shared" / "benchmarks"


def dabench_dir() -> Path:
    """The InfiAgent-DABench folder (``questions.jsonl``, ``labels.jsonl``, ``tables/``)."""
    return benchmarks_dir() / "dabench"


def notebooks_dir() -> Path:
    """``$DATALYST_NOTEBOOKS``, else the ``shared/notebooks`` folder beside a source checkout (notebook mining)."""
    if override := os.environ.get("DATALYST_NOTEBOOKS"):
        return Path(override)
    return Path(__file__).resolve().parents[3] / "shared" / "notebooks"
