"""Runs of one setup over disjoint tasks read as one run: DABench's dev and test splits make the whole benchmark."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from datalyst.errors import ConfigError
from datalyst.eval._metrics import PassRates, pass_rates
from datalyst.eval._run import dialects_of, read_config, read_outcomes

TASK_CHOICE = frozenset({"split", "subset", "seed"})
"""The settings that choose a run's tasks: pooled runs may differ in these (and in what runs may change on resuming)."""


class PooledDialect(BaseModel):
    model_config = ConfigDict(frozen=True)

    dialect: str
    raw: PassRates
    reformatted: PassRates | None = None
    """The official protocol's figures, when every pooled run reformatted its answers with one model."""


class Pool(BaseModel):
    runs: list[str]
    n_tasks: int
    dialects: list[PooledDialect]

    def render(self) -> str:
        lines = [f"{self.n_tasks} tasks from {', '.join(self.runs)} (rates in %, 95% intervals)"]
        for d in self.dialects:
            for label, rates in (("raw", d.raw), ("official (reformatted)", d.reformatted)):
                if rates is not None:
                    lines.append(f"{d.dialect} {label}: pass@1 {rates.pass_at_1}  pass@{rates.k} {rates.pass_at_k}")
        return "\n".join(lines)


def pool_runs(runs: Sequence[str | Path]) -> Pool:
    """Pass rates over the union of ``runs``' tasks; the runs must share every setting but which tasks they ran."""
    if len(runs) < 2:
        raise ConfigError("pool needs two runs or more (for example a dev and a test run of one setup)")
    configs = [read_config(run) for run in runs]
    for run, config in zip(runs[1:], configs[1:], strict=True):
        if differing := [name for name in configs[0].changed_settings(config) if name not in TASK_CHOICE]:
            raise ConfigError(f"{run} differs from {runs[0]} in {', '.join(differing)}; pool runs of one setup only")
    one_reformatter = len({config.reformat_model for config in configs}) == 1
    outcomes, owner = [], {}
    for run in runs:
        mine = read_outcomes(run)
        for task_id in {v.task_id for v in mine}:
            if task_id in owner:
                raise ConfigError(f"task {task_id} is in both {owner[task_id]} and {run}; pool disjoint runs only")
            owner[task_id] = run
        outcomes += mine
    seed = configs[0].seed
    pooled = []
    for dialect in dialects_of(outcomes):
        mine = [v for v in outcomes if v.dialect == dialect]
        reformatted = None
        if one_reformatter and all(v.reformatted_score is not None for v in mine):
            rescored = [v.model_copy(update={"score": v.reformatted_score}) for v in mine]
            reformatted = pass_rates(rescored, seed=seed)
        pooled.append(PooledDialect(dialect=dialect, raw=pass_rates(mine, seed=seed), reformatted=reformatted))
    return Pool(runs=[str(run) for run in runs], n_tasks=len(owner), dialects=pooled)
