"""Fixtures shared by every test package."""

from __future__ import annotations

from pathlib import Path

import pytest

from datalyst.paths import benchmarks_dir

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="session")
def dabench_tables() -> Path:
    """The DABench CSV tables (skips the test when the benchmark folder is absent)."""
    tables = benchmarks_dir() / "dabench" / "tables"
    if not tables.is_dir():
        pytest.skip(f"DABench tables not found at {tables}; set DATALYST_BENCHMARKS")
    return tables


@pytest.fixture(scope="session")
def examples_dir() -> Path:
    return EXAMPLES
