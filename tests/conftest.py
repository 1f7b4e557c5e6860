"""Fixtures shared by every test package."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import settings

from datalyst.paths import benchmarks_dir

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

# The properties tested are about values, not speed: a busy machine must not fail them on a deadline.
settings.register_profile("datalyst", deadline=None)
settings.load_profile("datalyst")


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


BIRD_MINI = Path(__file__).resolve().parent / "fixtures" / "bird_mini"


def _builder():
    spec = importlib.util.spec_from_file_location("bird_mini_build", BIRD_MINI / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_bird_mini


@pytest.fixture(scope="session")
def bird_mini(dabench_tables: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The root of bird_mini (``dev.json`` and ``dev_databases/``), built once from the DABench tables."""
    return _builder()(dabench_tables, tmp_path_factory.mktemp("bird_mini"))


def _run_datalyst(*args: str, stdin: str | None = None, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "datalyst", *args], input=stdin, capture_output=True, text=True, timeout=timeout_s
    )


@pytest.fixture
def datalyst() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run the real ``datalyst`` command the way a user does; returns the finished process."""
    return _run_datalyst


@pytest.fixture
def replay_spec(tmp_path: Path) -> Callable[..., str]:
    """Write recorded model outputs to a file and return the ``replay:`` spec that plays them."""

    def spec(outputs: list[str], *, per_turn: bool = False) -> str:
        path = tmp_path / "script.jsonl"
        path.write_text("".join(json.dumps(text) + "\n" for text in outputs))
        return f"replay:{path}{'?per_turn=true' if per_turn else ''}"

    return spec
