"""Seeded, stratified subsets, so that quick runs stay comparable over time, and the dev/test split of a benchmark."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Literal

from datalyst.errors import ConfigError
from datalyst.tasks._task import Task

StratifyBy = Literal["level", "category"]
Split = Literal["dev", "test"]
DEV_SUBSETS: dict[str, tuple[int, int, StratifyBy]] = {"dabench": (60, 0, "level")}
"""Each benchmark's development subset (size, seed, strata): every choice of data, prompt or run is made on it;
the rest of the benchmark is its test split, run only to record a result."""


def stratified_subset(tasks: Sequence[Task], n: int, *, seed: int = 0, by: StratifyBy = "level") -> list[Task]:
    """``n`` tasks drawn without replacement, each stratum keeping its share (largest remainders).

    The same tasks, seed and ``n`` always give the same subset, returned in the original order.
    """
    if n >= len(tasks):
        return list(tasks)
    strata: dict[str, list[int]] = {}
    for index, task in enumerate(tasks):
        strata.setdefault(str(getattr(task, by)), []).append(index)
    keys = sorted(strata)
    quotas = {key: n * len(strata[key]) / len(tasks) for key in keys}
    counts = {key: int(quotas[key]) for key in keys}
    by_remainder = sorted(keys, key=lambda key: (-(quotas[key] - counts[key]), key))
    for key in by_remainder[: n - sum(counts.values())]:
        counts[key] += 1
    rng = random.Random(seed)
    chosen = {index for key in keys for index in rng.sample(strata[key], counts[key])}
    return [task for index, task in enumerate(tasks) if index in chosen]


def split_tasks(tasks: Sequence[Task], bench: str, split: Split) -> list[Task]:
    """The ``dev`` subset of ``bench`` (``DEV_SUBSETS``), or its ``test`` split: every other task, in order."""
    if bench not in DEV_SUBSETS:
        raise ConfigError(f"{bench} has no dev/test split; splits exist for {', '.join(DEV_SUBSETS)}")
    size, seed, by = DEV_SUBSETS[bench]
    dev = stratified_subset(tasks, size, seed=seed, by=by)
    if split == "dev":
        return dev
    held_out = {task.id for task in dev}
    return [task for task in tasks if task.id not in held_out]
