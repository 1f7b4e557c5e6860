"""Benchmarks by name: where their tasks come from."""

from __future__ import annotations

from pathlib import Path

from datalyst.errors import ConfigError
from datalyst.paths import benchmarks_dir
from datalyst.tasks import Task, load_bird, load_dabench, load_humaneval, load_tablebench, read_tasks

BENCHES: tuple[str, ...] = ("dabench", "tablebench", "bird", "humaneval", "tasks")


def load_bench(name: str, path: str | Path | None = None) -> list[Task]:
    """The tasks of benchmark ``name``.

    ``dabench`` and ``humaneval`` read the shared benchmarks folder unless ``path`` names another folder
    (DABench) or file (HumanEval); ``tablebench`` needs its JSONL file, ``bird`` its root folder and
    ``tasks`` a task JSONL file of our own.
    """
    if name == "dabench":
        return load_dabench(path)
    if name == "humaneval":
        return load_humaneval(path or benchmarks_dir() / "humaneval" / "HumanEval.jsonl.gz")
    if name not in BENCHES:
        raise ConfigError(f"unknown benchmark {name!r}; choose one of {', '.join(BENCHES)}")
    if path is None:
        what = {"tablebench": "its JSONL file", "bird": "its root folder", "tasks": "a task JSONL file"}[name]
        raise ConfigError(f"--bench {name} needs --bench-path pointing to {what}")
    if name == "tablebench":
        return load_tablebench(path)
    if name == "bird":
        return load_bird(path)
    return read_tasks(path)
